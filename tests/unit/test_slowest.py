"""tests/slowest.py, which ends each tier (scripts/pytest-runs): the slowest tests of its JUnit
reports and the machine's speed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests import slowest as tool  # its test_times would be collected as a test if imported by name

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.integration.test_a" name="test_fast" time="1.5"/>
<testcase classname="tests.integration.test_b" name="test_slow[embedded]@postgres" time="30.25"/>
<testcase classname="tests.unit.test_c" name="test_middle" time="4"/>
</testsuite></testsuites>
"""


def test_the_slowest_come_first_named_as_pytest_names_them(tmp_path: Path) -> None:
    report = tmp_path / "run-1.xml"
    report.write_text(REPORT)
    assert tool.slowest([report, tmp_path / "never-written.xml"], 2) == [
        (30.25, "tests/integration/test_b.py::test_slow[embedded]"),  # without xdist's group suffix
        (4.0, "tests/unit/test_c.py::test_middle"),
    ]
    assert sum(seconds for seconds, _ in tool.test_times([report])) == 35.75


def test_the_machine_speed_is_one_line_with_its_seconds() -> None:
    done = subprocess.run([sys.executable, "-m", "tests.slowest", "--machine-speed", "start"],
                          capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[2])
    [line] = done.stdout.splitlines()
    assert line.startswith("machine speed at the start: a fixed pure-Python loop took ")
    assert float(line.rsplit(" ", 2)[1]) > 0
