"""The two tiers split the suite by marker: `./scripts/test` runs every test folder without the
markers `lab` and `catalogs`, `./scripts/lab` runs the tests with one of them, in several pytest runs
that together select every file that can hold one, once. So a new file or folder is never left
out, none runs twice, and a test belongs to exactly one tier."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST_TIER = "not (lab or catalogs)"
LAB_TIER = "lab or catalogs"


def runs(script: str) -> list[list[str]]:
    """The arguments of each whole-tier `pytest_run` in a script (continuation lines joined)."""
    text = (ROOT / "scripts" / script).read_text().replace("\\\n", " ")
    return [shlex.split(line) for line in re.findall(r"^\s*pytest_run (-.*?) \|\| status=\$\?$", text, re.MULTILINE)]


def marker_expression(args: Sequence[str]) -> str | None:
    return next((args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "-m"), None)


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


def every_test_file() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("*/test_*.py"))


def test_the_test_tier_runs_every_file_without_the_lab_markers() -> None:
    [run] = runs("test")
    assert marker_expression(run) == TEST_TIER
    assert sorted(selected(run)) == every_test_file()


def test_the_lab_runs_select_every_file_that_can_hold_a_lab_test_once() -> None:
    lab_runs = runs("lab")
    assert len(lab_runs) >= 2, lab_runs
    assert all(marker_expression(run) == LAB_TIER for run in lab_runs), lab_runs
    chosen = [name for run in lab_runs for name in selected(run)]
    assert len(chosen) == len(set(chosen)), chosen
    outside = [f for f in every_test_file() if f not in chosen]
    # The files no lab run names mark nothing for the lab and repeat on no catalog.
    assert outside, "the unit tests and the wheel demo are no part of the lab"
    for name in outside:
        text = (ROOT / name).read_text()
        assert not re.search(r"mark\.(lab|catalogs)\b|^CATALOGS\b", text, re.MULTILINE), name


def test_a_file_named_twice_or_left_out_is_seen() -> None:
    assert selected(["tests/lab", "--ignore=tests/lab/test_torture.py"]).count("tests/lab/test_torture.py") == 0
    assert selected(["tests/lab/test_torture.py"]) == ["tests/lab/test_torture.py"]
    assert "tests/lab/test_torture.py" in selected(["-n", "2", "tests/lab"])
    assert marker_expression(["-n", "2", "-m", LAB_TIER, "tests/lab"]) == LAB_TIER
