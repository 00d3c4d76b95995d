"""compute_table_stats and compute_partition_stats on real Iceberg tables, through dbt: the
procedure macros write the statistics files (read back with pyiceberg), bad input is refused with
the table unchanged, and as policy operations they run after the compaction that made the table's
statistics stale and not again while the current snapshot has them (the macros and the metadata
planner agree). The embedded catalog only (the procedures commit table metadata like any other
metadata update; the catalog matrix is test_procedures.py's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dbt_iceberg_maint.maintenance.results import parse_result_lines
from dbt_iceberg_maint.metadata.catalog import config_from_options, open_catalog
from dbt_iceberg_maint.metadata.health import read_health
from dbt_iceberg_maint.metadata.planner import plan_table
from dbt_iceberg_maint.metadata.project import ModelTarget
from dbt_iceberg_maint.policy.sql import TableRef
from tests.expect import markers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dbt_iceberg_maint.metadata.catalog_tables import MetadataCatalog
    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

STATISTICS_OPERATIONS = ["compaction", "compute_table_stats", "compute_partition_stats"]
# interval_hours 0: every maintain() below decides (the table statistics' default is 24 h).
POLICY = {"compaction": {"min_input_files": 2}, "compute_table_stats": {"interval_hours": 0}}


def call(dbt_project: DbtProject, macro: str, expect_success: bool = True, **kwargs: Any) -> tuple[Any, Any, Any]:
    invocation = dbt_project("run-operation", "iceberg_maint_call", "--args",
                             json.dumps({"macro_name": macro, "kwargs": kwargs}), expect_success=expect_success)
    returned = [case["value"] for case in markers(invocation.log_messages, "ICEBERG_MAINT_CASE")]
    return invocation, parse_result_lines(invocation.log_messages), (returned[0] if returned else None)


def current_snapshot(spark: SparkSession, table: str) -> int:
    return int(spark.sql(f"select snapshot_id from {table}.refs where name = 'main'").collect()[0][0])


@pytest.fixture(scope="module")
def metadata(warehouse: Path) -> MetadataCatalog:
    return open_catalog(config_from_options(str(warehouse), []))


@pytest.fixture(scope="module")
def schema(spark: SparkSession, dbt_project: DbtProject) -> str:
    spark.sql(f"create namespace if not exists local.{dbt_project.schema}")
    return dbt_project.schema


def small_files_table(spark: SparkSession, name: str, inserts: int, partitioned: bool = True) -> str:
    spark.sql(f"create or replace table {name} (id bigint, part string) using iceberg"
              + (" partitioned by (part)" if partitioned else ""))
    for i in range(inserts):
        spark.sql(f"insert into {name} values ({i}, 'a'), ({i + 100}, 'b')")
    return name


def test_the_procedures_write_statistics_files_for_the_current_snapshot(
        spark: SparkSession, dbt_project: DbtProject, schema: str, metadata: MetadataCatalog) -> None:
    table = small_files_table(spark, f"local.{schema}.stats", 2)
    snapshot = current_snapshot(spark, table)

    _, results, returned = call(dbt_project, "compute_table_stats", relation=f"{schema}.stats", columns=["id"])
    (result,) = results
    assert (result.status, result.operation) == ("success", "compute_table_stats")
    assert result.sql == f"CALL system.compute_table_stats(table => '{schema}.stats', columns => array('id'))"
    path = result.metrics["statistics_file"]
    assert returned["statistics_file"] == path and path.endswith(".stats")
    _, results, _ = call(dbt_project, "compute_partition_stats", relation=f"{schema}.stats")
    partition_path = results[0].metrics["partition_statistics_file"]

    stats = metadata.load(f"{schema}.stats").metadata
    assert [(f.snapshot_id, f.statistics_path) for f in stats.statistics] == [(snapshot, path)]
    assert [b.fields for b in stats.statistics[0].blob_metadata] == [[1]]  # the id column's NDV sketch
    assert [(f.snapshot_id, f.statistics_path) for f in stats.partition_statistics] == [(snapshot, partition_path)]
    assert Path(path.removeprefix("file:")).is_file() and Path(partition_path.removeprefix("file:")).is_file()
    assert current_snapshot(spark, table) == snapshot  # statistics commit metadata, never a snapshot
    (health,) = read_health(metadata, [f"{schema}.stats"])
    assert health.to_dict()["statistics_stale"] is False and health.to_dict()["partition_statistics_stale"] is False

    spark.sql(f"insert into {table} values (7, 'c')")
    (health,) = read_health(metadata, [f"{schema}.stats"])
    assert health.to_dict()["statistics_stale"] is True and health.to_dict()["partition_statistics_stale"] is True


@pytest.mark.parametrize(("macro", "kwargs", "message"), [
    ("compute_table_stats", {"columns": "id"},
     "compute_table_stats: argument `columns` is id; expected a non-empty list of column names"),
    ("compute_table_stats", {"snapshot_id": -1},
     "compute_table_stats: argument `snapshot_id` is -1; expected a snapshot id, a whole number >= 0"),
    ("compute_partition_stats", {"snapshot_id": "latest"},
     "compute_partition_stats: argument `snapshot_id` is latest; expected a snapshot id, a whole number >= 0"),
    ("compute_table_stats", {"dry_run": "yes"},
     "compute_table_stats: argument `dry_run` is yes; expected true or false"),
])
def test_bad_input_is_refused_and_changes_nothing(spark: SparkSession, dbt_project: DbtProject, schema: str,
                                                   metadata: MetadataCatalog, macro: str, kwargs: dict[str, Any],
                                                   message: str) -> None:
    table = f"local.{schema}.guarded"
    if not spark.catalog.tableExists(table):
        small_files_table(spark, table, 2)
    snapshot = current_snapshot(spark, table)
    metadata_file = metadata.load(f"{schema}.guarded").metadata_location

    invocation, results, _ = call(dbt_project, macro, expect_success=False, relation=f"{schema}.guarded", **kwargs)

    assert message in " ".join(invocation.log_messages) + (invocation.exception or "")
    assert results == ()
    assert current_snapshot(spark, table) == snapshot
    loaded = metadata.load(f"{schema}.guarded")
    assert loaded.metadata_location == metadata_file  # no commit at all
    assert loaded.metadata.statistics == [] and loaded.metadata.partition_statistics == []


def python_plan(metadata: MetadataCatalog, schema: str, name: str) -> list[tuple[str, str, str]]:
    plan, _ = plan_table(ModelTarget(name, TableRef(schema, name), {}, named=True), metadata.load(f"{schema}.{name}"),
                         STATISTICS_OPERATIONS, overrides=POLICY)
    return [(p.operation, p.status, p.reason) for p in plan]


def test_as_policy_operations_they_follow_the_compaction_and_run_once_per_snapshot(
        spark: SparkSession, dbt_project: DbtProject, schema: str, metadata: MetadataCatalog) -> None:
    table = small_files_table(spark, f"local.{schema}.planned", 3)
    name = f"{schema}.planned"

    _, results, _ = call(dbt_project, "maintain", relation=name, operations=STATISTICS_OPERATIONS, policy=POLICY)
    assert [(r.operation, r.status) for r in results] == [
        ("rewrite_data_files", "success"), ("compute_table_stats", "success"), ("compute_partition_stats", "success")]
    assert results[1].reason == ("the rewrite_data_files commits planned first leave the table without table "
                                 "statistics for its new snapshot")
    compacted = current_snapshot(spark, table)
    stats = metadata.load(name).metadata
    assert [f.snapshot_id for f in stats.statistics] == [compacted]  # for the compaction's snapshot
    assert [f.snapshot_id for f in stats.partition_statistics] == [compacted]
    properties = dict(spark.sql(f"show tblproperties {table}").collect())
    assert properties["dbt-iceberg-maint.statistics-snapshot.compute_table_stats"] == str(compacted)
    assert properties["dbt-iceberg-maint.statistics-snapshot.compute_partition_stats"] == str(compacted)

    # Nothing written since: neither the macros nor the metadata planner compute them again.
    fresh = [("rewrite_data_files", "skipped", "the table has 2 data files, fewer than min_input_files 2: nothing to "
                                               "compact"),
             ("compute_table_stats", "skipped", f"table statistics exist for the current snapshot {compacted}"),
             ("compute_partition_stats", "skipped", f"partition statistics exist for the current snapshot {compacted}")]
    _, results, _ = call(dbt_project, "maintain", relation=name, operations=STATISTICS_OPERATIONS, policy=POLICY)
    assert [(r.operation, r.status, r.reason) for r in results][1:] == fresh[1:]
    assert python_plan(metadata, schema, "planned")[1:] == fresh[1:]

    # A write: stale for both engines, computed again for the new snapshot.
    spark.sql(f"insert into {table} values (9, 'c')")
    written = current_snapshot(spark, table)
    stale = f"no table statistics for the current snapshot {written} (the last computed are for snapshot {compacted})"
    assert python_plan(metadata, schema, "planned")[1] == ("compute_table_stats", "dry_run", stale)
    _, results, _ = call(dbt_project, "maintain", relation=name, operations=STATISTICS_OPERATIONS, policy=POLICY)
    assert [(r.operation, r.status, r.reason) for r in results][1] == ("compute_table_stats", "success", stale)
    assert written in {f.snapshot_id for f in metadata.load(name).metadata.statistics}


def test_partition_stats_skip_an_unpartitioned_table_iceberg_refuses(
        spark: SparkSession, dbt_project: DbtProject, schema: str, metadata: MetadataCatalog) -> None:
    table = small_files_table(spark, f"local.{schema}.flat", 2, partitioned=False)
    skipped = ("compute_partition_stats", "skipped", "the table is unpartitioned: Iceberg computes partition "
                                                     "statistics only for a partitioned table")
    _, results, _ = call(dbt_project, "maintain", relation=f"{schema}.flat", operations=STATISTICS_OPERATIONS,
                         policy=POLICY)
    assert [(r.operation, r.status, r.reason) for r in results][2] == skipped
    assert results[1].status == "success"
    assert python_plan(metadata, schema, "flat")[2] == skipped
    (health,) = read_health(metadata, [f"{schema}.flat"])
    assert health.to_dict()["statistics_stale"] is False and health.to_dict()["partition_statistics_stale"] is None

    # What the plan avoids: the procedure itself refuses the table (Spark's error stops the run).
    snapshot = current_snapshot(spark, table)
    invocation, _, _ = call(dbt_project, "compute_partition_stats", expect_success=False, relation=f"{schema}.flat")
    assert "Table must be partitioned" in " ".join(invocation.log_messages)
    assert current_snapshot(spark, table) == snapshot
    assert metadata.load(f"{schema}.flat").metadata.partition_statistics == []


def test_iceberg_maintenance_computes_them_for_a_model_at_most_once_a_day_by_default(
        spark: SparkSession, dbt_project: DbtProject, metadata: MetadataCatalog) -> None:
    dbt_project("seed")
    dbt_project("run", "--select", "events", batch=1)
    table = dbt_project.table("events")
    name = f"{dbt_project.schema}.events"
    args = json.dumps({"select": ["events"], "operations": ["compute_table_stats", "compute_partition_stats"]})

    invocation = dbt_project("run-operation", "iceberg_maintenance", "--args", args)
    results = parse_result_lines(invocation.log_messages)
    snapshot = current_snapshot(spark, table)
    assert [(r.operation, r.status, r.reason) for r in results] == [
        ("compute_table_stats", "success", f"no table statistics for the current snapshot {snapshot}"),
        ("compute_partition_stats", "success", f"no partition statistics for the current snapshot {snapshot}")]
    loaded = metadata.load(name).metadata
    assert [f.snapshot_id for f in loaded.statistics] == [snapshot]
    assert [f.snapshot_id for f in loaded.partition_statistics] == [snapshot]

    # A write: the table statistics wait for their 24 h interval, the partition statistics (no
    # interval) follow the new snapshot.
    dbt_project("run", "--select", "events", batch=2)
    written = current_snapshot(spark, table)
    invocation = dbt_project("run-operation", "iceberg_maintenance", "--args", args)
    results = parse_result_lines(invocation.log_messages)
    assert [(r.operation, r.status) for r in results] == [("compute_table_stats", "skipped"),
                                                          ("compute_partition_stats", "success")]
    assert "within interval_hours 24" in (results[0].reason or "")
    assert results[1].reason == (f"no partition statistics for the current snapshot {written} "
                                 f"(the last computed are for snapshot {snapshot})")
    assert written in {f.snapshot_id for f in metadata.load(name).metadata.partition_statistics}
