"""The iceberg_healthy generic test on real Spark with dbt test: it fails on a decayed table
naming each violated threshold, passes once maintenance ran, warns under warn severity, reads
only metadata the thresholds need, and refuses bad arguments with a compile error."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from dbt_iceberg_maint.runtime.invoke import DbtInvocation

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration
CATALOGS = ("embedded", "hive_metastore")

VARS = "{health_scenario: true}"
TESTS = ["health_summary", "health_deletes", "health_deep", "health_warn", "health_source", "health_missing_table"]
# Metadata tables beyond the snapshot summary (snapshots): what a deep read queries.
DEEP_TABLES = (".data_files", ".manifests", ".delete_files", ".files", ".partitions", ".all_")
LONG_AGO = "2000-01-01T00:00:00Z"


def statements_of(invocation: DbtInvocation, name: str) -> list[str]:
    [node] = [n for n in invocation.nodes if n.name == name]
    return [e.msg for e in invocation.events if e.name == "SQLQuery" and e.node_id == node.unique_id]


def statuses(invocation: DbtInvocation) -> dict[str, str]:
    return {node.name: node.status for node in invocation.nodes}


def stored_failures(spark: SparkSession, project: DbtProject, test: str) -> dict[str, dict[str, Any]]:
    """The rows `--store-failures` kept for a test, by check."""
    rows = spark.sql(f"select * from local.{project.schema}_dbt_test__audit.{test}").collect()
    return {row["check"]: row.asDict() for row in rows}


@pytest.fixture(scope="module")
def decayed(spark: SparkSession, dbt_project: DbtProject) -> tuple[DbtProject, str]:
    """health_events after three appends and a merge-on-read delete, with maintenance last
    recorded long ago: many small files, snapshots and manifests, one delete file."""
    dbt_project("run", "--select", "health_events", "--vars", VARS)
    table = dbt_project.table("health_events")
    spark.sql(f"alter table {table} set tblproperties ('write.delete.mode' = 'merge-on-read')")
    for batch in (2, 3):
        spark.sql(f"insert into {table} select /*+ COALESCE(1) */ id + {batch * 1000}, {batch} from range(20)")
    spark.sql(f"delete from {table} where id = 2001")
    spark.sql(
        f"alter table {table} set tblproperties ("
        f"'dbt-iceberg-maint.checked-at.rewrite_data_files' = '{LONG_AGO}', "
        f"'dbt-iceberg-maint.checked-at.expire_snapshots' = '{LONG_AGO}')"
    )
    return dbt_project, table


@pytest.fixture(scope="module")
def failing(decayed: tuple[DbtProject, str]) -> DbtInvocation:
    project, _ = decayed
    return project("test", "--select", *TESTS, "--store-failures", "--vars", VARS, expect_success=False)


def test_violated_thresholds_fail_the_test_one_row_each(
    spark: SparkSession, decayed: tuple[DbtProject, str], failing: DbtInvocation
) -> None:
    project, table = decayed
    assert not failing.success
    assert statuses(failing) == {
        "health_summary": "fail",
        "health_deletes": "fail",
        "health_deep": "fail",
        "health_warn": "warn",
        "health_source": "pass",
        "health_missing_table": "fail",
    }
    summary = stored_failures(spark, project, "health_summary")
    assert set(summary) == {"max_snapshots", "max_days_since_expiry"}
    snapshots = spark.sql(f"select count(*) from {table}.snapshots").collect()[0][0]
    assert (summary["max_snapshots"]["value"], summary["max_snapshots"]["threshold"]) == (snapshots, 3)
    deletes = stored_failures(spark, project, "health_deletes")
    assert list(deletes) == ["max_delete_files"]
    assert (deletes["max_delete_files"]["value"], deletes["max_delete_files"]["threshold"]) == (1, 0)
    name = f"{project.schema}.health_events"
    assert summary["max_snapshots"]["table"] == name
    assert summary["max_snapshots"]["message"] == (
        f"{name} has {snapshots} snapshots, more than 3 (expire_snapshots removes old ones)"
    )
    expiry = summary["max_days_since_expiry"]
    assert expiry["value"] > 9000 and expiry["threshold"] == 3
    assert "dbt-iceberg-maint.checked-at.expire_snapshots" in expiry["message"]

    deep = stored_failures(spark, project, "health_deep")
    assert set(deep) == {"max_small_files", "max_data_manifests", "max_days_since_compaction"}
    files = spark.sql(f"select count(*) from {table}.data_files").collect()[0][0]
    manifests = spark.sql(f"select count(*) from {table}.manifests where content = 0").collect()[0][0]
    assert deep["max_small_files"]["value"] == files >= 3
    assert deep["max_data_manifests"]["value"] == manifests > 2
    assert "small data files (under 402653184 bytes)" in deep["max_small_files"]["message"]
    compaction = deep["max_days_since_compaction"]
    assert compaction["value"] > 9000 and compaction["threshold"] == 7
    assert "dbt-iceberg-maint.checked-at.rewrite_data_files" in compaction["message"]

    missing = stored_failures(spark, project, "health_missing_table")
    assert list(missing) == ["table_exists"]
    assert missing["table_exists"]["message"].startswith(f"{project.schema}.health_missing does not exist")


def test_summary_thresholds_send_no_deep_metadata_query(failing: DbtInvocation) -> None:
    for name in ("health_summary", "health_deletes"):
        summary = statements_of(failing, name)
        assert any(".snapshots" in sql for sql in summary), summary
        assert not [sql for sql in summary if any(deep in sql for deep in DEEP_TABLES)], summary
    deep = statements_of(failing, "health_deep")
    assert any(".data_files" in sql for sql in deep) and any(".manifests" in sql for sql in deep), deep


def test_warn_severity_warns_and_does_not_fail_the_invocation(decayed: tuple[DbtProject, str]) -> None:
    project, _ = decayed
    warned = project("test", "--select", "health_warn", "--vars", VARS)
    assert warned.success and statuses(warned) == {"health_warn": "warn"}


def test_every_check_passes_after_maintenance(spark: SparkSession, decayed: tuple[DbtProject, str],
                                              failing: DbtInvocation) -> None:
    project, table = decayed
    operations = ["rewrite_data_files", "rewrite_position_delete_files", "expire_snapshots", "rewrite_manifests"]
    project("run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args",
            json.dumps({"select": "health_events", "operations": operations}), "--vars", VARS)
    passed = project("test", "--select", "health_summary", "health_deep", "health_warn", "--vars", VARS)
    assert passed.success
    assert statuses(passed) == {"health_summary": "pass", "health_deep": "pass", "health_warn": "pass"}
    # Passing for the right reasons: the figures really changed.
    assert spark.sql(f"select count(*) from {table}.data_files").collect()[0][0] <= 2
    properties = dict(spark.sql(f"show tblproperties {table}").collect())
    assert properties["dbt-iceberg-maint.checked-at.expire_snapshots"] != LONG_AGO
    # No compaction interval: the old record stays; the compaction snapshot is the evidence.
    assert properties["dbt-iceberg-maint.checked-at.rewrite_data_files"] == LONG_AGO


def test_bad_arguments_are_a_compile_error_naming_each(decayed: tuple[DbtProject, str]) -> None:
    project, _ = decayed
    invocation = project("test", "--select", "health_bad_arguments", "health_no_threshold",
                         "--vars", VARS, expect_success=False)
    assert statuses(invocation) == {"health_bad_arguments": "error", "health_no_threshold": "error"}
    messages = {node.name: node.message or "" for node in invocation.nodes}
    bad = messages["health_bad_arguments"]
    assert "Compilation Error" in bad
    for expected in [
        "iceberg_healthy: unknown argument `max_snapshot` (value \"3\"); allowed: max_small_files,",
        "iceberg_healthy: argument `max_snapshots` is -1; it must be >= 0",
        "iceberg_healthy: argument `max_small_files` is \"many\"; expected a whole number >= 0",
        "iceberg_healthy: give `max_days_since_compaction` or `max_hours_since_compaction`, not both",
    ]:
        assert expected in bad, bad
    assert "iceberg_healthy: no threshold given; set at least one of max_small_files" in messages[
        "health_no_threshold"]
