"""The torture run (issue 14, docs/torture.md): writer processes, the maintenance loop, crashes,
catalog cuts and fuzzed input on a PostgreSQL JDBC catalog (`--catalog hive_metastore`: on a Hive
Metastore's Hive catalog). Writes benchmarks/results/torture.json and prints a summary. `--quick`
is the form the test suite runs; `--minutes N` the load's length."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks import harness
from lab.fuzz import run_fuzz_process
from lab.torture import CATALOGS, full_settings, quick_settings, run_torture


def summary(document: dict[str, Any]) -> str:
    load = document["load"]
    lines = [f"load: {load['writer_processes']} writer process(es) + maintenance for {load['seconds']} s, "
             f"{load['commits']} batches committed, {load['maintenance_invocations']} maintenance invocations "
             f"completed ({load.get('maintenance_invocations_ok', 0)} with exit 0)",
             "maintenance operations (loop): " + "; ".join(
                 f"{op} {counts}" for op, counts in sorted(load["maintenance_operations"].items())),
             f"next maintenance completed {document['next_maintenance_completed']}, aged orphans left "
             f"{document['orphans']['aged_left_after_remove_orphan_files']} of {document['orphans']['aged']}",
             f"rows lost {document['rows_lost']}, rows duplicated {document['rows_duplicated']}, "
             f"referenced files deleted {document['referenced_files_deleted']}"]
    lines += [f"  {kind:<40} injected {v['injected']:>3}  survived {v['survived']:>3}"
              for kind, v in sorted(document["faults"].items())]
    bad = document.get("bad_inputs")
    if bad:
        lines.append(f"bad inputs: tried {bad['tried']}, refused {bad['refused']}, accepted {bad['accepted']}, "
                     f"unclear {bad.get('unclear', 0)}, defects {bad.get('defect_count', 0)}, "
                     f"table changed {bad['table_changed']}")
        lines += [f"  DEFECT case {d['id']}: {json.dumps(d['case'], ensure_ascii=False)[:200]} -> {d['verdict'][:200]}"
                  for d in bad.get("defects", [])[:10]]
    return "\n".join(lines)


def plot(document: dict[str, Any], path: Path) -> None:
    """Faults injected vs survived per kind, and the load's commits per table."""
    plt = harness.pyplot()
    kinds = sorted(document["faults"])
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [2, 1]})
    positions = range(len(kinds))
    left.barh([p + 0.2 for p in positions], [document["faults"][k]["injected"] for k in kinds], 0.4, label="injected")
    left.barh([p - 0.2 for p in positions], [document["faults"][k]["survived"] for k in kinds], 0.4, label="survived")
    left.set_yticks(list(positions), [k.replace("catalog_cut_", "cut: ").replace("kill_", "kill -9 ") for k in kinds])
    left.set_xlabel("count")
    left.legend()
    left.set_title(f"faults ({document['load']['seconds'] / 60:.0f} min of load)")
    tables = document["tables"]
    right.bar([t["table"] for t in tables], [t["batches_observed"] for t in tables])
    right.set_ylabel("batches in the table")
    right.set_title(f"rows lost {document['rows_lost']}, duplicated {document['rows_duplicated']}, "
                    f"files deleted {document['referenced_files_deleted']}", fontsize=9)
    harness.save_figure(figure, path, dpi=110)


def main() -> None:
    parser = harness.parser("torture", __doc__, "the short form the test suite runs")
    parser.prog = "./scripts/torture"
    parser.add_argument("--minutes", type=float, default=30.0, help="minutes of load (full form)")
    parser.add_argument("--catalog", choices=CATALOGS, default="jdbc",
                        help="the catalog the workers share: jdbc (PostgreSQL, default) or hive_metastore "
                             "(a Hive Metastore on PostgreSQL)")
    parser.add_argument("--fuzz-examples", type=int, default=None, help="hypothesis examples per strategy")
    parser.add_argument("--replot", action="store_true", help="only redraw torture.png from --results' torture.json")
    parser.add_argument("--keep", type=Path, default=None,
                        help="run in this (new) directory and keep it: worker logs, events, ledger, warehouse")
    args = parser.parse_args()
    if args.replot:
        plot(json.loads((args.results / "torture.json").read_text()), args.results / "torture.png")
        return
    settings = quick_settings() if args.quick else full_settings(args.minutes)
    start = harness.run_start()
    if args.keep:
        args.keep.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="torture-") as scratch, ThreadPoolExecutor(1) as pool:
        tmp = str(args.keep or scratch)
        # The fuzz has its own JVM and warehouse: it runs beside the load instead of after it.
        # The full run tries about 1,080 inputs (180 examples), the quick one about 75 (6).
        examples = args.fuzz_examples or (6 if args.quick else 180)
        fuzz = pool.submit(run_fuzz_process, Path(tmp) / "fuzz", examples)
        document = run_torture(settings, Path(tmp) / "run", log=lambda m: print(time.strftime("%H:%M:%S"), m,
                                                                               flush=True), catalog=args.catalog)
        # The load's figures are kept even if the fuzz phase breaks; the exit status says so.
        try:
            document["bad_inputs"] = fuzz.result()
        except RuntimeError as exc:
            document["bad_inputs"] = {"tried": 0, "refused": 0, "accepted": 0, "table_changed": 0,
                                      "defect_count": 0, "defects": [], "by_target": {}, "error": str(exc)}
    document.update(harness.provenance(start, versions_=lambda: harness.versions("hypothesis")))
    harness.publish("torture", document, args.results, plot, lambda figures: print(summary(figures)))
    ok = (document["rows_lost"] == 0 and document["rows_duplicated"] == 0
          and document["referenced_files_deleted"] == 0 and document["bad_inputs"]["table_changed"] == 0
          and not document["bad_inputs"].get("error") and document["bad_inputs"]["defect_count"] == 0)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
