"""`./scripts/bench planner --quick` end to end on a small lake, in its own process and JVM."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.lab]


def test_quick_planner_benchmark(tmp_path: Path) -> None:
    result = subprocess.run([str(ROOT / "scripts" / "bench"), "planner", "--quick", "--tables", "5", "--rounds", "1",
                             "--results", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads((tmp_path / "planner.json").read_text())
    assert figures["tables"] == 5 and set(figures["mix"].values()) == {1}
    ms = figures["ms_per_table"]
    assert set(ms) == {"plan_gated", "plan", "health", "pyiceberg_inspect", "spark_metadata_tables", "health_via_dbt"}
    assert all(value > 0 for value in ms.values())
    assert (tmp_path / "planner.png").stat().st_size > 5000
    assert "ms/table" in result.stdout
