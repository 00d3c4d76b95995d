"""Conflict kinds that only Iceberg's own commit retry meets, produced for real (two through dbt).

Each table has `commit.retry.num-retries = 1`. The writer's commit (a dbt run-operation; for
`conflicting_deleted_files` a Spark DataFrame overwrite, which dbt never issues) loses a real catalog
race (tests/integration/concurrency.py, `lose_catalog_race`) to another job's commit; Iceberg
retries once, re-validates against the table as the other job left it, and fails with the kind's
message. The failed operation commits nothing: the other job's snapshot stays the current one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql.functions import col

from dbt_iceberg_maint.conflicts import classify
from dbt_iceberg_maint.maintenance.results import parse_result_lines
from tests.expect import first
from tests.integration.concurrency import (
    HADOOP_CATALOG,
    RACE_CATALOG,
    BackgroundAction,
    join_all,
    lose_catalog_race,
    other_job,
    pending_metadata,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dbt_iceberg_maint.runtime.invoke import DbtInvocation
    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration
# The lost commit race staged here is the Hadoop catalog's (tests/integration/concurrency.py).
CATALOG_PROPERTIES = HADOOP_CATALOG

TIMEOUT_SECONDS = 120.0
RUN_OPERATION_ERROR = "Encountered an error while running operation"
VALIDATION = "org.apache.iceberg.exceptions.ValidationException"


def create_race_table(
    spark: SparkSession, dbt_project: DbtProject, warehouse: Path, name: str, *,
    columns: str = "id bigint, name string", partitioning: str = "",
) -> Path:
    """A new table whose commits Iceberg retries once (the first retry meets the other job's
    commit); returns its metadata folder."""
    spark.sql(f"create namespace if not exists local.{dbt_project.schema}")
    spark.sql(f"create table {dbt_project.table(name)} ({columns}) using iceberg {partitioning} "
              "tblproperties ('commit.retry.num-retries'='1')")
    return warehouse.resolve() / dbt_project.schema / name / "metadata"


def race_table(dbt_project: DbtProject, name: str) -> str:
    """The table as the other job names it (catalog `race`)."""
    return f"{RACE_CATALOG}.{dbt_project.schema}.{name}"


def lose_race_to(spark: SparkSession, dbt_project: DbtProject, warehouse: Path, tmp_path: Path, metadata: Path,
                 name: str, statement: str) -> BackgroundAction:
    """The writer's next commit to table `name` loses a real catalog race to the other job's `statement`."""
    assert not pending_metadata(metadata), "a pending metadata file is left over: the race would start at once"
    return lose_catalog_race(spark, other_job(spark, warehouse, tmp_path), metadata, race_table(dbt_project, name),
                             name=name, timeout_seconds=TIMEOUT_SECONDS, append=statement)


def reported_error(invocation: DbtInvocation) -> str:
    """The error dbt reported for the failed run-operation (a run-operation has no node result)."""
    assert not invocation.success, "the run-operation succeeded: it never lost the race"
    return first([m for m in invocation.log_messages if m.startswith(RUN_OPERATION_ERROR)], "dbt's operation error")


def snapshots(spark: SparkSession, table: str) -> list[tuple[int, int | None, str]]:
    rows = spark.sql(f"select snapshot_id, parent_id, operation from {table}.snapshots order by committed_at").collect()
    return [(r[0], r[1], r[2]) for r in rows]


def test_rewrite_manifests_losing_to_another_rewrite_is_a_manifest_rewrite_conflict(
    spark: SparkSession, dbt_project: DbtProject, warehouse: Path, tmp_path: Path
) -> None:
    """Our rewrite_manifests plans to replace the table's 4 manifests; the other job's own
    rewrite_manifests replaces them first; Iceberg's retry finds them gone from the latest snapshot."""
    name, schema = "manifests_race", dbt_project.schema
    table = dbt_project.table(name)
    metadata = create_race_table(spark, dbt_project, warehouse, name)
    for row in range(4):  # one manifest per append
        spark.sql(f"insert into {table} values ({row}, 'row {row}')")
    assert spark.sql(f"select count(*) from {table}.manifests").collect()[0][0] == 4
    before = snapshots(spark, table)
    data = f"select id, name from {table} order by id"
    rows_before = spark.sql(data).collect()
    race = lose_race_to(spark, dbt_project, warehouse, tmp_path, metadata, name,
                        f"call {RACE_CATALOG}.system.rewrite_manifests(table => '{schema}.{name}')")
    try:
        invocation = dbt_project("run-operation", "dbt_iceberg_maint.rewrite_manifests", "--args",
                                 json.dumps({"relation": f"{schema}.{name}"}), expect_success=False)
    finally:
        join_all([race], TIMEOUT_SECONDS)
    race.check()

    error = reported_error(invocation)
    verdict = classify(error)
    assert (verdict.kind, verdict.retryable, verdict.exception_class) == ("manifest_rewrite_conflict", True,
                                                                         VALIDATION), error
    assert parse_result_lines(invocation.log_messages) == ()  # the macro raised before its result line
    after = snapshots(spark, table)
    # Only the other job's rewrite committed, and the retry validated against exactly it.
    assert after[:-1] == before and after[-1][1:] == (before[-1][0], "replace"), after
    assert f"could not be found in the latest snapshot {after[-1][0]}" in error, error
    assert spark.sql(data).collect() == rows_before


def test_a_metadata_only_delete_meeting_a_partly_matching_append_is_a_partial_row_delete(
    spark: SparkSession, dbt_project: DbtProject, warehouse: Path, tmp_path: Path
) -> None:
    """`delete ... where id < 100` selects one whole file by its column bounds, so Spark deletes
    it by metadata only; the other job appends one file with ids 50 and 150; Iceberg's retry
    re-applies the filter to it and cannot delete it whole."""
    name = "delete_race"
    table = dbt_project.table(name)
    metadata = create_race_table(spark, dbt_project, warehouse, name)
    spark.sql(f"insert into {table} values (1, 'old'), (2, 'old')")  # wholly matches id < 100
    spark.sql(f"insert into {table} values (500, 'kept'), (501, 'kept')")  # matches not at all
    before = snapshots(spark, table)
    race = lose_race_to(spark, dbt_project, warehouse, tmp_path, metadata, name,
                        f"insert into {race_table(dbt_project, name)} "
                        "select /*+ REPARTITION(1) */ * from values (50, 'new'), (150, 'new')")
    try:
        invocation = dbt_project("run-operation", "iceberg_maint_race_delete", "--args",
                                 json.dumps({"relation": table, "where": "id < 100"}), expect_success=False)
    finally:
        join_all([race], TIMEOUT_SECONDS)
    race.check()

    error = reported_error(invocation)
    verdict = classify(error)
    assert (verdict.kind, verdict.retryable, verdict.exception_class) == ("partial_row_delete", True, VALIDATION), error
    after = snapshots(spark, table)
    # Only the other job's append committed: one file, the one the retried delete could not delete.
    assert after[:-1] == before and after[-1][1:] == (before[-1][0], "append"), after
    [appended] = spark.sql(f"select data_file.file_path from {table}.entries "
                           f"where status = 1 and snapshot_id = {after[-1][0]}").collect()
    assert f"rows match filter ref(name=\"id\") < 100: {appended[0]}" in error, error
    assert verdict.files == (appended[0],)
    assert [r[0] for r in spark.sql(f"select id from {table} order by id").collect()] == [1, 2, 50, 150, 500, 501]


def test_a_validated_dataframe_overwrite_losing_to_a_whole_file_delete_is_a_conflicting_deleted_files(
    spark: SparkSession, dbt_project: DbtProject, warehouse: Path, tmp_path: Path
) -> None:
    """Spark's DataFrame API (never issued by dbt) overwrites partition `a` by filter, validating
    from the snapshot it started from with `serializable` isolation; the other job deletes
    partition `a`'s file whole; Iceberg's retry finds that delete among the files its filter covers."""
    name = "overwrite_race"
    table = dbt_project.table(name)
    columns = "id bigint, name string, part string"
    metadata = create_race_table(spark, dbt_project, warehouse, name, columns=columns,
                                 partitioning="partitioned by (part)")
    spark.sql(f"insert into {table} values (1, 'old', 'a'), (2, 'old', 'b')")  # one file per partition
    before = snapshots(spark, table)
    race = lose_race_to(spark, dbt_project, warehouse, tmp_path, metadata, name,
                        f"delete from {race_table(dbt_project, name)} where part = 'a'")
    replacement = spark.createDataFrame([(10, "new", "a")], columns)
    try:
        with pytest.raises(Py4JJavaError) as raised:
            (replacement.writeTo(table).option("isolation-level", "serializable")
             .option("validate-from-snapshot-id", str(before[-1][0])).overwrite(col("part") == "a"))
    finally:
        join_all([race], TIMEOUT_SECONDS)
    race.check()

    error = str(raised.value)
    verdict = classify(error)
    assert (verdict.kind, verdict.retryable, verdict.exception_class) == ("conflicting_deleted_files", True,
                                                                         VALIDATION), error
    after = snapshots(spark, table)
    # Only the other job's delete committed; the file it removed is the one the retry names.
    assert after[:-1] == before and after[-1][1:] == (before[-1][0], "delete"), after
    [deleted] = spark.sql(f"select data_file.file_path from {table}.entries "
                          f"where status = 2 and snapshot_id = {after[-1][0]}").collect()
    assert f'can contain records matching ref(name="part") == "a": [{deleted[0]}]' in error, error
    assert verdict.files == (deleted[0],), error
    assert [tuple(r) for r in spark.sql(f"select id, part from {table} order by id").collect()] == [(2, "b")]
