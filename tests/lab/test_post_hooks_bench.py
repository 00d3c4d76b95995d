"""benchmarks/post_hooks.py --quick, run as users run it (its own Spark application on the
embedded runtime): its invariants and JSON shape, not the 1.2x target (the full run's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lab.test_effect_bench import DEADLINE_S, ROOT, assert_provenance

pytestmark = [pytest.mark.integration, pytest.mark.lab]


def test_post_hooks_quick_times_steady_state_and_full_check_runs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.post_hooks", "--quick", "--results", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=DEADLINE_S)
    assert done.returncode == 0, f"post_hooks failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert (tmp_path / "post_hooks.png").stat().st_size > 0
    figures = json.loads((tmp_path / "post_hooks.json").read_text())
    assert figures["benchmark"] == "post_hooks" and figures["quick"] is True and figures["pairs"] == 1
    assert_provenance(figures)
    models = figures["project"]["models"]
    assert models == 6  # the quick shape: events, customers, 2 merge marts, 1 append mart, 1 table
    # The warm-up's hooks run checked every operation of every table and set the properties; the
    # tables are minutes old, so no orphan sweep (the benchmark then records them as swept).
    warm_hooks = figures["warm_up"][1]["maintenance"]
    assert warm_hooks["remove_orphan_files:skipped"] == warm_hooks["apply_table_properties:success"] == models
    # In steady state every operation is within its interval: skipped, nothing run, no health read.
    steady = figures["samples"][0]["hooks"]
    assert set(steady["maintenance"]) == {f"{op}:skipped" for op in (
        "apply_table_properties", "rewrite_data_files", "expire_snapshots", "remove_orphan_files",
        "rewrite_manifests")}, steady["maintenance"]
    assert "metadata table query" not in steady["breakdown"] and "call remove_orphan_files" not in steady["breakdown"]
    # Once the records are gone, the hooks run decides (and runs) every operation again.
    [full] = figures["full_check_runs"]["samples"]
    assert full["maintenance"]["remove_orphan_files:success"] == models, full["maintenance"]
    assert full["breakdown"]["metadata table query"]["statements"] >= models
    assert isinstance(figures["ratio"], float) and isinstance(figures["full_check_runs"]["over_plain"], float)
