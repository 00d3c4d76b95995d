"""./scripts/test without arguments runs the suite as two pytest runs, each naming its folders:
together they must name every test folder, once, so that a new folder is never left out."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_two_runs_name_every_test_folder_once() -> None:
    runs = re.findall(r"^pytest_run (.*) \|\| status=\$\?$", (ROOT / "scripts" / "test").read_text(), re.MULTILINE)
    assert len(runs) == 2, runs
    named = [arg for run in runs for arg in run.split() if arg.startswith("tests/")]
    folders = {p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("*/test_*.py")}
    assert sorted(named) == sorted(folders)
