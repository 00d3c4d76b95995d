"""The Jinja↔Python protocol: the macros' constants and logging macro agree with protocol.py.

One `dbt run-operation` of the harness renders the macro side without Spark; a drift between the
two sides (a renamed marker, status, operation or health field) fails here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dbt_iceberg_maint import protocol
from dbt_iceberg_maint.maintenance.results import MaintenanceResult, parse_result_lines
from dbt_iceberg_maint.maintenance.run import MaintenancePlan, started
from dbt_iceberg_maint.runtime.invoke import DbtInvocation, invoke_dbt
from tests.expect import markers

ENV = {"DBT_ICEBERG_MAINT_SCHEMA": "analytics"}
RESULT = {"table": "analytics.events", "operation": "rewrite_manifests", "status": "success", "reason": "due",
          "sql": "CALL system.rewrite_manifests(table => 'analytics.events')", "metrics": {"n": 1}, "duration_ms": 3}
STEP = {"table": "analytics.events", "operation": "rewrite_manifests", "status": "planned", "reason": "due",
        "sql": "CALL system.rewrite_manifests(table => 'analytics.events')"}
CASES: list[dict[str, Any]] = [
    {"id": "protocol", "kind": "protocol"},
    {"id": "result", "kind": "log_marker", "kwargs": {"marker": "result", "payload": RESULT}},
    {"id": "plan", "kind": "log_marker", "kwargs": {"marker": "plan", "payload": {
        "tables": [{"model": "p.events", "table": "analytics.events"}], "operations": ["rewrite_manifests"],
        "as_of": None, "steps": [STEP]}}},
    {"id": "start", "kind": "log_marker", "kwargs": {"marker": "start", "payload": {
        "table": "analytics.events", "operation": None}}},
    {"id": "steps_ok", "kind": "step_errors", "kwargs": {"steps": [
        STEP, {**STEP, "status": "skipped", "sql": None},
        {**STEP, "table": "local.analytics.events",
         "sql": "CALL local.system.rewrite_manifests(table => 'analytics.events', use_caching => true)"}]}},
    {"id": "steps_not_a_list", "kind": "step_errors", "kwargs": {"steps": {"table": "x"}}},
    {"id": "steps_bad", "kind": "step_errors", "kwargs": {"steps": [
        {**STEP, "status": "success", "extra": 1},
        {**STEP, "operation": "vacuum"},
        {**STEP, "table": "events; drop"},
        {**STEP, "sql": "CALL system.rewrite_manifests(table => 'analytics.other')"},
        {**STEP, "sql": "CALL system.rewrite_manifests(table => 'analytics.events'); drop table x"},
        "rewrite_manifests"]}},
    {"id": "settled_ok", "kind": "settled_errors", "kwargs": {
        "steps": [{**STEP, "status": "skipped", "sql": None}, {**STEP, "status": "failed"}], "settled": True,
        "nodes": {"analytics.events": "project.events"}}},
    {"id": "settled_bad", "kind": "settled_errors", "kwargs": {
        "steps": [{**STEP, "status": "skipped"}, STEP], "settled": True, "record": {"policy": {}},
        "nodes": {"analytics.events": 3}}},
    # Not a list with `settled: true`: refused by the step checks, never walked (found by the fuzzer).
    {"id": "settled_not_a_list", "kind": "settled_errors", "kwargs": {"steps": 1298, "settled": True}},
    # Without `settled`, planned steps run as ever.
    {"id": "not_settled", "kind": "settled_errors", "kwargs": {"steps": [STEP]}},
]


@pytest.fixture(scope="module")
def rendered(render_target: Path) -> DbtInvocation:
    invocation = invoke_dbt(["run-operation", "iceberg_maint_render_cases", "--args", json.dumps({"cases": CASES}),
                             "--target-path", str(render_target)], env=ENV)
    assert invocation.success, invocation.exception
    return invocation


def cases(invocation: DbtInvocation) -> dict[str, dict[str, Any]]:
    outcomes = markers(invocation.log_messages, "ICEBERG_MAINT_CASE")
    return {outcome["id"]: outcome for outcome in outcomes}


def test_the_macro_side_declares_what_protocol_py_declares(rendered: DbtInvocation) -> None:
    assert cases(rendered)["protocol"]["value"] == protocol.as_dict()


def test_lines_of_the_one_logging_macro_are_read_by_the_python_side(rendered: DbtInvocation) -> None:
    messages = rendered.log_messages
    assert parse_result_lines(messages) == (MaintenanceResult.from_json(json.dumps(RESULT)),)
    plan = MaintenancePlan.from_log(messages)
    assert plan is not None and [step.to_dict() for step in plan.steps] == [STEP]
    assert started(messages) == [("analytics.events", None)]
    for marker in protocol.MARKERS[:3]:
        assert sum(m.startswith(marker + " ") for m in messages) == 1


def test_operations_are_canonicalised_as_the_macros_do() -> None:
    assert protocol.canonical_operations(None) == protocol.DEFAULT_OPERATIONS
    assert protocol.canonical_operations(["rewrite_manifests", "compaction"]) == ("rewrite_data_files",
                                                                                  "rewrite_manifests")


STEPS = "execute_maintenance_steps: argument `steps`, "


def test_steps_to_replay_are_validated_strictly(rendered: DbtInvocation) -> None:
    outcome = cases(rendered)
    assert outcome["steps_ok"]["errors"] == []
    assert outcome["steps_not_a_list"]["errors"] == [
        "execute_maintenance_steps: argument `steps` is {\"table\": \"x\"}; expected a non-empty list of steps "
        "{table, operation, status, reason, sql}"]
    call = "CALL system.rewrite_manifests(table => 'analytics.events'"
    assert outcome["steps_bad"]["errors"] == [
        STEPS + "step 1 has unknown key(s) extra; allowed: table, operation, status, reason, sql",
        STEPS + "step 1 has status \"success\"; allowed: planned, skipped, failed",
        STEPS + "step 2 has operation \"vacuum\"; allowed: " + ", ".join(protocol.OPERATIONS),
        STEPS + "step 3 has table \"events; drop\"; "
        "expected 'schema.table' or 'catalog.schema.table'",
        STEPS + "step 4 has sql \"CALL system.rewrite_manifests(table => 'analytics.other')\"; "
        "expected one statement starting " + call,
        STEPS + "step 5 has sql \"" + call + "); drop table x\"; expected one statement starting "
        + call,
        STEPS + "step 6 is \"rewrite_manifests\"; expected a mapping with keys table, operation, "
        "status, reason, sql",
    ]


def test_settled_steps_are_outcomes_to_record_not_statements_to_run(rendered: DbtInvocation) -> None:
    outcome = cases(rendered)
    assert outcome["settled_ok"]["errors"] == outcome["not_settled"]["errors"] == []
    assert outcome["settled_bad"]["errors"] == [
        STEPS + "step 2 is planned; with `settled: true` every step must be "
        "skipped or failed (an outcome to record, not a statement to run)",
        "execute_maintenance_steps: `record` cannot be given with `settled: true` (no step runs, no check is "
        "settled)",
        "execute_maintenance_steps: argument `nodes` is {\"analytics.events\": 3}; expected none or a mapping of "
        "table names to dbt node labels",
    ]


def test_settled_with_steps_that_are_no_list_is_refused_by_the_step_checks_alone(rendered: DbtInvocation) -> None:
    assert cases(rendered)["settled_not_a_list"]["errors"] == []


def test_marker_lines_have_one_reader() -> None:
    """A marker is a word of its own followed by a payload; a line quoting its name is not one,
    a time stamp before it and decoration after the JSON are tolerated, and a message of several
    lines gives each of its payloads."""
    from dbt_iceberg_maint.protocol import RESULT_MARKER, marker_payloads

    messages = [
        f'{RESULT_MARKER} {{"a": 1}}',
        f'12:00:01  {RESULT_MARKER} {{"a": 2}} (logged)',
        f"the {RESULT_MARKER}_X line and the word {RESULT_MARKER}",
        f'{RESULT_MARKER} {{"a": 3}}\nnoise\n{RESULT_MARKER} {{"a": 4}}',
        f"{RESULT_MARKER} not json",
    ]
    assert list(marker_payloads(messages, RESULT_MARKER)) == [
        '{"a": 1}', '{"a": 2}', '{"a": 3}', '{"a": 4}', "not json"]
    assert list(marker_payloads(f'{RESULT_MARKER} {{"a": 5}}', RESULT_MARKER)) == ['{"a": 5}']
