"""./scripts/bench fuzz [--examples N] [--quick]: the guard fuzzer alone (lab/fuzz.py, its oracle
lab/fuzz_oracle.py) on its own embedded Spark; writes benchmarks/results/fuzz.json and fuzz.png.

Each input is refused (naming the argument), accepted (the rendered SQL passes the oracle), unclear
(refused without naming the argument, on a twin or var) or a defect. The run fails when an input
is a defect or changed a table. The torture run (./scripts/torture) runs the same fuzzer beside
its load; this entry is the ≥ 1,000-input run without the 30-minute load.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks import field
from lab.fuzz import run_fuzz_process

FULL_EXAMPLES = 180  # about 1,080 inputs
QUICK_EXAMPLES = 6  # about 75 inputs
OUTCOMES = ("refused", "accepted", "unclear", "defects")


def plot(document: dict[str, Any], path: Path) -> None:
    """Inputs per target, stacked by outcome."""
    plt = field.pyplot()
    targets = sorted(document["by_target"])
    figure, axis = plt.subplots(figsize=(11, 0.32 * len(targets) + 1.5))
    left = [0] * len(targets)
    for outcome in OUTCOMES:
        counts = [document["by_target"][t].get(outcome, 0) for t in targets]
        axis.barh(targets, counts, left=left, label=outcome)
        left = [a + b for a, b in zip(left, counts, strict=True)]
    axis.margins(x=0.05)
    axis.set_xlabel("inputs")
    axis.legend(loc="lower right")
    axis.set_title(f"{document['tried']} inputs: {document['refused']} refused, {document['accepted']} accepted, "
                   f"{document['unclear']} unclear, {document['defect_count']} defects, "
                   f"{document['table_changed']} tables changed", fontsize=10)
    field.save_figure(figure, path)


def main() -> None:
    parser = argparse.ArgumentParser(prog="./scripts/bench fuzz", description=__doc__)
    parser.add_argument("--examples", type=int, default=None,
                        help=f"hypothesis draws per strategy (default {FULL_EXAMPLES}; {QUICK_EXAMPLES} with --quick)")
    parser.add_argument("--quick", action="store_true", help="a sample, for the test suite")
    parser.add_argument("--results", type=Path, default=field.RESULTS)
    args = parser.parse_args()
    examples = args.examples or (QUICK_EXAMPLES if args.quick else FULL_EXAMPLES)
    if examples < 1:
        parser.error(f"--examples {examples}: expected a whole number >= 1")
    start = field.run_start()
    with tempfile.TemporaryDirectory(prefix="bench-fuzz-") as scratch:
        document: dict[str, Any] = {"benchmark": "fuzz", "quick": args.quick,
                                    **run_fuzz_process(Path(scratch), examples)}
    document.update(field.provenance(start, versions_=lambda: {**field.versions(),
                                                              "hypothesis": metadata.version("hypothesis")}))
    path = field.write_results("fuzz", document, args.results)
    plot(document, path.with_suffix(".png"))
    print(f"tried {document['tried']}, refused {document['refused']}, accepted {document['accepted']}, "
          f"unclear {document['unclear']}, defects {document['defect_count']}, "
          f"tables changed {document['table_changed']} ({document['seconds']:.0f} s) -> {path}")
    if document["defect_count"] or document["table_changed"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
