"""The slowest tests of one or more pytest JUnit XML reports (scripts/pytest-runs prints them at
the end of each tier): `python -m tests.slowest REPORT.xml ... [--count N]`."""

from __future__ import annotations

import argparse
import re
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("reports", nargs="*", type=Path)
    parser.add_argument("--count", type=int, default=15)
    args = parser.parse_args()
    rows = slowest(args.reports, args.count)
    total = sum(seconds for seconds, _ in test_times(args.reports))
    print(f"\n{len(rows)} slowest tests (setup and teardown included; all tests together: {total:,.0f} s)")
    for seconds, name in rows:
        print(f"{seconds:8.1f} s  {name}")


if __name__ == "__main__":
    main()
