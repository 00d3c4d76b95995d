"""./scripts/test without arguments runs the suite as several pytest runs, each naming folders or
files (less those it --ignore's): together they must select every test file, once, so that a new
file or folder is never left out and none runs twice."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def selected(args: Sequence[str]) -> list[str]:
    """The test files one run's arguments select: the folders' test files and the files named,
    less those given to --ignore."""
    ignored = {arg.split("=", 1)[1] for arg in args if arg.startswith("--ignore=")}
    files = []
    for arg in args:
        if arg.startswith("tests/"):
            path = ROOT / arg
            files += [p.relative_to(ROOT).as_posix() for p in (sorted(path.glob("test_*.py")) if path.is_dir()
                                                              else [path])]
    return [f for f in files if f not in ignored]


def test_the_runs_select_every_test_file_once() -> None:
    runs = re.findall(r"^pytest_run (.*) \|\| status=\$\?$", (ROOT / "scripts" / "test").read_text(), re.MULTILINE)
    assert len(runs) >= 2, runs
    chosen = [name for run in runs for name in selected(run.split())]
    every = [p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("*/test_*.py")]
    assert sorted(chosen) == sorted(every)


def test_a_file_named_twice_or_left_out_is_seen() -> None:
    assert selected(["tests/lab", "--ignore=tests/lab/test_torture.py"]).count("tests/lab/test_torture.py") == 0
    assert selected(["tests/lab/test_torture.py"]) == ["tests/lab/test_torture.py"]
    assert "tests/lab/test_torture.py" in selected(["-n", "2", "tests/lab"])
