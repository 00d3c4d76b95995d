"""`./scripts/bench fleet --quick` in the suite: one lake of 8 tables on the PostgreSQL catalog,
through a Thrift Server on the suite's standalone cluster, maintained once (night 0), changed as a
day of writers would, then one night by every variant from the same restored state. Asserts the
invariants, not the speed targets (those need the full run, docs/benchmarks-fleet.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import fleet, harness
from lab.cluster import SparkCluster
from lab.postgres import PostgresServer

pytestmark = [pytest.mark.integration, pytest.mark.lab]


@pytest.mark.timeout(1200)
def test_quick_fleet_night_gives_every_variant_the_same_lake(postgres_server: PostgresServer,
                                                              spark_cluster: SparkCluster, tmp_path: Path) -> None:
    figures = fleet.run(fleet.QUICK_SCALES, legacy_max=fleet.QUICK_SCALES[0], concurrency=fleet.CONCURRENCY,
                        quick=True, postgres=postgres_server, cluster=spark_cluster)
    harness.publish(fleet.NAME, figures, tmp_path, fleet.plot, fleet.summary)

    written = json.loads((tmp_path / "fleet.json").read_text())
    assert written["quick"] and written["complete"] and (tmp_path / "fleet.png").is_file()
    assert isinstance(written["commit"], str) and len(written["load_average"]["start"]) == 3
    [scale] = written["scales"]
    assert scale["tables"] == 8
    assert scale["kinds"] == {"small_files": 1, "orphans": 1, "large": 1, "unchanged": 5}
    first = scale["first_night"]
    assert first["ok"] and first["failed"] == [] and first["calls"] > 0, first
    variants = scale["variants"]
    assert list(variants) == ["a_macros_legacy", "b_macros_now", "c_fleet_1", "c_fleet_2", "c_fleet_4"]
    reference = variants["b_macros_now"]
    # The small-files table is compacted by every variant (its six fresh files are due).
    assert any(step.startswith("t0000 ") for step in reference["steps_run"]), reference
    for name, variant in variants.items():
        assert variant["ok"] and variant["results"]["failed"] == 0, (name, variant)
        # Same steps, same CALLs, the same end health table by table, the same orphans left.
        assert variant["steps_run"] == reference["steps_run"], (name, variant["steps_run"])
        assert variant["calls"] == reference["calls"] == len(reference["steps_run"]), (name, variant)
        assert variant["health_differs_from_b"] == [], (name, variant)
        assert variant["orphans_left"] == reference["orphans_left"], (name, variant)
        # Maintenance is a fixed point: nothing wrote to the unchanged tables since night 0.
        assert variant["unchanged_tables_maintained"] == [], (name, variant)
    # The fleet engine plans from metadata: it sends the same statements whatever the concurrency
    # (workers that start together first create the namespace's lease log and check the history
    # table, which one worker alone does at its first step; no step after that does either
    # again), fewer than the macro path, which reads every table's health through Spark.
    single, *parallel = (variants[f"c_fleet_{n}"]["statements"] for n in fleet.CONCURRENCY)
    assert parallel == [single] * len(parallel) and single < reference["statements"], variants
    assert all(variants[f"c_fleet_{n}"]["planning_s"] > 0 for n in fleet.CONCURRENCY), variants
    # The flat view: one record per variant, named as docs/benchmarks-fleet.md names them.
    assert written["load"] == written["load_average"]
    assert [(v["name"], v["concurrency"]) for v in written["variants"]] == [
        ("iceberg_maintenance", 1), ("iceberg_maintenance_tiered", 1), ("fleet", 1), ("fleet", 2), ("fleet", 4)]
    for flat in written["variants"]:
        assert (flat["tables"], flat["changed_tables"], flat["end_health_equal"]) == (8, 2, True), flat
        assert (flat["wall_s"], flat["calls"]) == (variants[flat["key"]]["wall_s"], reference["calls"]), flat
    # A table left unhealthy by the night would be a maintenance miss, not a benchmark figure.
    assert scale["tables_left_unhealthy_by_b"] == [], scale
