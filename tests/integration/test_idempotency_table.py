"""The idempotency table (dbt_iceberg_maint/runner/idempotency.py) for real: the nodes it calls
idempotent - insert_overwrite, microbatch, seeds, snapshots - leave the same data when re-run
after their commit landed, exactly what the runner relies on when it re-runs them.

Three `dbt build` invocations: batch 1, batch 2 (the landed commit), batch 2 again (the re-run).
Snapshots run on a JDBC catalog (PostgreSQL, `jdbc.schema-version` V1: views): dbt-spark's
snapshot materialization replaces a staging *view* in the target catalog, which Iceberg's Hadoop
catalog refuses ("Replacing a view is not supported by catalog").
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from dbt_iceberg_maint.runner.idempotency import idempotency
from dbt_iceberg_maint.runtime.invoke import invoke_dbt
from dbt_iceberg_maint.runtime.spark import CatalogSpec, register_catalog, switch_warehouse
from tests.conftest import invocation_env

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from lab.postgres import PostgresServer
    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

NODES = ("raw_users", "raw_events", "idem_overwrite", "idem_microbatch")
EVENT_TIME = ["--event-time-start", "2026-11-01", "--event-time-end", "2026-11-04"]


def fingerprint(spark: SparkSession, table: str) -> tuple[int, int]:
    """Row count and an order-independent checksum of every column."""
    row = spark.sql(f"select count(*), coalesce(sum(hash(*)), 0) from {table}").collect()[0]
    return int(row[0]), int(row[1])


@pytest.fixture(scope="module")
def runs(spark: SparkSession, dbt_project: DbtProject, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    target = tmp_path_factory.mktemp("idempotency_target")

    def build(batch: int) -> dict[str, tuple[int, int]]:
        dbt_project("build", "--select", "raw_users", "raw_events", "path:models/idempotency",
                    "--vars", "{idempotency_scenario: true}", "--target-path", str(target), *EVENT_TIME,
                    batch=batch)
        return {node: fingerprint(spark, dbt_project.table(node)) for node in NODES}

    build(1)
    landed = build(2)
    rerun = build(2)
    manifest = json.loads((target / "manifest.json").read_text())
    nodes = {node["name"]: node for node in manifest["nodes"].values()}
    return {"landed": landed, "rerun": rerun, "nodes": nodes}


@pytest.mark.parametrize("node", NODES)
def test_idempotent_node_re_run_after_a_landed_commit_leaves_the_same_data(runs: dict[str, Any], node: str) -> None:
    verdict = idempotency(runs["nodes"][node])
    assert verdict.idempotent, verdict.reason  # what the runner decides from the manifest...
    assert runs["landed"][node][0] > 0
    assert runs["rerun"][node] == runs["landed"][node]  # ...is what the data shows


def test_microbatch_wrote_only_the_requested_days(
    spark: SparkSession, dbt_project: DbtProject, runs: dict[str, Any]
) -> None:
    days = {r[0] for r in spark.sql(
        f"select distinct cast(event_date as string) from {dbt_project.table('idem_microbatch')}").collect()}
    assert days == {"2026-11-01", "2026-11-02", "2026-11-03"}
    ids = spark.sql(f"select count(*), count(distinct event_id, loaded_batch) from "
                    f"{dbt_project.table('idem_microbatch')}").collect()[0]
    assert ids[0] == ids[1]


def test_overwrite_holds_each_batch_once(spark: SparkSession, dbt_project: DbtProject, runs: dict[str, Any]) -> None:
    table, raw = dbt_project.table("idem_overwrite"), dbt_project.table("raw_events")
    got = spark.sql(f"select loaded_batch, count(*) from {table} group by 1 order by 1").collect()
    want = spark.sql(f"select batch, count(*) from {raw} where batch <= 2 group by 1 order by 1").collect()
    assert [tuple(r) for r in got] == [tuple(r) for r in want]


def test_a_snapshot_re_run_after_its_commit_landed_records_nothing_new(
    spark: SparkSession, dbt_project: DbtProject, warehouse: Path, tmp_path: Path,
    postgres_server: PostgresServer,
) -> None:
    """On the JDBC catalog: batch 1, batch 2 (every second user's country changes: the landed
    commit), batch 2 again (the re-run). The re-run leaves the snapshot table as it was."""
    lake = tmp_path / "jdbc_warehouse"
    properties = {"type": "jdbc", "uri": postgres_server.jdbc_uri, "jdbc.user": "postgres",
                  "jdbc.password": "postgres", "jdbc.schema-version": "V1"}
    env = {**dbt_project.env, "DBT_ICEBERG_MAINT_TARGET": "session_jdbc",
           "DBT_ICEBERG_MAINT_JDBC_URI": postgres_server.jdbc_uri, "DBT_ICEBERG_MAINT_WAREHOUSE": str(lake)}
    register_catalog(spark, CatalogSpec(str(lake), properties=properties))
    spark._jsparkSession.sessionState().catalogManager().reset()  # noqa: SLF001  the JDBC catalog from now on
    table = dbt_project.table("idem_snapshot")

    def snapshot(batch: int) -> tuple[int, int]:
        invocation = invoke_dbt(["snapshot", "--vars", "{idempotency_scenario: true}"],
                                env=invocation_env(env, batch, None))
        assert invocation.success, [(n.name, n.message) for n in invocation.failed_nodes()] or invocation.exception
        return fingerprint(spark, table)

    try:
        seeded = invoke_dbt(["seed", "--select", "raw_users"], env=env)
        assert seeded.success, seeded.exception
        first_run = snapshot(1)
        landed = snapshot(2)
        rerun = snapshot(2)
        current = spark.sql(f"select count(*) from {table} where dbt_valid_to is null").collect()[0][0]
    finally:
        switch_warehouse(spark, warehouse)  # the module's catalog again
    users = first_run[0]
    assert users > 0 and landed[0] == users + users // 2  # every second user got a new version
    assert rerun == landed
    assert current == users
