"""The slowest tests of one or more pytest JUnit XML reports (scripts/pytest-runs prints them at
the end of each tier): `python -m tests.slowest REPORT.xml ... [--count N]`; and `--machine-speed`,
the time of a fixed pure-Python loop, which a tier prints at its start and end."""

from __future__ import annotations

import argparse
import re
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable
from pathlib import Path


def test_times(reports: Iterable[Path]) -> list[tuple[float, str]]:
    """(seconds, test id) for every test case in the reports; a report pytest never wrote is skipped."""
    times = []
    for report in reports:
        if not report.is_file():
            continue
        for case in ElementTree.parse(report).iter("testcase"):
            module = case.get("classname", "").replace(".", "/")
            name = re.sub(r"@[^@\]]+$", "", case.get("name", ""))  # xdist's group suffix (--dist loadgroup)
            times.append((float(case.get("time") or 0), f"{module}.py::{name}"))
    return times


def slowest(reports: Iterable[Path], count: int) -> list[tuple[float, str]]:
    return sorted(test_times(reports), reverse=True)[:count]


def machine_speed() -> float:
    """Seconds one core takes for a fixed pure-Python loop: 0.7 to 1.2 s within one day on the
    2-core virtual machine of docs/suite-times.md, where the same test tier took 961 s of pytest
    in one run and 1,176 s in another hours later, every test slower alike. A tier's time means
    little without the machine's speed beside it."""
    started = time.perf_counter()
    sum(i * i for i in range(10**7))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("reports", nargs="*", type=Path)
    parser.add_argument("--count", type=int, default=15)
    parser.add_argument("--machine-speed", metavar="WHEN", help="print machine_speed() for WHEN (start, end) instead")
    args = parser.parse_args()
    if args.machine_speed:
        print(f"machine speed at the {args.machine_speed}: a fixed pure-Python loop took {machine_speed():.2f} s")
        return
    rows = slowest(args.reports, args.count)
    total = sum(seconds for seconds, _ in test_times(args.reports))
    print(f"\n{len(rows)} slowest tests (setup and teardown included; all tests together: {total:,.0f} s)")
    for seconds, name in rows:
        print(f"{seconds:8.1f} s  {name}")


if __name__ == "__main__":
    main()
