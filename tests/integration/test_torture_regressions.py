"""Defects the torture suite found (docs/torture.md), each pinned by its own test."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.results import parse_result_lines

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

FOUR_DAYS = 96 * 3600


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
    Here a second catalog on the same warehouse commits behind the cached `local` catalog."""
    schema = dbt_project.schema
    cache_key = "spark.sql.catalog.local.cache.expiration-interval-ms"
    manager = spark._jsparkSession.sessionState().catalogManager()  # noqa: SLF001
    spark.conf.set(cache_key, "-1")  # never expires: the staleness does not depend on timing
    manager.reset()
    try:
        spark.sql(f"create namespace if not exists local.{schema}")
        spark.sql(f"create table local.{schema}.cached (id bigint) using iceberg")
        spark.sql(f"insert into local.{schema}.cached values (1)")
        before = spark.sql(f"select snapshot_id from local.{schema}.cached.snapshots").collect()
        other = "spark.sql.catalog.behind"
        spark.conf.set(other, "org.apache.iceberg.spark.SparkCatalog")
        spark.conf.set(f"{other}.type", "hadoop")
        spark.conf.set(f"{other}.warehouse", str(warehouse.resolve()))
        spark.sql(f"insert into behind.{schema}.cached values (2)")
        stale = spark.sql(f"select count(*) from local.{schema}.cached.snapshots").collect()[0][0]
        assert stale == len(before) == 1, "the cached catalog was expected to be stale"

        invocation = dbt_project("run-operation", "dbt_iceberg_maint.table_snapshots", "--args",
                                 json.dumps({"tables": [f"{schema}.cached"], "after": {f"{schema}.cached": -1}}))
        logged = [m for m in invocation.log_messages if "ICEBERG_MAINT_SNAPSHOTS" in m]
        document = json.loads(logged[-1].split("ICEBERG_MAINT_SNAPSHOTS", 1)[1])
        assert len(document["tables"][0]["snapshots"]) == 2, document
    finally:
        spark.conf.unset(cache_key)
        manager.reset()
