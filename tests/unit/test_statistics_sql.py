"""compute_table_stats and compute_partition_stats: the macros' SQL and argument checks against
their Python twins (policy/sql.py, policy/checks.py), and the file-name parser that tells the plan
which snapshot a statistics file is for. Rendered by dbt without Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dbt_iceberg_maint import guards
from dbt_iceberg_maint.errors import PolicyError
from dbt_iceberg_maint.policy import checks
from dbt_iceberg_maint.policy import sql as s
from dbt_iceberg_maint.policy.statistics import statistics_due
from tests.expect import markers
from tests.unit.test_procedure_sql import render

TABLE = s.TableRef("analytics", "events")
SQL_CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("cts_minimal", "compute_table_stats", {},
     "CALL system.compute_table_stats(table => 'analytics.events')"),
    ("cts_full", "compute_table_stats", {"snapshot_id": 4925613189424587, "columns": ["id", "event_date", "o'k"]},
     "CALL system.compute_table_stats(table => 'analytics.events', snapshot_id => 4925613189424587, "
     "columns => array('id', 'event_date', 'o\\'k'))"),
    ("cps_minimal", "compute_partition_stats", {},
     "CALL system.compute_partition_stats(table => 'analytics.events')"),
    ("cps_snapshot", "compute_partition_stats", {"snapshot_id": 0},
     "CALL system.compute_partition_stats(table => 'analytics.events', snapshot_id => 0)"),
]
ERROR_CASES: list[tuple[str, str, dict[str, Any], list[str]]] = [
    ("cts_bad", "compute_table_stats", {"snapshot_id": -1, "columns": []}, [
        "compute_table_stats: argument `snapshot_id` is -1; expected a snapshot id, a whole number >= 0",
        "compute_table_stats: argument `columns` is []; expected a non-empty list of column names, "
        "e.g. ['id', 'event_date']"]),
    ("cts_columns_string", "compute_table_stats", {"columns": "id, d"}, [
        "compute_table_stats: argument `columns` is id, d; expected a non-empty list of column names, "
        "e.g. ['id', 'event_date']"]),
    ("cts_column_entries", "compute_table_stats", {"snapshot_id": True, "columns": ["id", "", "a\nb"]}, [
        "compute_table_stats: argument `snapshot_id` is True; expected a snapshot id, a whole number >= 0",
        "compute_table_stats: argument `columns` has entry ; expected a column name, non-empty, without "
        "surrounding whitespace or line breaks",
        "compute_table_stats: argument `columns` has entry a\nb; expected a column name, non-empty, without "
        "surrounding whitespace or line breaks"]),
    ("cps_bad", "compute_partition_stats", {"snapshot_id": "42"}, [
        "compute_partition_stats: argument `snapshot_id` is 42; expected a snapshot id, a whole number >= 0"]),
]
# Planned statistics steps as a plan logs them: execute_maintenance_steps replays them unchanged.
REPLAYED = [{"table": "analytics.events", "operation": "compute_table_stats", "status": "planned", "reason": "r",
             "sql": SQL_CASES[1][3]},
            {"table": "analytics.events", "operation": "compute_partition_stats", "status": "planned", "reason": "r",
             "sql": SQL_CASES[2][3]}]
FILE_CASES: list[tuple[str, dict[str, Any] | None, str | None]] = [
    ("file_table", {"statistics_file": "s3://b/w/a/t/metadata/492561318942458718-cbe69fa8-203f-4fcd-97f3-925ae9fa3ea8.stats"},
     "492561318942458718"),
    ("file_partition", {"partition_statistics_file":
                        "/w/a/t/metadata/partition-stats-77-a1394d10-1f30-45ff-85ca-5f7a0bc3d0a1.parquet"}, "77"),
    ("file_none", {}, None),  # a table without snapshots: no output row
    ("file_unknown", {"statistics_file": "/w/a/t/metadata/stats.puffin"}, None),
]


@pytest.fixture(scope="module")
def rendered(render_target: Path) -> dict[str, Any]:
    cases = [{"id": i, "procedure": p, "kwargs": {"relation": "analytics.events", **k}} for i, p, k, _ in SQL_CASES]
    cases += [{"id": i, "kind": "errors", "procedure": p, "kwargs": k} for i, p, k, _ in ERROR_CASES]
    cases += [{"id": i, "kind": "statistics_file_snapshot", "kwargs": {"metrics": m}} for i, m, _ in FILE_CASES]
    cases += [{"id": "replayed", "kind": "step_errors", "kwargs": {"steps": REPLAYED}}]
    invocation = render(["run-operation", "iceberg_maint_render_cases", "--args", json.dumps({"cases": cases})],
                        render_target)
    assert invocation.success, invocation.exception
    outcomes = markers(invocation.log_messages, "ICEBERG_MAINT_CASE")
    return {outcome["id"]: outcome for outcome in outcomes}


def python_sql(procedure: str, kwargs: dict[str, Any]) -> str:
    if procedure == "compute_table_stats":
        return s.compute_table_stats_sql(TABLE, kwargs.get("snapshot_id"), kwargs.get("columns"))
    return s.compute_partition_stats_sql(TABLE, kwargs.get("snapshot_id"))


@pytest.mark.parametrize(("case", "procedure", "kwargs", "expected"), SQL_CASES, ids=[c[0] for c in SQL_CASES])
def test_sql_of_both_engines(rendered: dict[str, Any], case: str, procedure: str, kwargs: dict[str, Any],
                             expected: str) -> None:
    assert rendered[case]["sql"] == expected
    assert python_sql(procedure, kwargs) == expected


@pytest.mark.parametrize(("case", "procedure", "kwargs", "expected"), ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_refused_arguments_are_named_by_both_engines(rendered: dict[str, Any], case: str, procedure: str,
                                                     kwargs: dict[str, Any], expected: list[str]) -> None:
    assert rendered[case]["errors"] == expected
    if procedure == "compute_table_stats":
        assert checks.compute_table_stats_errors(kwargs.get("snapshot_id"), kwargs.get("columns")) == expected
    else:
        assert checks.compute_partition_stats_errors(kwargs.get("snapshot_id")) == expected
    with pytest.raises(PolicyError, match="invalid arguments"):
        python_sql(procedure, kwargs)


@pytest.mark.parametrize(("case", "metrics", "snapshot"), FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_the_snapshot_a_statistics_file_is_for(rendered: dict[str, Any], case: str, metrics: dict[str, Any] | None,
                                               snapshot: str | None) -> None:
    assert rendered[case]["value"] == snapshot


def test_statistics_due_rule() -> None:
    key, what = "statistics_snapshot_id", "table statistics"
    assert statistics_due({"snapshot_id": 5, key: 5, "rewrites_planned": []}, key, what).due is False
    assert statistics_due({"snapshot_id": 5, key: 4}, key, what).due is True
    assert statistics_due({"snapshot_id": 5}, key, what).reason == "no table statistics for the current snapshot 5"
    assert statistics_due({"snapshot_id": None}, key, what).due is False
    planned = statistics_due({"snapshot_id": 5, key: 5, "rewrites_planned": ["rewrite_manifests"]}, key, what)
    assert planned.due is True and "rewrite_manifests" in planned.reason


def test_a_planned_statistics_step_replays(rendered: dict[str, Any]) -> None:
    assert rendered["replayed"]["errors"] == []
    values, errors = guards.call_arguments(REPLAYED[0]["sql"], "CALL system.compute_table_stats(")
    assert errors == [] and values["columns"] == "array('id', 'event_date', 'o\\'k')"
