"""Defects the torture suite found (docs/torture.md), each pinned by its own test."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.conflicts import classify
from dbt_iceberg_maint.maintenance.results import parse_result_lines
from dbt_iceberg_maint.protocol import SNAPSHOTS_MARKER
from dbt_iceberg_maint.runtime.spark import CatalogSpec, register_catalog
from lab.proxy import CommitCutProxy
from lab.torture_workers import ROWS_PER_BATCH, GuardedWrite, batch_rows_present, merge_batch_guarded, merge_sql
from tests.expect import markers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lab.postgres import PostgresServer
    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

FOUR_DAYS = 96 * 3600


@contextmanager
def stale_local_catalog(spark: SparkSession, warehouse: Path) -> Iterator[SparkSession]:
    """The `local` catalog caches tables forever (the staleness does not depend on timing) and
    another job, a session with its own `local` catalog on the same warehouse, commits behind its
    back, as a commit whose answer was lost does."""
    cache_key = "spark.sql.catalog.local.cache.expiration-interval-ms"
    manager = spark._jsparkSession.sessionState().catalogManager()  # noqa: SLF001
    spark.conf.set(cache_key, "-1")
    manager.reset()
    behind = spark.newSession()
    register_catalog(behind, CatalogSpec(str(warehouse.resolve()), properties={"cache-enabled": "false"}))
    try:
        yield behind
    finally:
        spark.conf.unset(cache_key)
        manager.reset()


def test_remove_orphan_files_refuses_a_location_outside_the_table(spark: SparkSession,
                                                                  dbt_project: DbtProject) -> None:
    """Fuzzed `location` values were passed to Iceberg unchecked: a location above the table
    (here the schema folder, shared with another table) deletes that table's files too."""
    schema = dbt_project.schema
    spark.sql(f"create namespace if not exists local.{schema}")
    for name in ("keeper", "neighbour"):
        spark.sql(f"create table local.{schema}.{name} (id bigint) using iceberg")
        spark.sql(f"insert into local.{schema}.{name} values (1)")
    keeper_file = spark.sql(f"select file_path from local.{schema}.keeper.data_files").collect()[0][0]
    table_dir = Path(keeper_file.removeprefix("file:")).parent.parent
    neighbour_dir = table_dir.parent / "neighbour"
    for path in neighbour_dir.rglob("*"):  # old enough for any window
        os.utime(path, (time.time() - FOUR_DAYS, time.time() - FOUR_DAYS))
    before = sorted(p for p in neighbour_dir.rglob("*") if p.is_file())

    def remove(location: str, expect_success: bool) -> tuple[bool, list[str]]:
        kwargs = {"relation": f"{schema}.keeper", "location": location}
        invocation = dbt_project("run-operation", "iceberg_maint_call", "--args",
                                 json.dumps({"macro_name": "remove_orphan_files", "kwargs": kwargs}),
                                 expect_success=expect_success)
        return invocation.success, list(invocation.log_messages)

    success, messages = remove(str(table_dir.parent), expect_success=False)
    refusal = " ".join(m for m in messages if "Encountered an error" in m)
    assert not success and "argument `location`" in refusal and "must be the table's location" in refusal
    assert sorted(p for p in neighbour_dir.rglob("*") if p.is_file()) == before
    assert spark.sql(f"select count(*) from local.{schema}.neighbour").collect()[0][0] == 1
    for outside in (f"{table_dir}/../neighbour", f"{table_dir}-other"):
        assert not remove(outside, expect_success=False)[0], outside

    success, messages = remove(f"file:{table_dir}/data", expect_success=True)
    assert success and [r.status for r in parse_result_lines(messages)] == ["success"]

    # The same check guards the policy's `location` (maintain / iceberg_maintenance).
    invocation = dbt_project("run-operation", "iceberg_maint_call", "--args", json.dumps({
        "macro_name": "maintain", "kwargs": {"relation": f"{schema}.keeper", "operations": ["remove_orphan_files"],
                                             "policy": {"remove_orphan_files": {"location": str(table_dir.parent)}}}}),
        expect_success=False)
    assert not invocation.success
    assert any("argument `location`" in m for m in invocation.log_messages)
    assert sorted(p for p in neighbour_dir.rglob("*") if p.is_file()) == before


def test_table_snapshots_sees_a_commit_the_sessions_cache_does_not(spark: SparkSession, dbt_project: DbtProject,
                                                                   warehouse: Path) -> None:
    """A connection cut right after the JDBC catalog committed made Iceberg report the write as
    failed; the writer's session kept the old metadata in its catalog cache, so landed
    verification read a stale snapshot log and said "not landed" for a write that had landed.
    Here another session's catalog on the same warehouse commits behind the cached `local` catalog."""
    schema = dbt_project.schema
    with stale_local_catalog(spark, warehouse) as behind:
        spark.sql(f"create namespace if not exists local.{schema}")
        spark.sql(f"create table local.{schema}.cached (id bigint) using iceberg")
        spark.sql(f"insert into local.{schema}.cached values (1)")
        before = spark.sql(f"select snapshot_id from local.{schema}.cached.snapshots").collect()
        behind.sql(f"insert into local.{schema}.cached values (2)")
        stale = spark.sql(f"select count(*) from local.{schema}.cached.snapshots").collect()[0][0]
        assert stale == len(before) == 1, "the cached catalog was expected to be stale"

        invocation = dbt_project("run-operation", "dbt_iceberg_maint.table_snapshots", "--args",
                                 json.dumps({"tables": [f"{schema}.cached"]}))
        document = markers(invocation.log_messages, SNAPSHOTS_MARKER)[-1]
        [entry] = document["tables"]
        assert len(entry["snapshots"]) == 2, document
        newest = behind.sql(f"select snapshot_id from local.{schema}.cached.refs where name = 'main'").collect()[0][0]
        assert entry["current_snapshot_id"] == newest, document
        assert [s["parent_id"] for s in entry["snapshots"]] == [None, before[0][0]], document


def test_the_plain_spark_writer_does_not_rerun_a_merge_that_landed(spark: SparkSession, dbt_project: DbtProject,
                                                                   warehouse: Path) -> None:
    """The full torture run's plain Spark writer re-ran its MERGE after a cut whose commit had
    landed; its session's cached table was stale and a MERGE with only `WHEN NOT MATCHED THEN
    INSERT` is an append Iceberg does not validate, so the batch went in twice (50 rows
    duplicated). Another session's catalog on the same warehouse commits behind the cached `local` one,
    as the lost answer did; the writer must refresh, see its batch and not re-run it."""
    schema = dbt_project.schema
    with stale_local_catalog(spark, warehouse) as behind:
        spark.sql(f"create namespace if not exists local.{schema}")
        table = f"local.{schema}.plain_merge"
        spark.sql(f"create table {table} (id bigint, batch_id bigint, payload string, part bigint) using iceberg "
                  "partitioned by (part)")
        assert merge_batch_guarded(spark, table, 1) == GuardedWrite("committed")

        def count(batch: int) -> int:
            return int(spark.sql(f"select count(*) from {table} where batch_id = {batch}").collect()[0][0])

        # The defect's mechanism: a blind re-run against the stale cache inserts the batch again.
        behind.sql(merge_sql(table, 2))
        assert count(2) == 0, "the cached catalog was expected to be stale"
        spark.sql(merge_sql(table, 2))
        assert batch_rows_present(spark, table, 2) == 2 * ROWS_PER_BATCH

        def landed_then_cut() -> None:
            behind.sql(merge_sql(table, 3))
            assert count(3) == 0, "the cached catalog was expected to be stale"
            raise ConnectionError("the connection to the catalog was cut after the commit")

        write = merge_batch_guarded(spark, table, 3, merge=landed_then_cut)
        assert (write.event, write.reruns, write.landed_after_failure) == ("committed", 0, True), write
        assert batch_rows_present(spark, table, 3) == ROWS_PER_BATCH
        assert write.failures[0]["message"] == "the connection to the catalog was cut after the commit"


def twelve_groups_without_retries(spark: SparkSession, dbt_project: DbtProject, tmp_path: Path,
                                  postgres_server: PostgresServer, catalog: str, name: str) -> str:
    """`catalog`.<schema>.`name` on a JDBC catalog: 12 partitions x 6 small files, commit retries off."""
    properties = postgres_server.spark_catalog_properties(str(tmp_path / "pg_warehouse"))
    spark.conf.set(f"spark.sql.catalog.{catalog}", "org.apache.iceberg.spark.SparkCatalog")
    for key, value in properties.items():
        spark.conf.set(f"spark.sql.catalog.{catalog}.{key}", value)
    table = f"{catalog}.{dbt_project.schema}.{name}"
    spark.sql(f"create namespace if not exists {catalog}.{dbt_project.schema}")
    spark.sql(f"create table {table} (id bigint, part bigint) using iceberg partitioned by (part) "
              "tblproperties ('commit.retry.num-retries' = '0')")
    for batch in range(6):
        spark.sql(f"insert into {table} select id, id % 12 from range({batch * 120}, {batch * 120 + 120})")
    return table


def test_partial_progress_compaction_does_not_race_its_own_commits_on_a_jdbc_catalog(
        spark: SparkSession, dbt_project: DbtProject, tmp_path: Path, postgres_server: PostgresServer) -> None:
    """After the full torture run's load, the compaction of t_merge (43 partitions) failed with
    "partial-progress.enabled is true but 3 rewrite commits failed" (`CommitFailedException:
    Cannot commit: stale table metadata`) with no other writer left. On a JDBC catalog Iceberg
    1.10 fails such commits on every retry once one commit carries several file groups (more
    groups than `partial-progress.max-commits`, default 10; measured: 12 and 43 groups failed in
    every run, with 1 or 5 rewrite threads and 0, 4 or 10 retries), and rewrite threads racing
    each other fail without retries. The policy now rewrites groups one at a time and commits each
    alone; with commit retries off, any commit that raced another would fail the call."""
    table = twelve_groups_without_retries(spark, dbt_project, tmp_path, postgres_server, "pg_groups", "group_commits")
    checksum = f"select count(*), sum(id), sum(part) from {table}"
    before = spark.sql(checksum).collect()

    invocation = dbt_project("run-operation", "dbt_iceberg_maint.maintain", "--args", json.dumps({
        "relation": table, "operations": ["rewrite_data_files"],
        "policy": {"compaction": {"min_input_files": 2, "partial_progress": True}}}))

    [result] = parse_result_lines(invocation.log_messages)
    assert (result.operation, result.status) == ("rewrite_data_files", "success"), result.reason
    assert "'max-concurrent-file-group-rewrites', '1'" in (result.sql or "")
    assert "'partial-progress.max-commits', '10000'" in (result.sql or "")
    assert (result.metrics["rewritten_data_files_count"], result.metrics["added_data_files_count"]) == (72, 12)
    assert spark.sql(checksum).collect() == before


def test_default_compaction_of_a_small_table_rewrites_groups_in_parallel_and_commits_once_on_a_jdbc_catalog(
        spark: SparkSession, dbt_project: DbtProject, tmp_path: Path, postgres_server: PostgresServer) -> None:
    """The default `partial_progress: auto` on a table below `partial_progress_above_mb`, the
    faster setting the effect bench measured (docs/benchmarks-effect.md): Iceberg rewrites the 12
    groups up to 5 at a time, then the calling thread commits once, so with commit retries off no
    group commit can race another (the test above's failure mode)."""
    table = twelve_groups_without_retries(spark, dbt_project, tmp_path, postgres_server, "pg_one_commit", "one_commit")
    checksum = f"select count(*), sum(id), sum(part) from {table}"
    before = spark.sql(checksum).collect()
    snapshots = spark.sql(f"select count(*) from {table}.snapshots").collect()[0][0]

    invocation = dbt_project("run-operation", "dbt_iceberg_maint.maintain", "--args", json.dumps({
        "relation": table, "operations": ["rewrite_data_files"],
        "policy": {"compaction": {"min_input_files": 2}}}))

    [result] = parse_result_lines(invocation.log_messages)
    assert (result.operation, result.status) == ("rewrite_data_files", "success"), result.reason
    assert "partial-progress" not in (result.sql or "") and "max-concurrent" not in (result.sql or ""), result.sql
    assert (result.metrics["rewritten_data_files_count"], result.metrics["added_data_files_count"]) == (72, 12)
    assert spark.sql(f"select count(*) from {table}.snapshots").collect()[0][0] == snapshots + 1  # one commit
    assert spark.sql(checksum).collect() == before


def test_a_lost_commit_answer_on_a_jdbc_catalog_deletes_the_landed_manifest_list_and_a_rollback_repairs_it(
        spark: SparkSession, dbt_project: DbtProject, tmp_path: Path, postgres_server: PostgresServer) -> None:
    """Finding 9 (docs/torture.md): a referenced manifest list was gone after the full run's load.
    Iceberg 1.10's JDBC catalog, not this package: the connection is cut after PostgreSQL committed
    the `UPDATE`; the connection pool reconnects and runs the same conditional `UPDATE` again, which
    matches no row now, so the commit that landed is reported as `CommitFailedException`. The MERGE
    retries against the refreshed table, its validation finds its own landed files as conflicting,
    and that `ValidationException` makes Iceberg delete every manifest list it wrote, the landed
    one included. The table's current snapshot is then unreadable. The repair docs/torture.md
    gives: roll back to the parent snapshot, then re-run the (idempotent) write."""
    catalog = "pg_lost_answer"
    with CommitCutProxy(postgres_server.port) as proxy:
        properties = postgres_server.spark_catalog_properties(str(tmp_path / "pg_warehouse"))
        properties["uri"] = f"jdbc:postgresql://127.0.0.1:{proxy.port}/{postgres_server.database}?prepareThreshold=0"
        spark.conf.set(f"spark.sql.catalog.{catalog}", "org.apache.iceberg.spark.SparkCatalog")
        for key, value in properties.items():
            spark.conf.set(f"spark.sql.catalog.{catalog}.{key}", value)
        schema = dbt_project.schema
        table = f"{catalog}.{schema}.lost_answer"
        spark.sql(f"create namespace if not exists {catalog}.{schema}")
        spark.sql(f"create table {table} (id bigint, part bigint) using iceberg partitioned by (part)")
        for batch in range(4):
            spark.sql(f"insert into {table} select id, id % 4 from range({batch * 10}, {batch * 10 + 10})")
        parent = spark.sql(f"select snapshot_id from {table}.snapshots order by committed_at desc limit 1").collect()
        merge = (f"merge into {table} t using (select id, id % 4 + 10 as part from range(0, 20)) s on t.id = s.id "
                 "when matched then update set part = s.part when not matched then insert *")

        proxy.arm("after_commit", 1)
        with pytest.raises(Exception, match="ValidationException: Found conflicting files") as raised:
            spark.sql(merge)
        assert proxy.disarm() == 0 and len(proxy.cuts) == 1 and proxy.cuts[0].reply_swallowed
        assert classify(str(raised.value)).kind == "conflicting_added_files"

        spark.sql(f"refresh table {table}")
        current = spark.sql(f"select s.snapshot_id, s.parent_id, s.operation, s.manifest_list from {table}.snapshots s "
                            f"join {table}.history h on s.snapshot_id = h.snapshot_id where h.is_current_ancestor "
                            "order by s.committed_at desc limit 1").collect()[0]
        assert (current.parent_id, current.operation) == (parent[0].snapshot_id, "overwrite")
        assert not Path(current.manifest_list.removeprefix("file:")).exists(), "the landed manifest list survived"
        with pytest.raises(Exception, match="NotFoundException"):
            spark.sql(f"select count(*) from {table}").collect()

        spark.sql(f"call {catalog}.system.rollback_to_snapshot('{schema}.lost_answer', {current.parent_id})")
        assert spark.sql(f"select count(*), sum(part) from {table}").collect()[0] == (40, 60)
        spark.sql(merge)
        assert spark.sql(f"select count(*), sum(part) from {table}").collect()[0] == (40, 60 + 20 * 10)
