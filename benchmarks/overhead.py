"""P4 overhead: each maintenance procedure through the package (`dbt run-operation
iceberg_maintenance`, as a nightly job calls it) vs the raw `CALL` it sends, on identical table
states rebuilt before every call, alternating which goes first.

Three timed spans per macro call: end-to-end (the whole dbtRunner invocation: dbt start-up,
project load, connection, the macro's planning queries, the CALL, its result line), the SQL span
(first statement dbt sent to last statement's end: everything the macro asks Spark to do) and the
CALL statement alone; the raw side is `spark.sql(CALL).collect()` in the same process and session.
The state check compares what the calls can change: the table's current snapshot id, its snapshot
count, data/delete files and records, its properties and the files in its data folder, before and
after every timed call. Both sides must start from equal states and end in equal states (snapshot
ids aside: every rebuild makes new ones); a dry run of every procedure must change nothing at all.
Writes benchmarks/results/overhead.{json,png}; prints a summary table."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import field, harness
from dbt_iceberg_maint.maintenance.results import parse_result_lines

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROCEDURES = ("rewrite_data_files", "rewrite_position_delete_files", "expire_snapshots", "remove_orphan_files",
              "rewrite_manifests")
MODEL = "overhead_target"
GOAL_RATIO = 1.05
ORPHAN_AGE_S = 96 * 3600  # older than the policy's 72 h window: both sides delete them


def build_state(spark: SparkSession, warehouse: Path, commits: int, deletes: int, orphans: int) -> dict[str, Any]:
    """The same table state every time: `commits` appends over 4 day partitions,
    `deletes` merge-on-read deletes (position delete files), and `orphans` files in the data
    folder that no snapshot references, aged past the orphan window. Returns its fingerprint."""
    name = field.table(MODEL)
    spark.sql(f"drop table if exists {name} purge")
    spark.sql(f"create table {name} (id bigint, day date, payload string) using iceberg partitioned by (day) "
              "tblproperties ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    for i in range(commits):
        spark.sql(f"insert into {name} select /*+ REPARTITION(2) */ id, "
                  f"date_add(date'2026-01-01', cast(id % 4 as int)), repeat('x', 40) "
                  f"from range({i * 400}, {(i + 1) * 400})")
    for j in range(deletes):
        spark.sql(f"delete from {name} where id % 97 = {j}")
    # The JDBC catalog's default table location: <warehouse>/<namespace>/<table>.
    aged = time.time() - ORPHAN_AGE_S
    for k in range(orphans):
        orphan = data_dir(warehouse) / f"orphan-{k}.parquet"
        orphan.write_bytes(b"not referenced by any snapshot")
        os.utime(orphan, (aged, aged))
    return fingerprint(spark, warehouse)


def data_dir(warehouse: Path) -> Path:
    """The JDBC catalog's default table location: <warehouse>/<namespace>/<table>/data."""
    return warehouse / field.SCHEMA / MODEL / "data"


def fingerprint(spark: SparkSession, warehouse: Path) -> dict[str, Any]:
    """What a maintenance call can change: the current snapshot (id and totals), the number of
    snapshots, the table's properties and the files in its data folder (orphans included)."""
    name = field.table(MODEL)
    row = spark.sql(f"select count(*), max_by(snapshot_id, committed_at), max_by(summary, committed_at) "
                    f"from {name}.snapshots").collect()[0]
    summary = row[2]
    properties = {r[0]: r[1] for r in spark.sql(f"show tblproperties {name}").collect()}
    folder = data_dir(warehouse)
    return {"snapshot_id": int(row[1]), "snapshots": int(row[0]),
            **{key: int(summary[key]) for key in ("total-data-files", "total-delete-files", "total-records")},
            "properties": properties,
            "files_in_data_folder": sum(1 for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0}


# Ids every rebuild makes anew: equal states of two rebuilds differ in them and nothing else.
REBUILD_IDS = ("snapshot_id",)
REBUILD_PROPERTIES = ("current-snapshot-id",)


def comparable(state: dict[str, Any]) -> dict[str, Any]:
    """A state without the ids a rebuild makes anew."""
    kept = {k: v for k, v in state.items() if k not in REBUILD_IDS}
    kept["properties"] = {k: v for k, v in state["properties"].items() if k not in REBUILD_PROPERTIES}
    return kept


def changed_keys(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What a call changed, by key (properties by property name)."""
    keys = [k for k in before if k != "properties" and before[k] != after.get(k)]
    names = sorted(set(before["properties"]) | set(after["properties"]))
    keys += [f"properties.{n}" for n in names if before["properties"].get(n) != after["properties"].get(n)]
    return keys


def planned_sql(project: Path) -> dict[str, str]:
    """The CALL each procedure's step sends, from iceberg_maintenance's dry run (it renders the
    plan and executes nothing): the raw side sends exactly this text."""
    args = {"select": MODEL, "operations": list(PROCEDURES), "force": True, "dry_run": True}
    run = field.run_dbt(project, ["run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args", json.dumps(args)])
    sql = {r.operation: r.sql for r in parse_result_lines(run.messages) if r.sql}
    if not run.success or set(sql) != set(PROCEDURES):
        raise RuntimeError(f"iceberg_maintenance dry run rendered {sorted(sql)}: {run.error}")
    return sql


def dry_run_check(spark: SparkSession, project: Path, warehouse: Path) -> dict[str, Any]:
    """The dry run of every procedure on a fresh state: the state after must equal the one
    before in everything, snapshot id included."""
    before = fingerprint(spark, warehouse)
    sql = planned_sql(project)
    after = fingerprint(spark, warehouse)
    return {"unchanged": before == after, "changed": changed_keys(before, after), "sql": sql}


def macro_call(project: Path, procedure: str) -> dict[str, Any]:
    args = {"select": MODEL, "operations": [procedure], "force": True}
    run = field.run_dbt(project, ["run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args", json.dumps(args)])
    results = [r for r in parse_result_lines(run.messages) if r.operation == procedure]
    if not run.success or len(results) != 1 or results[0].status != "success":
        raise RuntimeError(f"iceberg_maintenance {procedure} did not succeed: {run.error} {results}")
    return {"end_to_end_s": run.wall_s, "sql_span_s": run.sql_span_s, "call_s": run.statement_s("call"),
            "lease_s": sum((end - start) / 1000 for sql, start, end in run.statements
                           if end is not None and is_lease_statement(sql)),
            "statements": len(run.statements), "sent": [statement_head(sql) for sql, _start, _end in run.statements],
            "sql": results[0].sql, "metrics": dict(results[0].metrics)}


def is_lease_statement(sql: str) -> bool:
    """The per-table lease's statements (docs/leases.md): its log's creation, appends and reads,
    and the REFRESH TABLE of the maintained table after taking it."""
    text = field.LEADING_COMMENTS.sub("", sql).lower()
    return "iceberg_maint_leases" in text or text.startswith("refresh table")


def statement_head(sql: str) -> str:
    """A statement's first words, without dbt's query comment: what the macro asked Spark for."""
    return " ".join(field.LEADING_COMMENTS.sub("", sql).split()[:6])


def _masked(sql: str) -> str:
    """remove_orphan_files' cut-off is "72 h before now": equal SQL up to that instant."""
    return re.sub(r"TIMESTAMP '[^']*'", "TIMESTAMP '<instant>'", sql)


def raw_call(spark: SparkSession, sql: str) -> dict[str, Any]:
    started = time.perf_counter()
    rows = spark.sql(sql).collect()
    elapsed = time.perf_counter() - started
    return {"raw_s": elapsed, "rows": len(rows), "first_row": rows[0].asDict() if rows else {}}


def comparable_output(procedure: str, macro: dict[str, Any], raw: dict[str, Any]) -> tuple[Any, Any]:
    """What both sides did, in the same terms (remove_orphan_files returns a row per file)."""
    if procedure == "remove_orphan_files":
        return macro["metrics"].get("orphan_file_count"), raw["rows"]
    keys = sorted(k for k in raw["first_row"] if k in macro["metrics"])
    return ({k: macro["metrics"][k] for k in keys if "bytes" not in k},
            {k: raw["first_row"][k] for k in keys if "bytes" not in k})


def run(lake: field.Lake, work: Path, start: harness.RunStart, reps: int, quick: bool) -> dict[str, Any]:
    commits, deletes, orphans = (2, 1, 2) if quick else (3, 1, 3)
    samples: dict[str, list[dict[str, Any]]] = {p: [] for p in PROCEDURES}
    started = time.perf_counter()
    with harness.LoadSampler() as load:
        spark = field.start_spark(lake, "bench-overhead")
        try:
            project = field.scratch_project(work)
            build_state(spark, lake.warehouse, commits, deletes, orphans)
            dry_runs = [dry_run_check(spark, project, lake.warehouse)]
            sql = dry_runs[0]["sql"]
            for rep in range(reps):
                for index, procedure in enumerate(PROCEDURES):
                    order = ("macro", "raw") if (rep + index) % 2 == 0 else ("raw", "macro")
                    pair: dict[str, Any] = {"rep": rep, "order": list(order)}
                    for side in order:
                        before = build_state(spark, lake.warehouse, commits, deletes, orphans)
                        pair[side] = (macro_call(project, procedure) if side == "macro"
                                      else raw_call(spark, sql[procedure]))
                        after = fingerprint(spark, lake.warehouse)
                        pair[f"{side}_state"] = {"before": before, "after": after,
                                                 "changed": changed_keys(before, after)}
                    macro_out, raw_out = comparable_output(procedure, pair["macro"], pair["raw"])
                    states = pair["macro_state"], pair["raw_state"]
                    pair["same_start"] = comparable(states[0]["before"]) == comparable(states[1]["before"])
                    pair["same_end"] = comparable(states[0]["after"]) == comparable(states[1]["after"])
                    pair["same_output"] = macro_out == raw_out
                    pair["same_sql"] = _masked(pair["macro"].pop("sql")) == _masked(sql[procedure])
                    samples[procedure].append(pair)
                build_state(spark, lake.warehouse, commits, deletes, orphans)
                dry_runs.append(dry_run_check(spark, project, lake.warehouse))
                print(f"  overhead: rep {rep + 1}/{reps} done ({time.perf_counter() - started:.0f} s)", flush=True)
        finally:
            spark.stop()
    return summarize(samples, sql, reps, quick, (commits, deletes, orphans), load, lake.master,
                     time.perf_counter() - started, dry_runs, start)


def summarize(samples: dict[str, list[dict[str, Any]]], sql: dict[str, str], reps: int, quick: bool,
              state: tuple[int, int, int], load: harness.LoadSampler, master: str, duration_s: float,
              dry_runs: list[dict[str, Any]], start: harness.RunStart) -> dict[str, Any]:
    procedures = {}
    for procedure, pairs in samples.items():
        raw = harness.median([p["raw"]["raw_s"] for p in pairs])
        medians = {key: harness.median([p["macro"][key] for p in pairs if p["macro"][key] is not None])
                   for key in ("end_to_end_s", "sql_span_s", "call_s", "lease_s")}
        # The SQL span without the lease (its kill switch gives that cost back, docs/leases.md).
        medians["sql_span_without_lease_s"] = harness.median(
            [p["macro"]["sql_span_s"] - p["macro"]["lease_s"] for p in pairs if p["macro"]["sql_span_s"] is not None])
        ratios = {f"{key.removesuffix('_s')}_over_raw": (round(value / raw, 3) if value and raw else None)
                  for key, value in medians.items()}
        procedures[procedure] = {
            "sql": sql[procedure], "pairs": len(pairs),
            "median_s": {"raw": raw, **{f"macro_{k}": v for k, v in medians.items()}},
            "ratios": ratios,
            "macro_statements": harness.median([p["macro"]["statements"] for p in pairs]),
            "macro_sent": pairs[0]["macro"]["sent"] if pairs else [],
            "identical_start_states": sum(p["same_start"] for p in pairs),
            "identical_end_states": sum(p["same_end"] for p in pairs),
            "calls_that_changed_the_state": {side: sum(bool(p[f"{side}_state"]["changed"]) for p in pairs)
                                             for side in ("macro", "raw")},
            "changed_by_macro": sorted({k for p in pairs for k in p["macro_state"]["changed"]}),
            "identical_outputs": sum(p["same_output"] for p in pairs),
            "identical_sql": sum(p["same_sql"] for p in pairs),
            "goal_met_sql_span": (ratios["sql_span_over_raw"] or 99) <= GOAL_RATIO,
            "goal_met_sql_span_without_lease": (ratios["sql_span_without_lease_over_raw"] or 99) <= GOAL_RATIO,
            "samples": pairs,
        }
    return {
        "benchmark": "overhead", "quick": quick, "repetitions": reps, "master": master,
        "state": {"commits": state[0], "deletes": state[1], "orphans": state[2], "partitions": 4},
        "goal": {"ratio_of_medians_max": GOAL_RATIO,
                 "evaluated_on": "sql_span (every statement the macro sends) over the raw CALL"},
        "procedures": procedures, "duration_s": round(duration_s, 1),
        "dry_runs": {"runs": len(dry_runs), "unchanged": sum(d["unchanged"] for d in dry_runs),
                     "changed": sorted({k for d in dry_runs for k in d["changed"]})},
        **harness.provenance(start, load),
        "settings": {"spark": field.SPARK_CONF, "macro": "dbt run-operation dbt_iceberg_maint.iceberg_maintenance "
                     "--args {select: overhead_target, operations: [<procedure>], force: true}"},
    }


def plot(figures: dict[str, Any], path: Path) -> None:
    plt = harness.pyplot()
    procs = list(figures["procedures"])
    series = (("raw", "raw CALL", "#2e7d32"), ("macro_call_s", "macro: CALL statement", "#66bb6a"),
              ("macro_sql_span_without_lease_s", "macro: its SQL but the lease", "#ffb74d"),
              ("macro_sql_span_s", "macro: all its SQL", "#fbc02d"), ("macro_end_to_end_s", "dbt run-operation",
                                                                      "#c62828"))
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.16
    for i, (key, label, color) in enumerate(series):
        values = [figures["procedures"][p]["median_s"].get(key) or 0 for p in procs]
        ax.bar([x + (i - 2) * width for x in range(len(procs))], values, width, label=label, color=color)
    ax.set_xticks(range(len(procs)))
    ax.set_xticklabels([p.replace("_", "_\n", 1) for p in procs], fontsize=8)
    ax.set_ylabel("median seconds")
    ax.set_title(f"P4 overhead: macro vs raw CALL, {figures['repetitions']} alternating pairs per procedure")
    ax.legend(fontsize=8)
    harness.save_figure(fig, path)


def print_summary(figures: dict[str, Any]) -> None:
    print(f"overhead benchmark: {figures['repetitions']} pairs per procedure, master {figures['master']}, "
          f"load {figures['machine']['load_average_1m']}, {figures['duration_s']} s")
    print(f"  {'procedure':<32}{'raw s':>8}{'call s':>8}{'sql s':>8}{'e2e s':>8}{'call x':>8}{'sql x':>8}"
          f"{'-lease x':>9}{'e2e x':>8}  same end state/output")
    for name, p in figures["procedures"].items():
        m, r = p["median_s"], p["ratios"]
        print(f"  {name:<32}{m['raw']:>8.3f}{m['macro_call_s']:>8.3f}{m['macro_sql_span_s']:>8.3f}"
              f"{m['macro_end_to_end_s']:>8.3f}{r['call_over_raw']:>8.2f}{r['sql_span_over_raw']:>8.2f}"
              f"{r['sql_span_without_lease_over_raw']:>9.2f}{r['end_to_end_over_raw']:>8.2f}  "
              f"{p['identical_end_states']}/{p['pairs']} {p['identical_outputs']}/{p['pairs']}  "
              f"changed: {', '.join(p['changed_by_macro']) or 'nothing'}")
    dry = figures["dry_runs"]
    print(f"  dry runs that left the table unchanged (snapshot id included): {dry['unchanged']}/{dry['runs']}")


def main() -> None:
    parser = harness.parser("overhead", __doc__, "small states, 1 pair each: for the test suite")
    parser.add_argument("--rounds", type=int, default=None, help="pairs per procedure (default 10; 1 with --quick)")
    field.add_lake_arguments(parser)
    args = parser.parse_args()
    reps = harness.count(parser, "rounds", args.rounds, 10, 1, args)
    field.run_benchmark("overhead", args, lambda lake, work, start: run(lake, work, start, reps, args.quick), plot,
                        print_summary)


if __name__ == "__main__":
    main()
