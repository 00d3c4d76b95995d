"""table_health on real Spark: every figure equals what the Iceberg metadata tables say."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from dbt_iceberg_maint.maintenance.results import parse_result_lines

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

DEFAULT_TARGET = 536_870_912


def scalar(spark: SparkSession, sql: str) -> Any:
    return spark.sql(sql).collect()[0][0]


def expected_health(spark: SparkSession, table: str, target: int, partitioned: bool) -> dict[str, Any]:
    """The figures, each read by its own plain query on a metadata table."""
    small = int(target * 0.75)
    key = "spec_id, partition" if partitioned else "spec_id"
    return {
        "data_files": scalar(spark, f"select count(*) from {table}.data_files"),
        "small_files": scalar(spark, f"select count(*) from {table}.data_files where file_size_in_bytes < {small}"),
        "data_bytes": scalar(spark, f"select sum(file_size_in_bytes) from {table}.data_files"),
        "delete_files": scalar(spark, f"select count(*) from {table}.delete_files"),
        "records": scalar(spark, f"select count(*) from {table}"),
        "snapshots": scalar(spark, f"select count(*) from {table}.snapshots"),
        "manifests": scalar(spark, f"select count(*) from {table}.manifests"),
        "data_manifests": scalar(spark, f"select count(*) from {table}.manifests where content = 0"),
        "partitions": scalar(spark, f"select count(*) from {table}.partitions"),
        "max_small_files_in_partition": scalar(
            spark, f"select max(n) from (select count(*) as n from {table}.data_files "
                   f"where file_size_in_bytes < {small} group by {key})") or 0,
        "deletion_vectors": scalar(spark, f"select count(*) from {table}.delete_files where file_format = 'PUFFIN'"),
        "max_partition_delete_ratio": round(float(scalar(
            spark, f"select max(d.deleted / f.records) from (select {key}, sum(record_count) as records "
                   f"from {table}.data_files group by {key}) f join (select {key}, sum(record_count) as deleted "
                   f"from {table}.delete_files where file_format = 'PUFFIN' group by {key}) d using ({key})") or 0), 4),
        "target_file_size_bytes": target,
        "small_file_threshold_bytes": small,
    }


@pytest.fixture(scope="module")
def built(dbt_project: DbtProject) -> DbtProject:
    dbt_project("build", "--select", "+events", "+user_summary", "--exclude", "test_type:data", batch=1)
    for batch in (2, 3):
        dbt_project("run", "--select", "events", batch=batch)
    return dbt_project


def test_run_operation_logs_health_equal_to_metadata_tables(spark: SparkSession, built: DbtProject) -> None:
    events = built.table("events")
    invocation = built("run-operation", "dbt_iceberg_maint.table_health",
                       "--args", json.dumps({"relation": f"{built.schema}.events"}))
    [result] = parse_result_lines(invocation.log_messages)
    assert (result.operation, result.status, result.table) == ("table_health", "success", f"{built.schema}.events")
    health = dict(result.metrics)
    age = health.pop("oldest_snapshot_age_hours")
    first_commit_age = scalar(spark, f"select (unix_micros(current_timestamp()) - unix_micros(min(committed_at))) "
                                     f"/ 3600000000.0 from {events}.snapshots")
    # The macro rounds to 3 decimals and measured a moment before this query did.
    assert 0 < age <= float(first_commit_age) + 0.0005
    assert health == {"table": f"{built.schema}.events", **expected_health(spark, events, DEFAULT_TARGET, True)}
    # Three incremental loads over ~10 day partitions: many small files, several per partition.
    assert health["data_files"] == health["small_files"] > health["partitions"] > 1
    assert health["max_small_files_in_partition"] >= 2


def test_target_from_property_argument_and_unpartitioned_tables(spark: SparkSession, built: DbtProject) -> None:
    events, summary = built.table("events"), built.table("user_summary")
    sizes = sorted(r[0] for r in spark.sql(f"select file_size_in_bytes from {events}.data_files").collect())
    # A target whose 0.75 threshold splits the files: the table property is what counts.
    target = int(sizes[len(sizes) // 2] / 0.75)
    spark.sql(f"alter table {events} set tblproperties ('write.target-file-size-bytes' = '{target}')")
    cases = [
        {"id": "property", "macro": "table_health", "kwargs": {"relation": events}},
        {"id": "argument", "macro": "table_health", "kwargs": {"relation": events, "target_file_size_bytes": 1024}},
        {"id": "unpartitioned", "macro": "table_health", "kwargs": {"relation": summary}},
        {"id": "logged", "macro": "table_health", "kwargs": {"relation": summary, "log_result": True}},
    ]
    invocation = built("run-operation", "hp_test_render", "--args", json.dumps({"cases": cases}))
    prefix = "HP_CASE "
    got = {
        c["id"]: c["result"]
        for c in (json.loads(m[len(prefix) :]) for m in invocation.log_messages if m.startswith(prefix))
    }
    for case, table, size, partitioned in (
        ("property", events, target, True),
        ("argument", events, 1024, True),
        ("unpartitioned", summary, DEFAULT_TARGET, False),
    ):
        health = got[case]
        health.pop("oldest_snapshot_age_hours")
        assert health == {"table": table, **expected_health(spark, table, size, partitioned)}, case
    assert 0 < got["property"]["small_files"] < got["property"]["data_files"]
    assert got["unpartitioned"]["partitions"] == 1
    assert got["unpartitioned"]["max_small_files_in_partition"] == got["unpartitioned"]["small_files"]
    # Called from another macro, table_health logs only when asked to.
    assert [r.table for r in parse_result_lines(invocation.log_messages)] == [summary]


def test_python_health_comes_from_the_macro(spark: SparkSession, built: DbtProject) -> None:
    from dbt_iceberg_maint.maintenance.health import health_via_dbt

    events = built.table("events")
    [health] = health_via_dbt([events], env=built.env)
    properties = {r["key"]: r["value"] for r in spark.sql(f"show tblproperties {events}").collect()}
    target = int(properties.get("write.target-file-size-bytes", DEFAULT_TARGET))
    expected = expected_health(spark, events, target, True)
    assert health.table == events
    assert {k: v for k, v in health.as_dict().items() if k in expected} == {
        k: v for k, v in expected.items() if k not in {"target_file_size_bytes", "small_file_threshold_bytes"}
    }
