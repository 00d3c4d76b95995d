"""dbt-iceberg-maint maintain: replaying the logged plan after a run-time failure (pure logic, dbt
replaced by recorded invocations)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from dbt_iceberg_maint.errors import IcebergMaintError, UsageError
from dbt_iceberg_maint.maintenance.results import MaintenanceResult
from dbt_iceberg_maint.maintenance.run import MaintenancePlan, PlanStep, SelectedTable, replay, run_maintenance, settle
from dbt_iceberg_maint.runtime.invoke import DbtInvocation, LoggedEvent

OPS = ("rewrite_data_files", "expire_snapshots", "remove_orphan_files", "rewrite_manifests")
TABLES = [
    {"model": "iceberg_maint_integration_tests.event_log", "table": "analytics.event_log"},
    {"model": "iceberg_maint_integration_tests.events", "table": "analytics.events"},
]


def step(table: str, operation: str, status: str = "planned") -> dict[str, Any]:
    sql = f"CALL system.{operation}(table => '{table}')" if status == "planned" else None
    return {"table": table, "operation": operation, "status": status, "reason": "due", "sql": sql}


SKIPPED = ("analytics.events", "rewrite_data_files")
STEPS = [step(t["table"], op, "skipped" if (t["table"], op) == SKIPPED else "planned") for t in TABLES for op in OPS]
PLAN = {"tables": TABLES, "operations": list(OPS), "as_of": None, "steps": STEPS}
CODEC_ERROR = (
    "Encountered an error while running operation: Runtime Error\n"
    "  An error occurred while calling o48.sql.\n"
    "  : java.lang.IllegalArgumentException: Unsupported compression codec: nope"
)


def marker(name: str, payload: object) -> str:
    return f"ICEBERG_MAINT_{name} " + json.dumps(payload)


def result_line(table: str, operation: str, status: str = "success") -> str:
    return marker(
        "RESULT",
        {
            "table": table,
            "operation": operation,
            "status": status,
            "reason": None,
            "sql": None,
            "metrics": {},
            "duration_ms": 1,
        },
    )


def start_line(table: str, operation: str | None) -> str:
    return marker("START", {"table": table, "operation": operation})


def invocation(*messages: str, success: bool) -> DbtInvocation:
    return DbtInvocation(args=(), success=success, nodes=(), log_messages=messages)


# What execute_maintenance_steps(settled=true) answers: it writes the history rows.
RECORDED = invocation(success=True)


def settled(results: Sequence[MaintenanceResult]) -> dict[str, Any]:
    """execute_maintenance_steps' arguments that record `results` (docs/history.md)."""
    return {"steps": [{"table": r.table, "operation": r.operation, "status": r.status, "reason": r.reason,
                       "sql": r.sql} for r in results], "settled": True}


class Recorder:
    """Plays back invocations in order and keeps the arguments it was called with."""

    def __init__(self, *replies: DbtInvocation) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, args: Sequence[str]) -> DbtInvocation:
        assert args[0] == "run-operation" and args[2] == "--args"
        self.calls.append((args[1], json.loads(args[3])))
        return self.replies.pop(0)


def test_the_plan_line_is_read_back() -> None:
    plan = MaintenancePlan.from_log(["iceberg_maintenance: 2 Iceberg table(s)", marker("PLAN", PLAN)])
    assert plan is not None
    assert plan.tables == (
        SelectedTable("iceberg_maint_integration_tests.event_log", "analytics.event_log"),
        SelectedTable("iceberg_maint_integration_tests.events", "analytics.events"),
    )
    assert plan.operations == OPS
    assert plan.steps[0] == PlanStep(
        "analytics.event_log",
        "rewrite_data_files",
        "planned",
        "due",
        "CALL system.rewrite_data_files(table => 'analytics.event_log')",
    )
    assert [s.to_dict() for s in plan.steps] == STEPS
    assert MaintenancePlan.from_log(["Compilation Error: invalid arguments"]) is None


def test_settle_removes_reported_steps() -> None:
    plan = MaintenancePlan.from_log([marker("PLAN", PLAN)])
    assert plan is not None
    reported = [MaintenanceResult("analytics.event_log", op, "success") for op in OPS] + [
        MaintenanceResult("analytics.events", "rewrite_data_files", "skipped")
    ]
    assert settle(plan.steps, reported) == plan.steps[5:]


def test_replay_executes_the_recorded_steps() -> None:
    plan = MaintenancePlan.from_log([marker("PLAN", PLAN)])
    assert plan is not None
    assert replay(plan.steps[6:]) == [
        "run-operation",
        "dbt_iceberg_maint.execute_maintenance_steps",
        "--args",
        json.dumps({"steps": STEPS[6:]}),
    ]


def test_a_run_time_failure_is_recorded_and_the_logged_plan_is_replayed() -> None:
    dbt = Recorder(
        # compaction of event_log stops the run-operation: no result line for it, no summary
        invocation(
            marker("SELECTION", {"tables": TABLES, "operations": list(OPS)}),
            *(start_line(t["table"], None) for t in TABLES),
            marker("PLAN", PLAN),
            "1 of 7 analytics.event_log rewrite_data_files",
            start_line("analytics.event_log", "rewrite_data_files"),
            CODEC_ERROR,
            "  at org.apache.spark.sql.SparkSession.sql(SparkSession.scala:638)\n" * 100,
            "Flushing usage events",
            success=False,
        ),
        # the rest of the plan, replayed as logged (no new decisions)
        invocation(
            *(
                result_line(s["table"], s["operation"], "skipped" if s["status"] == "skipped" else "success")
                for s in STEPS[1:]
            ),
            success=True,
        ),
        RECORDED,  # the failed step's history row (no macro could write it)
    )

    report = run_maintenance(select=["tag:maintained"], force=True, as_of="2026-11-01 00:00:00", invoke=dbt)

    assert [call[0] for call in dbt.calls] == [
        "dbt_iceberg_maint.iceberg_maintenance",
        "dbt_iceberg_maint.execute_maintenance_steps",
        "dbt_iceberg_maint.execute_maintenance_steps",
    ]
    assert dbt.calls[0][1] == {
        "select": ["tag:maintained"],
        "dry_run": False,
        "force": True,
        "as_of": "2026-11-01 00:00:00",
    }
    assert dbt.calls[1][1] == {"steps": STEPS[1:]}
    assert [(r.table, r.operation, r.status) for r in report.results] == [
        ("analytics.event_log", "rewrite_data_files", "failed"),
        *(("analytics.event_log", op, "success") for op in OPS[1:]),
        ("analytics.events", "rewrite_data_files", "skipped"),
        *(("analytics.events", op, "success") for op in OPS[1:]),
    ]
    failed = report.results[0]
    assert failed.reason is not None
    assert failed.reason.startswith("stopped the run-operation at run time (not_iceberg_conflict): ")
    assert failed.sql == STEPS[0]["sql"]
    assert failed.metrics["error"].startswith(CODEC_ERROR)  # dbt's error message, the informative head
    assert len(failed.metrics["error"]) == 2000
    assert failed.metrics["exception_class"] == "java.lang.IllegalArgumentException"
    assert dbt.calls[2][1] == settled(report.results[:1])
    assert (report.invocations, report.exit_code) == (3, 1)
    assert json.loads(report.to_json())["counts"] == {"success": 6, "skipped": 1, "dry_run": 0, "failed": 1}


def test_a_replayed_step_that_fails_again_is_recorded_and_the_replay_continues() -> None:
    """Each invocation settles at least one step: the number of invocations stays bounded."""
    plan = {**PLAN, "tables": TABLES[:1], "steps": STEPS[:4]}
    dbt = Recorder(
        invocation(marker("PLAN", plan), start_line("analytics.event_log", OPS[0]), CODEC_ERROR, success=False),
        invocation(start_line("analytics.event_log", OPS[1]), CODEC_ERROR, success=False),
        invocation(*(result_line("analytics.event_log", op) for op in OPS[2:]), success=True),
        RECORDED,
    )
    report = run_maintenance(invoke=dbt)
    assert [call[1].get("steps") for call in dbt.calls[1:3]] == [STEPS[1:4], STEPS[2:4]]
    assert [r.status for r in report.results] == ["failed", "failed", "success", "success"]
    assert dbt.calls[3][1] == settled(report.results[:2])
    assert report.invocations == 4


def test_a_failure_of_the_last_step_ends_the_run() -> None:
    plan = {**PLAN, "tables": TABLES[:1], "steps": STEPS[:4]}
    dbt = Recorder(
        invocation(
            marker("PLAN", plan),
            *(
                line
                for op in OPS[:3]
                for line in (start_line("analytics.event_log", op), result_line("analytics.event_log", op))
            ),
            start_line("analytics.event_log", OPS[3]),
            CODEC_ERROR,
            success=False,
        ),
        invocation(marker("LEASES", []), success=False),
        RECORDED,
    )
    report = run_maintenance(invoke=dbt)
    # Nothing is left to replay: only the table's lease, which the stopped invocation left taken,
    # is given back (break_lease with this run as holder). That failing too is said in the reason.
    assert [call[0] for call in dbt.calls][1:] == ["dbt_iceberg_maint.break_lease",
                                                   "dbt_iceberg_maint.execute_maintenance_steps"]
    assert dbt.calls[2][1] == settled(report.results[-1:])
    assert dbt.calls[1][1]["relation"] == "analytics.event_log"
    assert dbt.calls[1][1]["holder"].startswith("dbt-iceberg-maint-")
    assert [r.status for r in report.results] == ["success", "success", "success", "failed"]
    assert report.results[-1].reason.endswith("(its lease could not be given back, so it is held until its TTL)")


def test_a_completed_run_is_not_resumed_even_when_operations_failed() -> None:
    """The macro's own failures (reported, then the invocation fails after its summary)."""
    plan = {**PLAN, "tables": TABLES[:1], "steps": STEPS[:4]}
    statuses = {op: "failed" if op == "expire_snapshots" else "success" for op in OPS}
    lines = [result_line("analytics.event_log", op, statuses[op]) for op in OPS]
    dbt = Recorder(
        invocation(marker("PLAN", plan), *lines, "iceberg_maintenance: 1 operation(s) failed", success=False)
    )
    report = run_maintenance(invoke=dbt)
    assert (len(dbt.calls), report.exit_code, len(report.failed)) == (1, 1, 1)


def test_bad_input_is_a_usage_error_and_nothing_is_resumed() -> None:
    dbt = Recorder(
        invocation("Compilation Error: dbt_iceberg_maint: argument `operations` contains 'vacuum'", success=False)
    )
    with pytest.raises(UsageError, match="argument `operations` contains 'vacuum'"):
        run_maintenance(operations=["vacuum"], invoke=dbt)
    assert len(dbt.calls) == 1


def test_a_missing_result_after_success_is_an_error_not_a_loop() -> None:
    dbt = Recorder(invocation(marker("PLAN", PLAN), success=True))
    with pytest.raises(IcebergMaintError, match="reported no result for analytics.event_log rewrite_data_files"):
        run_maintenance(invoke=dbt)


def test_a_table_whose_planning_fails_costs_one_invocation_not_one_per_operation() -> None:
    """Planning event_log failed at run time (existence, properties or health): no plan was
    logged; all its operations failed, and the other tables are planned again without it."""
    dbt = Recorder(
        invocation(
            marker("SELECTION", {"tables": TABLES, "operations": list(OPS)}),
            start_line("analytics.event_log", None),
            CODEC_ERROR,
            success=False,
        ),
        invocation(
            marker("SELECTION", {"tables": TABLES[1:], "operations": list(OPS)}),
            marker("PLAN", {**PLAN, "tables": TABLES[1:], "steps": STEPS[4:]}),
            *(result_line("analytics.events", op) for op in OPS),
            success=True,
        ),
        RECORDED,
    )
    report = run_maintenance(
        operations=["compaction", "expire_snapshots", "remove_orphan_files", "rewrite_manifests"], invoke=dbt
    )
    assert [call[1].get("select") for call in dbt.calls[:2]] == [None, ["iceberg_maint_integration_tests.events"]]
    assert dbt.calls[2][1] == settled(report.results[:4])
    assert dbt.calls[1][1]["operations"] == list(OPS)
    assert [(r.table, r.operation, r.status) for r in report.results] == [
        *(("analytics.event_log", op, "failed") for op in OPS),
        *(("analytics.events", op, "success") for op in OPS),
    ]
    assert report.results[0].reason is not None
    assert report.results[0].reason.startswith(
        "the table's checks before its first operation failed at run time (not_iceberg_conflict): "
    )


def test_an_unreadable_plan_or_a_package_without_one_is_an_error() -> None:
    with pytest.raises(IcebergMaintError, match="unreadable ICEBERG_MAINT_PLAN line"):
        run_maintenance(invoke=Recorder(invocation("ICEBERG_MAINT_PLAN {not json", success=True)))
    bad_status = {**PLAN, "steps": [{**STEPS[0], "status": "maybe"}]}
    with pytest.raises(IcebergMaintError, match="step status 'maybe' is not one of planned, skipped, failed"):
        run_maintenance(invoke=Recorder(invocation(marker("PLAN", bad_status), success=True)))
    with pytest.raises(IcebergMaintError, match="logged no ICEBERG_MAINT_PLAN line: is the dbt_iceberg_maint"):
        run_maintenance(invoke=Recorder(invocation("iceberg_maintenance summary: ...", success=True)))


def test_markers_and_the_error_come_from_dbts_structured_events() -> None:
    """Only a macro's log() (JinjaLogInfo/JinjaLogDebug events) carries markers: dbt's error
    message quoting a result line is not a result; the error text is the error event's."""
    plan = {**PLAN, "tables": TABLES[:1], "steps": STEPS[:4]}
    quoted = CODEC_ERROR + "\n  in a statement near " + result_line("analytics.event_log", OPS[0])
    events = (
        LoggedEvent("JinjaLogInfo", marker("PLAN", plan)),
        LoggedEvent("JinjaLogDebug", start_line("analytics.event_log", OPS[0])),
        LoggedEvent("SQLQuery", "select 1"),
        LoggedEvent("RunningOperationUncaughtError", quoted),
        LoggedEvent("MainEncounteredError", "Flushing usage events"),
    )
    first = DbtInvocation(args=(), success=False, nodes=(), log_messages=tuple(e.msg for e in events), events=events)
    dbt = Recorder(first, invocation(*(result_line("analytics.event_log", op) for op in OPS[1:]), success=True),
                   RECORDED)

    report = run_maintenance(invoke=dbt)

    assert [r.status for r in report.results] == ["failed", "success", "success", "success"]
    assert report.results[0].metrics["error"] == quoted + "\nFlushing usage events"
    assert report.results[0].metrics["exception_class"] == "java.lang.IllegalArgumentException"


def test_history_that_could_not_be_written_is_reported_and_maintenance_goes_on() -> None:
    """ICEBERG_MAINT_HISTORY lines with written false (macros/internal/history.sql) become the
    report's history_problems, once each; written flushes and other runs' lines add nothing."""
    plan = {**PLAN, "tables": TABLES[:1], "steps": STEPS[:1]}
    problem = {"table": "ops.iceberg_maint_history", "path": "iceberg_maintenance", "rows": 1, "written": False,
               "problem": "history schema ops does not exist (var dbt_iceberg_maint_history_schema)"}
    dbt = Recorder(invocation(
        marker("PLAN", plan), result_line("analytics.event_log", "rewrite_data_files"),
        marker("HISTORY", problem), marker("HISTORY", {**problem, "rows": 3}),
        marker("HISTORY", {**problem, "written": True, "problem": None}), success=True))
    report = run_maintenance(select=["event_log"], invoke=dbt)
    assert [(r.operation, r.status) for r in report.results] == [("rewrite_data_files", "success")]
    assert report.history_problems == (
        "ops.iceberg_maint_history: history schema ops does not exist (var dbt_iceberg_maint_history_schema)",)
    assert json.loads(report.to_json())["history_problems"] == list(report.history_problems)
    assert report.exit_code == 0


def test_a_refused_selection_is_one_line_the_macros_message_without_dbts_framing() -> None:
    """dbt frames a macro's compiler error in lines of its own (the operation, the macro, the call
    chain); the usage error keeps the macro's message, on one line (issue 55)."""
    said = ("Encountered an error while running operation: Runtime Error\n"
            "  Compilation Error in macro iceberg_maintenance (macros/operations/iceberg_maintenance.sql)\n"
            "    iceberg_maintenance: argument `select` contains 'tag:nope', which selects no enabled Iceberg model "
            "(no Iceberg model has that tag); Iceberg models: event_log, events\n"
            "    \n"
            "    > in macro _iceberg_maint_selected_models (macros/operations/iceberg_maintenance.sql)\n"
            "    > called by macro iceberg_maintenance (macros/operations/iceberg_maintenance.sql)")
    events = (LoggedEvent("RunningOperationUncaughtError", said),
              LoggedEvent("MainEncounteredError", "Flushing usage events"))
    refused = DbtInvocation(args=(), success=False, nodes=(), log_messages=tuple(e.msg for e in events),
                            events=events)
    with pytest.raises(UsageError) as error:
        run_maintenance(select=["tag:nope"], invoke=Recorder(refused))
    assert str(error.value) == (
        "iceberg_maintenance stopped before planning: iceberg_maintenance: argument `select` contains 'tag:nope', "
        "which selects no enabled Iceberg model (no Iceberg model has that tag); Iceberg models: event_log, events")
