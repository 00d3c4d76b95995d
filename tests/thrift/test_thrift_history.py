"""Maintenance history over a real Spark Thrift Server (the dbt Cloud path, SQL only): the table
is created from the macros, and a run-operation and a post-hook append one row per step."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from dbt_iceberg_maint.maintenance.results import parse_result_lines

if TYPE_CHECKING:
    from tests.thrift.conftest import ThriftDbtProject, ThriftSql

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def built(thrift_project: ThriftDbtProject) -> ThriftDbtProject:
    thrift_project("seed")
    for batch in (1, 2):
        thrift_project("run", "--select", "event_log", batch=batch)
    return thrift_project


def rows(sql: ThriftSql, project: ThriftDbtProject, run_id: str) -> list[dict[str, Any]]:
    table = project.table("iceberg_maint_history")
    sql.execute(f"refresh table {table}")
    columns = ["path", "node", "table_name", "operation", "status", "reason", "output", "snapshot_id_after"]
    found = sql.rows(f"select {', '.join(columns)} from {table} where run_id = '{run_id}' order by started_at")
    return [dict(zip(columns, row, strict=True)) for row in found]


def test_run_operation_and_post_hook_rows_over_thrift(built: ThriftDbtProject, thrift_sql: ThriftSql) -> None:
    run = built("run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args", json.dumps(
        {"select": "event_log", "operations": ["rewrite_manifests"], "force": True}),
                run_id="th-hist-op")
    [result] = parse_result_lines(run.log_messages)
    assert result.status == "success"
    [row] = rows(thrift_sql, built, "th-hist-op")
    assert (row["path"], row["node"], row["operation"], row["status"]) == (
        "iceberg_maintenance", "iceberg_maint_integration_tests.event_log", "rewrite_manifests", "success")
    assert json.loads(row["output"]) == dict(result.metrics)
    current = thrift_sql.scalar(f"select snapshot_id from {built.table('event_log')}.refs where name = 'main'")
    assert row["snapshot_id_after"] == current

    hooked = built("run", "--select", "event_log", "--vars", "{batch: 2, maintain_after_run: true, "
                   "dbt_iceberg_maint_enabled: false, dbt_iceberg_maint_run_id: th-hist-hook}")
    results = list(parse_result_lines(hooked.log_messages))
    assert [r.status for r in results] == ["skipped"] * 4
    found = rows(thrift_sql, built, "th-hist-hook")
    assert [(r["path"], r["operation"], r["status"], r["reason"]) for r in found] == [
        ("maintain", r.operation, r.status, r.reason) for r in results]


def test_procedure_and_fleet_step_rows_over_thrift(built: ThriftDbtProject, thrift_sql: ThriftSql) -> None:
    """The two other paths: a procedure as a run-operation, and execute_maintenance_steps (what the
    fleet engine runs per step), each with its own path and the table's snapshot after it."""
    table = f"{built.schema}.event_log"
    procedure = built("run-operation", "dbt_iceberg_maint.rewrite_manifests", "--args",
                      json.dumps({"relation": table}), run_id="th-hist-proc")
    steps = [{"table": table, "operation": "rewrite_manifests", "status": "planned", "reason": "due",
              "sql": f"CALL system.rewrite_manifests(table => '{table}')"}]
    fleet_step = built("run-operation", "dbt_iceberg_maint.execute_maintenance_steps", "--args",
                       json.dumps({"steps": steps}), run_id="th-hist-steps")
    for run, run_id, path in ((procedure, "th-hist-proc", "rewrite_manifests"),
                              (fleet_step, "th-hist-steps", "execute_maintenance_steps")):
        [result] = parse_result_lines(run.log_messages)
        [row] = rows(thrift_sql, built, run_id)
        assert (row["path"], row["table_name"], row["operation"], row["status"]) == (
            path, table, "rewrite_manifests", result.status), row
        assert row["node"] == "iceberg_maint_integration_tests.event_log"
    current = thrift_sql.scalar(f"select snapshot_id from {built.table('event_log')}.refs where name = 'main'")
    assert row["snapshot_id_after"] == current  # the last step's
