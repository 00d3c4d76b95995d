"""./scripts/bench fuzz [--examples N] [--quick]: the guard fuzzer alone (lab/fuzz.py, its oracle
lab/fuzz_oracle.py) on its own embedded Spark; writes benchmarks/results/fuzz.json and fuzz.png.

Each input is refused (naming the argument), accepted (the rendered SQL passes the oracle), unclear
(refused without naming the argument, on a twin or var) or a defect. The run fails when an input
is a defect or changed a table. The torture run (./scripts/torture) runs the same fuzzer beside
its load; this entry is the ≥ 1,000-input run without the 30-minute load.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import harness
from lab.fuzz import run_fuzz_process

FULL_EXAMPLES = 180  # about 1,080 inputs
QUICK_EXAMPLES = 6  # about 75 inputs
OUTCOMES = ("refused", "accepted", "unclear", "defects")


def plot(document: dict[str, Any], path: Path) -> None:
    """Inputs per target, stacked by outcome."""
    plt = harness.pyplot()
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
    harness.save_figure(figure, path)


def main() -> None:
    parser = harness.parser("fuzz", __doc__, "a sample, for the test suite")
    parser.add_argument("--examples", type=int, default=None,
                        help=f"hypothesis draws per strategy (default {FULL_EXAMPLES}; {QUICK_EXAMPLES} with --quick)")
    args = parser.parse_args()
    examples = harness.count(parser, "examples", args.examples, FULL_EXAMPLES, QUICK_EXAMPLES, args)
    start = harness.run_start()
    with tempfile.TemporaryDirectory(prefix="bench-fuzz-") as scratch:
        document: dict[str, Any] = {"benchmark": "fuzz", "quick": args.quick,
                                    **run_fuzz_process(Path(scratch), examples)}
    document.update(harness.provenance(start, versions_=lambda: harness.versions("hypothesis")))
    harness.publish("fuzz", document, args.results, plot, print_summary)
    if document["defect_count"] or document["table_changed"]:
        sys.exit(1)


def print_summary(document: dict[str, Any]) -> None:
    print(f"tried {document['tried']}, refused {document['refused']}, accepted {document['accepted']}, "
          f"unclear {document['unclear']}, defects {document['defect_count']}, "
          f"tables changed {document['table_changed']} ({document['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
