"""The history macros without Spark: the vars they read, the table they create, the row and the
INSERT one step result becomes (macros/internal/history.sql, docs/history.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dbt_iceberg_maint.protocol import HISTORY_MARKER, HISTORY_ROWS_MARKER
from dbt_iceberg_maint.runtime.invoke import DbtInvocation, invoke_dbt
from tests.expect import markers

ENV = {"DBT_ICEBERG_MAINT_SCHEMA": "analytics"}
CONTRACT = ["run_id", "invocation_id", "path", "node", "table_name", "operation", "status", "reason", "started_at",
            "ended_at", "duration_ms", "output", "health_before", "health_after"]
RECORD = {"table": "analytics.events", "operation": "rewrite_data_files", "status": "success", "reason": "due",
          "sql": "CALL system.rewrite_data_files(table => 'analytics.events', where => 'day < \\'x\\'')",
          "metrics": {"rewritten_data_files_count": 7, "added_data_files_count": 1, "rewritten_bytes_count": 9000},
          "duration_ms": 1500}
BEFORE = {"snapshots": 4, "oldest_snapshot_age_hours": 2.5, "data_files": 9, "delete_files": 0, "snapshot_id": 11}
AFTER = {**BEFORE, "snapshots": 5, "data_files": 3, "snapshot_id": 12}
ORPHANS = {**RECORD, "operation": "remove_orphan_files", "metrics": {
    "orphan_file_count": 150, "orphan_file_location": [f"file:/w/data/o{i}.parquet" for i in range(150)]}}
CASES: list[dict[str, Any]] = [
    {"id": "settings", "kind": "settings"},
    {"id": "create", "kind": "create", "kwargs": {"relation": "analytics.iceberg_maint_history"}},
    {"id": "row", "kind": "row", "kwargs": {"path": "maintain", "record": RECORD, "before": BEFORE, "after": AFTER,
                                             "holder": "run-x", "node": "proj.events"}},
    {"id": "skipped", "kind": "row", "kwargs": {"path": "iceberg_maintenance", "record": {
        **RECORD, "status": "skipped", "reason": "only 1 snapshots", "sql": None, "metrics": {}, "duration_ms": 0}}},
    {"id": "orphans", "kind": "row", "kwargs": {"path": "remove_orphan_files", "record": ORPHANS}},
    {"id": "relation", "kind": "relation"},
    {"id": "streak_kinds", "kind": "streak_kinds"},
]


def render(target: Path, vars: str = "{dbt_iceberg_maint_run_id: run-x}",
           cases: list[dict[str, Any]] = CASES) -> DbtInvocation:
    return invoke_dbt(["run-operation", "iceberg_maint_history_cases", "--args", json.dumps({"cases": cases}),
                       "--target-path", str(target), "--vars", vars], env=ENV)


@pytest.fixture(scope="module")
def rendered(render_target: Path) -> dict[str, Any]:
    invocation = render(render_target)
    assert invocation.success, invocation.exception
    outcomes = markers(invocation.log_messages, "ICEBERG_MAINT_CASE")
    return {outcome["id"]: outcome["value"] for outcome in outcomes}


def test_defaults_name_the_target_schema_and_enable_history(rendered: dict[str, Any]) -> None:
    assert rendered["settings"] == {"enabled": True, "catalog": None, "schema": "analytics",
                                    "table": "iceberg_maint_history", "relation": "analytics.iceberg_maint_history"}
    assert rendered["relation"] == "analytics.iceberg_maint_history"


def test_the_table_has_the_contract_columns_and_is_an_append_log(rendered: dict[str, Any]) -> None:
    columns = [name for name, _type in rendered["row"]["columns"]]
    assert columns[:len(CONTRACT)] == CONTRACT
    assert columns[len(CONTRACT):] == ["snapshot_id_before", "snapshot_id_after", "lease_holder", "sql"]
    create = rendered["create"]
    assert create.startswith("create table if not exists analytics.iceberg_maint_history (run_id string, "
                             "invocation_id string, path string, ")
    assert "started_at timestamp, ended_at timestamp, duration_ms bigint, output string, " in create
    assert "using iceberg partitioned by (days(started_at))" in create
    assert "'commit.retry.num-retries' = '100'" in create and "'write.distribution-mode' = 'none'" in create


def test_an_executed_step_row_carries_output_health_snapshots_and_holder(rendered: dict[str, Any]) -> None:
    row = rendered["row"]["row"]
    assert (row["run_id"], row["path"], row["node"], row["table_name"]) == (
        "run-x", "maintain", "proj.events", "analytics.events")
    assert (row["operation"], row["status"], row["reason"], row["duration_ms"]) == (
        "rewrite_data_files", "success", "due", 1500)
    assert json.loads(row["output"]) == RECORD["metrics"]
    assert json.loads(row["health_before"]) == BEFORE and json.loads(row["health_after"]) == AFTER
    assert (row["snapshot_id_before"], row["snapshot_id_after"], row["lease_holder"]) == (11, 12, "run-x")
    assert row["started_at"].startswith("2026-11-27 09:30:00.125") and row["ended_at"].startswith("2026-11-27 09:30:02")
    assert row["invocation_id"] and row["invocation_id"] != "run-x"


def test_the_insert_sends_every_row_of_a_flush_in_one_statement(rendered: dict[str, Any]) -> None:
    insert = rendered["row"]["insert"]
    head = "insert into analytics.iceberg_maint_history (" + ", ".join(
        name for name, _type in rendered["row"]["columns"]) + ") values ("
    assert insert.startswith(head) and insert.count("('run-x', ") == 2
    # Timestamps as UTC literals, numbers bare, text escaped (the CALL's quotes and backslashes).
    assert "TIMESTAMP '2026-11-27 09:30:00.125000Z', TIMESTAMP '2026-11-27 09:30:02.125000Z', 1500, " in insert
    escaped = "'" + RECORD["sql"].replace("\\", "\\\\").replace("'", "\\'") + "'"
    assert ", 11, 12, 'run-x', " + escaped + ")" in insert


def test_a_skipped_step_row_has_no_output_health_or_holder(rendered: dict[str, Any]) -> None:
    row = rendered["skipped"]["row"]
    assert (row["status"], row["reason"], row["path"], row["duration_ms"]) == (
        "skipped", "only 1 snapshots", "iceberg_maintenance", 0)
    assert row["output"] == "{}"
    assert [row[k] for k in ("health_before", "health_after", "snapshot_id_before", "snapshot_id_after",
                             "lease_holder", "sql", "node")] == [None] * 7
    insert = rendered["skipped"]["insert"]
    assert ", 0, '{}', null, null, null, null, null, null)" in insert


def test_long_output_lists_are_cut_to_100_items(rendered: dict[str, Any]) -> None:
    output = json.loads(rendered["orphans"]["row"]["output"])
    assert output["orphan_file_count"] == 150
    assert output["orphan_file_location"] == ORPHANS["metrics"]["orphan_file_location"][:100]
    assert output["orphan_file_location_truncated"] is True


def test_vars_choose_the_table_and_switch_it_off(render_target: Path) -> None:
    invocation = render(render_target, "{dbt_iceberg_maint_history_schema: local.ops, "
                        "dbt_iceberg_maint_history_table: maint_log, dbt_iceberg_maint_history_enabled: false}",
                        [{"id": "settings", "kind": "settings"}, {"id": "relation", "kind": "relation"}])
    assert invocation.success, invocation.exception
    values = [case["value"] for case in markers(invocation.log_messages, "ICEBERG_MAINT_CASE")]
    assert values == [{"enabled": False, "catalog": "local", "schema": "ops", "table": "maint_log",
                       "relation": "local.ops.maint_log"}, "local.ops.maint_log"]


@pytest.mark.parametrize(("vars", "message"), [
    ("{dbt_iceberg_maint_history_enabled: 'yes'}", "history: argument `var dbt_iceberg_maint_history_enabled` is yes"),
    ("{dbt_iceberg_maint_history_schema: 'a.b.c'}", "var `dbt_iceberg_maint_history_schema` is \"a.b.c\""),
    ("{dbt_iceberg_maint_history_schema: 'ops; drop'}", "var `dbt_iceberg_maint_history_schema` is \"ops; drop\""),
    ("{dbt_iceberg_maint_history_table: 'x y'}", "var `dbt_iceberg_maint_history_table` is \"x y\""),
])
def test_bad_vars_are_refused_naming_the_var(render_target: Path, vars: str,
                                              message: str) -> None:
    invocation = render(render_target, vars, [{"id": "settings", "kind": "settings"}])
    assert not invocation.success
    text = " ".join(invocation.log_messages) + (invocation.exception or "")
    assert message in text and "; expected " in text, text[-2000:]


STEP = {"table": "analytics.events", "operation": "rewrite_manifests", "status": "planned", "reason": "due",
        "sql": "CALL system.rewrite_manifests(table => 'analytics.events')"}
SKIPPED = {**STEP, "operation": "expire_snapshots", "status": "skipped", "reason": "not due", "sql": None}
FAILED = {**STEP, "operation": "remove_orphan_files", "status": "failed", "reason": "GC is disabled", "sql": None}


@pytest.mark.parametrize(("vars", "steps", "dry_run", "statuses"), [
    # A dry run writes no history, not even for its skipped steps: nothing to send.
    ("{dbt_iceberg_maint_run_id: run-x}", [STEP, SKIPPED], True, ["dry_run", "skipped"]),
    # The kill switch: rows of skipped and failed steps are not even collected.
    ("{dbt_iceberg_maint_history_enabled: false}", [SKIPPED, FAILED], False, ["skipped", "failed"]),
], ids=["dry_run", "disabled"])
def test_the_step_loop_sends_nothing_when_no_history_is_written(render_target: Path, vars: str,
                                                                 steps: list[dict[str, Any]], dry_run: bool,
                                                                 statuses: list[str]) -> None:
    """Rendered against a Thrift target nobody listens on: any statement would fail the run."""
    invocation = invoke_dbt(["run-operation", "iceberg_maint_history_cases", "--args", json.dumps(
        {"cases": [{"id": "execute", "kind": "execute", "kwargs": {"steps": steps, "dry_run": dry_run}}]}),
        "--target-path", str(render_target), "--vars", vars],
        env={**ENV, "DBT_ICEBERG_MAINT_TARGET": "thrift", "DBT_ICEBERG_MAINT_THRIFT_PORT": "1"})
    assert invocation.success, invocation.exception
    [value] = [case["value"] for case in markers(invocation.log_messages, "ICEBERG_MAINT_CASE")]
    assert [r["status"] for r in value] == statuses
    assert invocation.sql_statements == ()
    assert not markers(invocation.log_messages, HISTORY_MARKER)


def test_a_deferred_step_loop_logs_each_row_and_sends_nothing(render_target: Path) -> None:
    """execute_maintenance_steps' `defer_history` (the fleet engine's steps): every row is logged in
    an ICEBERG_MAINT_HISTORY_ROWS line as its step ends, and no history statement is sent (a Thrift
    target nobody listens on: any statement would fail the run)."""
    invocation = invoke_dbt(["run-operation", "iceberg_maint_history_cases", "--args", json.dumps(
        {"cases": [{"id": "execute", "kind": "execute", "kwargs": {"steps": [SKIPPED, FAILED], "dry_run": False,
                                                                    "defer_history": True}}]}),
        "--target-path", str(render_target), "--vars", "{dbt_iceberg_maint_run_id: run-x}"],
        env={**ENV, "DBT_ICEBERG_MAINT_TARGET": "thrift", "DBT_ICEBERG_MAINT_THRIFT_PORT": "1"})
    assert invocation.success, invocation.exception
    assert invocation.sql_statements == ()
    assert not markers(invocation.log_messages, HISTORY_MARKER)
    logged = [row for line in markers(invocation.log_messages, HISTORY_ROWS_MARKER) for row in line["rows"]]
    assert [(r["run_id"], r["table_name"], r["operation"], r["status"], r["reason"]) for r in logged] == [
        ("run-x", "analytics.events", "expire_snapshots", "skipped", "not due"),
        ("run-x", "analytics.events", "remove_orphan_files", "failed", "GC is disabled")]


def test_rows_handed_back_make_the_insert_their_steps_would_have_sent(rendered: dict[str, Any],
                                                                      render_target: Path) -> None:
    """A row as ICEBERG_MAINT_HISTORY_ROWS logs it (JSON: its timestamps as text) comes back through
    claim_leases' `history_rows` to the very INSERT its step would have sent; a row of any other
    shape is refused naming the row and the column."""
    logged = rendered["row"]["row"]
    bad = [{**logged, "duration_ms": "1500"}, {**logged, "started_at": "yesterday"}, {**logged, "status": None},
           {**logged, "colour": "red"}, "a row"]
    invocation = render(render_target, cases=[{"id": "good", "kind": "given", "kwargs": {"rows": [logged]}},
                                              {"id": "bad", "kind": "given", "kwargs": {"rows": bad}},
                                              {"id": "shape", "kind": "given", "kwargs": {"rows": "rows"}}])
    assert invocation.success, invocation.exception
    value = {case["id"]: case["value"] for case in markers(invocation.log_messages, "ICEBERG_MAINT_CASE")}
    one = rendered["row"]["insert"]
    assert value["good"] == {"errors": [], "insert": one[:one.index("), (") + 1]}
    owner = "claim_leases: argument `history_rows` "
    assert value["bad"] == {"insert": None, "errors": [
        owner + "row 1 column duration_ms is \"1500\"; expected a whole number or null",
        owner + "row 2 column started_at is \"yesterday\"; expected a UTC time 'YYYY-MM-DD HH:MM:SS[.ffffff]' or null",
        owner + "row 3 column status is null; expected a non-empty string",
        owner + "row 4 has unknown column(s) colour; expected some of " + ", ".join(
            name for name, _type in rendered["row"]["columns"]),
        owner + "row 5 is \"a row\"; expected a mapping keyed by the history columns"]}
    assert value["shape"]["errors"] == [owner + "is \"rows\"; expected a list of history rows (mappings keyed by "
                                        "the history columns), as ICEBERG_MAINT_HISTORY_ROWS lines log them"]



def test_the_streak_test_and_the_report_count_the_same_skips(rendered: dict[str, Any]) -> None:
    """The iceberg_maintenance_streak test (Jinja) and the report (Python) classify skip reasons
    by the same first words, so a streak the test fails on is the streak the report shows."""
    from dbt_iceberg_maint.report.model import COST_GATE_PREFIX, LEASE_PREFIXES, blocked_kind

    assert rendered["streak_kinds"] == {"failed": [], "lease": list(LEASE_PREFIXES), "cost_gate": [COST_GATE_PREFIX]}
    for kind, prefixes in rendered["streak_kinds"].items():
        for prefix in prefixes:
            assert blocked_kind("skipped", prefix + "x") == kind
