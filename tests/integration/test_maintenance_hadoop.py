"""maintain() and the maintain command on a Hadoop catalog: what its rename commit and its lock
manager make happen (commit races between Iceberg's own rewrite groups, a lost commit race staged
with tests/integration/concurrency.py). The rest of the maintenance tests run on the embedded
default catalog (test_maintenance.py), whose project build this module reuses."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dbt_iceberg_maint.maintenance.results import parse_result_lines
from dbt_iceberg_maint.maintenance.run import run_maintenance
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT
from tests.integration.concurrency import (
    HADOOP_CATALOG,
    RACE_CATALOG,
    join_all,
    lose_catalog_race,
    other_job,
    pending_metadata,
)
from tests.integration.test_maintenance import build_project

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dbt_iceberg_maint.maintenance.results import MaintenanceResult
    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration
CATALOG_PROPERTIES = HADOOP_CATALOG


@pytest.fixture(scope="module")
def built(spark: SparkSession, dbt_project: DbtProject) -> DbtProject:
    return build_project(spark, dbt_project)


def compact_ten_days_of_small_files(spark: SparkSession, built: DbtProject, name: str,
                                    policy: dict[str, Any] | None = None) -> tuple[str, MaintenanceResult]:
    """10 day partitions x 6 small files, compacted by maintain (`policy` when given); the rows
    are the same after."""
    table = built.table(name)
    spark.sql(f"create table {table} (id bigint, ts timestamp) using iceberg partitioned by (days(ts))")
    for batch in range(6):
        spark.sql(
            f"insert into {table} select id, timestamp'2026-11-01 00:00:00' + make_interval(0, 0, 0, "
            f"cast(id % 10 as int)) from range({batch * 100}, {batch * 100 + 100})"
        )
    checksum = f"select count(*), sum(id), sum(unix_seconds(ts)) from {table}"
    before = spark.sql(checksum).collect()
    args: dict[str, Any] = {"relation": f"{built.schema}.{name}", "operations": ["rewrite_data_files"]}
    if policy is not None:
        args["policy"] = policy
    invocation = built("run-operation", "dbt_iceberg_maint.maintain", "--args", json.dumps(args))
    [result] = parse_result_lines(invocation.log_messages)
    assert spark.sql(checksum).collect() == before
    return table, result


@pytest.mark.parametrize("compaction", [
    {"partial_progress": True},
    {"partial_progress_above_mb": 0.001},  # `auto` on a table above the threshold (the table holds kilobytes)
], ids=["partial_progress_true", "auto_above_the_threshold"])
def test_partial_progress_compaction_survives_its_own_group_commits_on_a_hadoop_catalog(
    spark: SparkSession, built: DbtProject, compaction: dict[str, Any]
) -> None:
    """Partial progress and Iceberg's default 4 commit retries, 10 partitions x 6 small files.

    Iceberg commits partial-progress groups from its rewrite threads; on a Hadoop catalog those
    commits race each other ("Version N already exists"; without serialised group rewrites the
    call failed in 2 of 3 measured runs). The policy serialises them (on every catalog).
    """
    name = "hadoop_compaction_" + ("true" if "partial_progress" in compaction else "auto")
    table, result = compact_ten_days_of_small_files(spark, built, name, {"compaction": compaction})
    assert (result.operation, result.status) == ("rewrite_data_files", "success"), result.reason
    assert "'max-concurrent-file-group-rewrites', '1'" in result.sql
    assert (result.metrics["rewritten_data_files_count"], result.metrics["added_data_files_count"]) == (60, 10)
    assert spark.sql(f"select count(*) from {table}.data_files").collect()[0][0] == 10
    assert spark.sql(f"select count(*) from {table}.snapshots").collect()[0][0] == 16  # 6 appends, a commit per group


def test_default_compaction_of_a_small_table_commits_once_on_a_hadoop_catalog(
    spark: SparkSession, built: DbtProject
) -> None:
    """The default `partial_progress: auto` on a table far below `partial_progress_above_mb`
    (docs/benchmarks-effect.md: faster than the commit per group): Iceberg's default 5 groups
    rewritten at a time, then one commit by the calling thread, so the rename commits have
    nothing of their own to race, 10 partitions x 6 small files."""
    table, result = compact_ten_days_of_small_files(spark, built, "hadoop_one_commit")
    assert (result.operation, result.status) == ("rewrite_data_files", "success"), result.reason
    assert "partial-progress" not in result.sql and "max-concurrent" not in result.sql, result.sql
    assert (result.metrics["rewritten_data_files_count"], result.metrics["added_data_files_count"]) == (60, 10)
    assert spark.sql(f"select count(*) from {table}.snapshots").collect()[0][0] == 7  # 6 appends, one rewrite


def test_a_compaction_commit_lost_to_a_concurrent_commit_is_recovered_by_one_re_run(
    spark: SparkSession, built: DbtProject, warehouse: Path, tmp_path: Path
) -> None:
    """A real lost commit: event_log's compaction commits its one file group while another job
    takes the same metadata version (a lost Hadoop catalog race, no commit retries). Iceberg
    says "1 rewrite commits failed", the same words as for a failed rewrite; re-run once with
    failed commits tolerated, the group rewrites and commits: a lost commit, retryable, done."""
    event_log = built.table("event_log")
    for event_id in (9201, 9202):  # small files in one partition: one file group
        spark.sql(f"insert into {event_log} values ({event_id}, 'view', date'2026-11-04', 1.00, 9)")
    spark.sql(f"call local.system.rewrite_data_files(table => '{built.schema}.event_log', "
              "where => \"event_date <> date'2026-11-04'\", options => map('min-input-files', '2'))")
    in_partition = f"select count(*) from {event_log}.data_files where partition.event_date = date'2026-11-04'"
    small_files = spark.sql(in_partition).collect()[0][0]
    metadata = warehouse / built.schema / "event_log" / "metadata"
    assert not pending_metadata(metadata), "a pending metadata file is left over: the race would start at once"
    checksum = f"select count(*), sum(hash(event_id, amount, loaded_batch)) from {event_log}"
    before = spark.sql(checksum).collect()[0]
    spark.sql(f"alter table {event_log} set tblproperties ('commit.retry.num-retries'='0')")
    job = other_job(spark, warehouse, tmp_path)
    race = lose_catalog_race(
        spark, job, metadata, f"{RACE_CATALOG}.{built.schema}.event_log", name="lost_compaction", timeout_seconds=120,
        append=f"insert into {RACE_CATALOG}.{built.schema}.event_log values (9299, 'race', date'2026-11-20', 1.00, 9)")
    try:
        report = run_maintenance(select=["event_log"], operations=["compaction"], project_dir=INTEGRATION_PROJECT,
                                 env=built.env)
    finally:
        join_all([race], timeout_seconds=60)
        spark.sql(f"alter table {event_log} set tblproperties ('commit.retry.num-retries'='20')")
    race.check()

    [result] = report.results
    assert re.search(r"partial-progress\.enabled is true but 1 rewrite commits failed", result.metrics["error"])
    assert result.metrics["failed_commits"] == 1
    assert (result.status, result.metrics["kind"], result.metrics["retryable"]) == (
        "success", "rewrite_commit_conflict", True), result.reason
    assert "were not deterministic (a commit lost to a concurrent commit)" in result.reason
    assert small_files >= 2 and result.metrics["rewritten_data_files_count"] == small_files
    assert (report.invocations, report.exit_code) == (2, 0)
    assert spark.sql(in_partition).collect()[0][0] == 1
    after = spark.sql(checksum).collect()[0]
    assert after[0] == before[0] + 1  # the race job's one row, nothing lost or duplicated
