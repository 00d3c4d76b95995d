"""The iceberg_maintenance_streak generic test on real Spark with dbt test, over the maintenance
history real runs wrote: no history is a failure; expire_snapshots refused by gc.enabled=false
two runs in a row fails it (and a run that succeeds ends the streak); lease and cost-gate skips
count, a replay that finished the operation in the same run does not; bad arguments are a
compile error naming each (macros/tests/iceberg_maintenance_streak.sql, docs/history.md)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from dbt_iceberg_maint.maintenance.results import parse_result_lines

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dbt_iceberg_maint.runtime.invoke import DbtInvocation
    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration
CATALOGS = ("embedded", "hive_metastore")

VARS = "{health_scenario: true}"
OPERATIONS = ["expire_snapshots", "rewrite_manifests"]


def statuses(invocation: DbtInvocation) -> dict[str, str]:
    return {node.name: node.status for node in invocation.nodes}


def stored(spark: SparkSession, project: DbtProject, test: str) -> dict[str | None, dict[str, Any]]:
    """The rows `--store-failures` kept for a test, by operation."""
    rows = spark.sql(f"select * from local.{project.schema}_dbt_test__audit.{test}").collect()
    return {row["operation"]: row.asDict() for row in rows}


def maintain(project: DbtProject, run_id: str) -> dict[str, str]:
    """iceberg_maintenance of health_events under `run_id`: status by operation (a failed one
    fails the invocation after every step ran)."""
    run = project("run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args",
                  json.dumps({"select": "health_events", "operations": OPERATIONS}),
                  "--vars", "{health_scenario: true, dbt_iceberg_maint_run_id: " + run_id + "}", expect_success=False)
    return {result.operation: result.status for result in parse_result_lines(run.log_messages)}


def run_tests(project: DbtProject, *names: str) -> DbtInvocation:
    return project("test", "--select", *names, "--store-failures", "--vars", VARS, expect_success=False)


@pytest.fixture(scope="module")
def built(dbt_project: DbtProject) -> DbtProject:
    dbt_project("run", "--select", "health_events", "--vars", VARS)
    return dbt_project


def test_no_history_table_fails_the_test(spark: SparkSession, built: DbtProject) -> None:
    failed = run_tests(built, "streak_two")
    assert statuses(failed) == {"streak_two": "fail"}
    [row] = stored(spark, built, "streak_two").values()
    assert row["last_status"] == "missing"
    assert row["last_reason"].startswith(f"no maintenance history: table {built.schema}.iceberg_maint_history "
                                         "does not exist")


def test_failed_runs_in_a_row_fail_it_until_a_run_succeeds(spark: SparkSession, built: DbtProject) -> None:
    table = built.table("health_events")
    for batch in (2, 3):  # snapshots to expire (retain_last 1): the operation is due
        spark.sql(f"insert into {table} select id + {batch * 1000}, {batch} from range(20)")
    spark.sql(f"alter table {table} set tblproperties ('gc.enabled' = 'false')")
    # Iceberg refuses expire_snapshots with gc.enabled=false: the plan records it as failed.
    for run_id in ("streak-1", "streak-2"):
        assert maintain(built, run_id)["expire_snapshots"] == "failed"
    failed = run_tests(built, "streak_two", "streak_failed_only")
    assert statuses(failed) == {"streak_two": "fail", "streak_failed_only": "fail"}
    [row] = stored(spark, built, "streak_two").values()  # rewrite_manifests went fine
    assert (row["table"], row["operation"], row["runs_in_a_row"], row["last_status"], row["last_run_id"]) == (
        f"{built.schema}.health_events", "expire_snapshots", 2, "failed", "streak-2")
    assert "gc.enabled" in row["last_reason"], row

    spark.sql(f"alter table {table} set tblproperties ('gc.enabled' = 'true')")
    assert maintain(built, "streak-3")["expire_snapshots"] in ("success", "skipped")
    passed = run_tests(built, "streak_two", "streak_failed_only")
    assert passed.success and statuses(passed) == {"streak_two": "pass", "streak_failed_only": "pass"}


def test_lease_and_cost_gate_skips_count_and_a_finished_replay_ends_a_streak(
        spark: SparkSession, built: DbtProject) -> None:
    """Rows as the paths write them, after the real runs above (later start times)."""
    history, name = built.table("iceberg_maint_history"), f"{built.schema}.health_events"
    lease = "lease held by nightly-7 since 2026-11-27T01:00:00Z (iceberg_maintenance, expires 2026-11-27T03:00:00Z)"
    gate = "cost gate: no new snapshot since the last maintenance 3.0 h ago (skip_unchanged)"
    rows = [  # (minutes from now, run id, table, operation, status, reason)
        (1, "night-1", name, "expire_snapshots", "skipped", lease),
        (2, "night-2", name, "expire_snapshots", "skipped", lease),
        (1, "night-1", name, "rewrite_manifests", "skipped", gate),
        (2, "night-2", name, "rewrite_manifests", "skipped", gate),
        (1, "night-1", name, "rewrite_data_files", "skipped", lease),
        (2, "night-2", name, "rewrite_data_files", "skipped", lease),
        (3, "night-2", name, "rewrite_data_files", "success", "a partition has 5 small files"),  # its replay
        (1, "night-1", f"{built.schema}.other", "remove_orphan_files", "failed", "gc.enabled=false"),
        (2, "night-2", f"{built.schema}.other", "remove_orphan_files", "failed", "gc.enabled=false"),
    ]
    at = "current_timestamp() + interval {} minutes"
    values = ", ".join(
        f"('{run}', 'inv', 'maintain', null, '{table}', '{operation}', '{status}', '{reason}', {at.format(minutes)}, "
        f"{at.format(minutes)}, 0, '{{}}', null, null, null, null, null, null)"
        for minutes, run, table, operation, status, reason in rows)
    spark.sql(f"insert into {history} values {values}")
    failed = run_tests(built, "streak_two", "streak_failed_only")
    assert statuses(failed) == {"streak_two": "fail", "streak_failed_only": "pass"}
    found = {operation: (row["runs_in_a_row"], row["last_status"], row["last_reason"], row["last_run_id"])
             for operation, row in stored(spark, built, "streak_two").items()}
    assert found == {"expire_snapshots": (2, "skipped", lease, "night-2"),
                     "rewrite_manifests": (2, "skipped", gate, "night-2")}, found


def test_bad_arguments_are_a_compile_error_naming_each(built: DbtProject) -> None:
    invocation = built("test", "--select", "streak_bad_arguments", "--vars", VARS, expect_success=False)
    assert statuses(invocation) == {"streak_bad_arguments": "error"}
    message = invocation.nodes[0].message or ""
    for expected in [
        "iceberg_maintenance_streak: unknown argument `max_runs` (value \"3\"); allowed: runs_in_a_row, kinds,",
        "iceberg_maintenance_streak: argument `runs_in_a_row` is 0; expected a whole number >= 1",
        "iceberg_maintenance_streak: argument `kinds` is [\"failed\", \"timeout\"]; expected a non-empty list of "
        "failed, lease, cost_gate",
        "iceberg_maintenance_streak: argument `lookback_days` is -1; expected a number of days > 0",
    ]:
        assert expected in message, message
