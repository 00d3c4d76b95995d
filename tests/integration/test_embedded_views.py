"""The embedded default catalog (Iceberg's JDBC catalog on a SQLite file in the warehouse) runs a
typical dbt project unchanged: a seed, a staging view (created, then replaced), a table and an
incremental MERGE on a date partition; pyiceberg reads the same catalog, and another process
commits to the same table concurrently without losing a commit."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.metadata.catalog import config_from_options, open_catalog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

MODELS = ("stg_events", "daily_amounts", "events_by_day")
SCENARIO = "{views_scenario: true, batch: %d}"


def operations(spark: SparkSession, table: str) -> list[str]:
    return [r.operation for r in spark.sql(f"select operation from {table}.snapshots order by committed_at").collect()]


def build(dbt_project: DbtProject, batch: int) -> dict[str, str]:
    invocation = dbt_project("build", "--select", "raw_events", "path:models/views_scenario",
                             "--vars", SCENARIO % batch)
    return {node.name: node.status for node in invocation.nodes}


def test_a_project_with_a_view_builds_twice_and_pyiceberg_reads_it(
    spark: SparkSession, warehouse: Path, dbt_project: DbtProject
) -> None:
    schema = dbt_project.schema
    events_by_day = dbt_project.table("events_by_day")
    assert build(dbt_project, 1) == {"raw_events": "success", **dict.fromkeys(MODELS, "success")}
    # (dbt's incremental runs leave session-wide temporary `__dbt_tmp` views: not the catalog's.)
    views = {row.viewName for row in spark.sql(f"show views in local.{schema}").collect() if not row.isTemporary}
    assert views == {"stg_events"}
    first = spark.sql(f"select count(*), count(distinct event_id) from {events_by_day}").collect()[0]
    assert first[0] == first[1] > 0
    first_operations = operations(spark, events_by_day)

    # The second build replaces the view and MERGEs batch 2 into the incremental model.
    assert build(dbt_project, 2) == {"raw_events": "success", **dict.fromkeys(MODELS, "success")}
    assert spark.sql(f"select max(batch) from {dbt_project.table('stg_events')}").collect()[0][0] == 2
    counts = spark.sql(f"select count(*), count(distinct event_id) from {events_by_day}").collect()[0]
    expected = spark.sql(f"select count(distinct event_id) from {dbt_project.table('stg_events')}").collect()[0][0]
    assert counts[0] == counts[1] == expected > first[0]
    # A real MERGE into the existing table: one more snapshot on top of the old history (a `create
    # or replace` restarts it), and batch 2's corrections of batch-1 events updated in place.
    assert operations(spark, events_by_day) == [*first_operations, "overwrite"]
    corrected = spark.sql(
        f"select r.event_id, r.amount, e.amount from {dbt_project.table('raw_events')} r "
        f"join {events_by_day} e on e.event_id = r.event_id where r.batch = 2 and r.event_id <= 30").collect()
    assert len(corrected) == 5 and all(raw == merged for _id, raw, merged in corrected), corrected
    daily = spark.sql(f"select sum(events) from {dbt_project.table('daily_amounts')}").collect()[0][0]
    assert daily == spark.sql(f"select count(*) from {dbt_project.table('stg_events')}").collect()[0][0]

    # The catalog is the SQLite file in the warehouse: the view is a row of its own kind.
    with sqlite3.connect(warehouse / "iceberg_catalog.db") as connection:
        kinds = dict(connection.execute(
            "select table_name, iceberg_type from iceberg_tables where table_namespace = ?", (schema,)).fetchall())
    assert kinds == {"raw_events": "TABLE", "stg_events": "VIEW", "daily_amounts": "TABLE",
                     "events_by_day": "TABLE"}

    # pyiceberg (no JVM) reads the same catalog: the tables, not the view, and the same rows.
    catalog = open_catalog(config_from_options(str(warehouse), []))
    assert catalog.config.properties["type"] == "jdbc"
    names = {n for n in catalog.list_tables() if n.startswith(f"{schema}.")}
    assert names == {f"{schema}.raw_events", f"{schema}.daily_amounts", f"{schema}.events_by_day"}
    table = catalog.load(f"{schema}.events_by_day")
    assert table.scan().to_arrow().num_rows == counts[0]
    current = spark.sql(f"select snapshot_id from {events_by_day}.refs where name = 'main'").collect()[0][0]
    assert table.current_snapshot() is not None and table.current_snapshot().snapshot_id == current


def test_two_processes_commit_to_one_table_and_lose_nothing(
    spark: SparkSession, warehouse: Path, dbt_project: DbtProject, tmp_path: Path
) -> None:
    """Iceberg's JDBC commit is a conditional UPDATE of the table's row: a commit that lost the race
    is retried by Iceberg, never silently lost, across processes."""
    table = f"local.{dbt_project.schema}.two_writers"
    spark.sql(f"create namespace if not exists local.{dbt_project.schema}")
    spark.sql(f"create table {table} (id bigint, writer string) using iceberg "
              "tblproperties ('commit.retry.num-retries'='50', 'commit.retry.min-wait-ms'='20')")
    commits, go = 12, tmp_path / "go"
    # Raw: its stdout is the answer (the last line, JSON); processes.start would append it to a log
    # together with the JVM's stderr, which this test discards.
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.embedded_writer", "--warehouse", str(warehouse), "--table", table,
         "--commits", str(commits), "--first-id", "1000", "--go", str(go)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 180
        while not (tmp_path / "writer_ready").exists():
            assert writer.poll() is None, "the writer process ended before it was ready"
            assert time.monotonic() < deadline, "the writer process was not ready within 180 s"
            time.sleep(0.1)
        go.touch()
        for offset in range(commits):
            spark.sql(f"insert into {table} values ({offset}, 'session')")
        out, _ = writer.communicate(timeout=300)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    result = json.loads(out.strip().splitlines()[-1])
    assert result == {"committed": commits, "errors": []}, result
    spark.sql(f"refresh table {table}")  # the session's catalog caches the table: read the current state
    rows = spark.sql(f"select writer, count(*), count(distinct id) from {table} group by writer").collect()
    assert {r[0]: (r[1], r[2]) for r in rows} == {"session": (commits, commits), "writer": (commits, commits)}
    assert spark.sql(f"select count(*) from {table}.snapshots").collect()[0][0] == 2 * commits
