"""The metadata planner (pyiceberg, no Spark) gives table_health's figures and maintain(dry_run)'s
decisions on real tables in varied states, on the embedded default catalog (a SQLite JDBC catalog,
read through pyiceberg's SqlCatalog); test_metadata_equality_hadoop.py runs the same on a Hadoop
catalog's warehouse (version-hint.text + StaticTable)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.metadata.catalog import config_from_options, open_catalog
from lab.equality import assert_same_health, cases_for, macro_side, planner_side
from lab.lake import build_varied

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dbt_iceberg_maint.metadata.catalog_tables import MetadataCatalog
    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration


def test_planner_equals_macros_on_the_embedded_warehouse(spark: SparkSession, warehouse: Path,
                                                         dbt_project: DbtProject) -> None:
    catalog = open_catalog(config_from_options(str(warehouse), []))
    assert catalog.config.properties["type"] == "jdbc"
    assert_planner_equals_macros(spark, catalog, dbt_project)


def assert_planner_equals_macros(spark: SparkSession, catalog: MetadataCatalog, dbt_project: DbtProject) -> None:
    tables = build_varied(spark, "local", dbt_project.schema)
    cases = cases_for(tables)

    macro_health, macro_plan = macro_side(dbt_project, cases)
    planner_health, planner_plan = planner_side(catalog, cases)

    assert_same_health(macro_health, planner_health, tables)
    assert planner_plan == macro_plan
    # The cost gate macro (macros/health/cost_gate.sql) agrees with the planner's gate.
    gate_lines = {key[1]: value[0] for key, value in planner_plan.items()
                  if key[0].endswith(".maintained") and key[1].startswith("gate:")}
    assert sorted(reason or "" for reason in gate_lines.values()) == [
        "", "cost gate: 0 records added since the last maintenance, below min_new_records 10",
        "cost gate: last maintained 0.0 h ago, less than min_interval_hours 24",
        "cost gate: no new snapshot since the last maintenance 0.0 h ago (skip_unchanged)",
        "cost gate: no new snapshot since the last maintenance 0.0 h ago (skip_unchanged)"]
    # The states really vary: every operation is due somewhere and skipped somewhere.
    statuses = {(op, value[0]) for (_t, op), value in planner_plan.items() if not op.startswith("gate:")}
    for op in ("rewrite_data_files", "rewrite_position_delete_files", "expire_snapshots", "rewrite_manifests"):
        assert {(op, "dry_run"), (op, "skipped")} <= statuses, op
    assert ("expire_snapshots", "failed") in statuses  # gc.enabled=false
    # Format v3: 6 deletion vectors of 2 rows over 6 data files of 10 rows (one partition); the
    # position-delete rewrite leaves them to the compaction, as the v2 table's delete files are not.
    vectors = planner_health[f"{dbt_project.schema}.deletion_vectors"]
    assert (vectors["delete_files"], vectors["deletion_vectors"], vectors["max_partition_delete_ratio"]) == (6, 6, 0.2)
    assert planner_plan[(f"{dbt_project.schema}.deletion_vectors", "rewrite_position_delete_files")][:2] == (
        "skipped", "only deletion vectors (6), which need no rewrite: rewrite_data_files applies them")
    v2 = planner_health[f"{dbt_project.schema}.deletes"]
    assert (v2["delete_files"], v2["deletion_vectors"]) == (6, 0)
    assert planner_plan[(f"{dbt_project.schema}.deletes", "rewrite_position_delete_files")][:2] == (
        "dry_run", "6 delete files, >= threshold of 3")
    cold = planner_plan[(f"{dbt_project.schema}.cold_days", "rewrite_data_files")]
    assert cold[0] == "dry_run" and len(cold[2][1]) == 2  # both day partitions are cold
