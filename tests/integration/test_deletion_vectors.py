"""Format v3 deletion vectors on a real table, through dbt and through the metadata planner: the
health figures (deletion_vectors, max_partition_delete_ratio), the due rules (no position-delete
rewrite for deletion vectors, a compaction due by the delete ratio with few small files), the
compaction that applies them, and the planner (pyiceberg) equal to the macros."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dbt_iceberg_maint.maintenance.results import parse_result_lines
from dbt_iceberg_maint.metadata.catalog import config_from_options, open_catalog
from dbt_iceberg_maint.metadata.health import HEALTH_FIELDS, health_figures
from dbt_iceberg_maint.metadata.planner import plan_table
from dbt_iceberg_maint.metadata.project import ModelTarget
from dbt_iceberg_maint.policy.sql import TableRef
from lab.equality import normalise_sql
from lab.lake import create_v3
from tests.expect import markers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

OPERATIONS = ["rewrite_data_files", "rewrite_position_delete_files"]
NO_REWRITE = "only deletion vectors (4), which need no rewrite: rewrite_data_files applies them"
RATIO_DUE = "deletion vectors delete 0.4 of a partition's rows, >= delete-ratio-threshold 0.3"
BELOW_USER = ("no partition has >= 5 small files (largest: 4); deletion vectors delete at most 0.4 of a "
              "partition's rows, below delete-ratio-threshold 0.5")


def call(dbt_project: DbtProject, macro: str, **kwargs: Any) -> tuple[list[Any], Any]:
    """One package macro through the harness: (result lines, returned value)."""
    invocation = dbt_project("run-operation", "iceberg_maint_call", "--args",
                             json.dumps({"macro_name": macro, "kwargs": kwargs}))
    returned = [case["value"] for case in markers(invocation.log_messages, "ICEBERG_MAINT_CASE")]
    return list(parse_result_lines(invocation.log_messages)), (returned[0] if returned else None)


def scalar(spark: SparkSession, sql: str) -> Any:
    return spark.sql(sql).collect()[0][0]


def fingerprint(spark: SparkSession, table: str) -> tuple[int, int]:
    row = spark.sql(f"select count(*) as n, sum(hash(id, part)) as h from {table}").collect()[0]
    return row["n"], row["h"]


@pytest.fixture(scope="module")
def v3(spark: SparkSession, dbt_project: DbtProject) -> str:
    return v3_table(spark, f"local.{dbt_project.schema}.v3_ratio")


def v3_table(spark: SparkSession, table: str) -> str:
    """Partition a: 4 data files of 10 rows, each with a deletion vector of 4 rows (0.4 of the
    partition, above Iceberg's default 0.3); partition b: 30 rows, no deletes (the whole table's
    share, 16 of 70, is below 0.3: only the per-partition share makes the compaction due). 5 data
    files, fewer than min_input_files' 5 small files in any partition."""
    spark.sql(f"create namespace if not exists {table.rsplit('.', 1)[0]}")
    create_v3(spark, table, "part")
    for i in range(4):
        spark.sql(f"insert into {table} select id, 'a' from range({i * 10}, {i * 10 + 10})")
    spark.sql(f"insert into {table} select id, 'b' from range(100, 130)")
    spark.sql(f"delete from {table} where part = 'a' and id % 10 in (3, 4, 5, 6)")
    vectors = spark.sql(f"select file_format, record_count from {table}.delete_files").collect()
    assert [(v[0], v[1]) for v in vectors] == [("PUFFIN", 4)] * 4
    return table


def plan_by_macros(dbt_project: DbtProject, relation: str, policy: Any = None) -> dict[str, tuple[Any, ...]]:
    results, _ = call(dbt_project, "maintain", relation=relation, operations=OPERATIONS, dry_run=True, policy=policy)
    return {r.operation: (r.status, (r.reason or "").removeprefix("dry run: "), normalise_sql(r.sql)) for r in results}


def plan_by_planner(warehouse: Path, schema: str, policy: Any = None,
                    name: str = "v3_ratio") -> dict[str, tuple[Any, ...]]:
    catalog = open_catalog(config_from_options(str(warehouse), []))
    target = ModelTarget(f"{schema}.{name}", TableRef(schema, name), {})
    rows, _ = plan_table(target, catalog.load(f"{schema}.{name}"), OPERATIONS, overrides=policy)
    return {r.operation: (r.status, r.reason, normalise_sql(r.sql)) for r in rows}


def reasons(plan: dict[str, tuple[Any, ...]]) -> dict[str, tuple[str, str]]:
    return {operation: (step[0], step[1]) for operation, step in plan.items()}


def test_health_counts_the_deletion_vectors_and_the_partition_delete_ratio(
    spark: SparkSession, dbt_project: DbtProject, warehouse: Path, v3: str
) -> None:
    schema = dbt_project.schema
    _, health = call(dbt_project, "table_health", relation=f"{schema}.v3_ratio")
    assert (health["delete_files"], health["deletion_vectors"], health["data_files"]) == (4, 4, 5)
    assert health["max_partition_delete_ratio"] == 0.4
    # The planner (pyiceberg, no Spark) reads the same figures from the manifests.
    catalog = open_catalog(config_from_options(str(warehouse), []))
    figures, _ = health_figures(f"{schema}.v3_ratio", catalog.load(f"{schema}.v3_ratio"))
    for key in HEALTH_FIELDS[1:]:
        if key != "oldest_snapshot_age_hours":
            assert figures[key] == health[key], key


def test_the_plan_skips_the_position_delete_rewrite_and_compacts_by_the_delete_ratio(
    spark: SparkSession, dbt_project: DbtProject, warehouse: Path, v3: str
) -> None:
    schema = dbt_project.schema
    relation = f"{schema}.v3_ratio"
    expected = {"rewrite_data_files": ("dry_run", RATIO_DUE), "rewrite_position_delete_files": ("skipped", NO_REWRITE)}
    macros = plan_by_macros(dbt_project, relation)
    assert reasons(macros) == expected
    assert plan_by_planner(warehouse, schema) == macros
    # The user's delete-ratio-threshold above the partition's share: not due.
    policy = {"compaction": {"options": {"delete-ratio-threshold": "0.5"}}}
    below = {"rewrite_data_files": ("skipped", BELOW_USER), "rewrite_position_delete_files": ("skipped", NO_REWRITE)}
    macros = plan_by_macros(dbt_project, relation, policy)
    assert reasons(macros) == below
    assert plan_by_planner(warehouse, schema, policy) == macros

    # maintain() runs the plan: the compaction applies the deletion vectors and removes them.
    before = fingerprint(spark, v3)
    results, _ = call(dbt_project, "maintain", relation=relation, operations=OPERATIONS)
    by_operation = {r.operation: r for r in results}
    assert by_operation["rewrite_data_files"].status == "success", results
    assert by_operation["rewrite_data_files"].reason == RATIO_DUE
    assert (by_operation["rewrite_position_delete_files"].status,
            by_operation["rewrite_position_delete_files"].reason) == ("skipped", NO_REWRITE)
    assert scalar(spark, f"select count(*) from {v3}.delete_files") == 0
    assert fingerprint(spark, v3) == before and before[0] == 54
    # Nothing left to do: both engines agree the compaction is not due any more.
    after = plan_by_macros(dbt_project, relation)
    assert after["rewrite_data_files"][0] == "skipped"
    assert plan_by_planner(warehouse, schema) == after


def test_under_a_cold_scope_the_cold_partitions_delete_ratio_decides(
    spark: SparkSession, dbt_project: DbtProject, warehouse: Path
) -> None:
    """With cold_partitions_hours the ratio counts only cold partitions, the compaction's scope."""
    schema = dbt_project.schema
    v3_table(spark, f"local.{schema}.v3_cold")
    time.sleep(2)  # every partition is quiet for longer than 0.0002 h
    policy = {"compaction": {"cold_partitions_hours": 0.0002}}
    macros = plan_by_macros(dbt_project, f"{schema}.v3_cold", policy)
    assert reasons(macros) == {
        "rewrite_data_files": ("dry_run", "deletion vectors delete 0.4 of a cold partition's rows, "
                                          ">= delete-ratio-threshold 0.3"),
        "rewrite_position_delete_files": ("skipped", NO_REWRITE)}
    assert isinstance(macros["rewrite_data_files"][2], tuple)  # a `where` of the cold partitions
    assert plan_by_planner(warehouse, schema, policy, "v3_cold") == macros
