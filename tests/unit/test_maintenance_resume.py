"""dbt-iceberg-maint maintain: resuming iceberg_maintenance after a run-time failure (pure logic,
dbt replaced by recorded invocations)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from dbt_iceberg_maint.errors import IcebergMaintError, UsageError
from dbt_iceberg_maint.invoke import DbtInvocation
from dbt_iceberg_maint.maintenance import MaintenancePlan, PendingTable, resume, run_maintenance, settle
from dbt_iceberg_maint.results import MaintenanceResult

OPS = ("rewrite_data_files", "expire_snapshots", "remove_orphan_files", "rewrite_manifests")
PLAN = {"tables": [{"model": "iceberg_maint_integration_tests.event_log", "table": "analytics.event_log"},
                   {"model": "iceberg_maint_integration_tests.events", "table": "analytics.events"}],
        "operations": list(OPS)}
CODEC_ERROR = ("Encountered an error while running operation: Runtime Error\n"
               "  An error occurred while calling o48.sql.\n"
               "  : java.lang.IllegalArgumentException: Unsupported compression codec: nope")


def result_line(table: str, operation: str, status: str = "success") -> str:
    return "ICEBERG_MAINT_RESULT " + json.dumps({"table": table, "operation": operation, "status": status,
                                                 "reason": None, "sql": None, "metrics": {}, "duration_ms": 1})


def start_line(table: str, operation: str) -> str:
    return "ICEBERG_MAINT_START " + json.dumps({"table": table, "operation": operation})


def invocation(*messages: str, success: bool) -> DbtInvocation:
    return DbtInvocation(args=(), success=success, nodes=(), log_messages=messages)


class Recorder:
    """Plays back invocations in order and keeps the arguments it was called with."""

    def __init__(self, *replies: DbtInvocation) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[str, dict]] = []

    def __call__(self, args: Sequence[str]) -> DbtInvocation:
        assert args[0] == "run-operation" and args[2] == "--args"
        self.calls.append((args[1], json.loads(args[3])))
        return self.replies.pop(0)


def test_the_plan_line_is_read_back() -> None:
    plan = MaintenancePlan.from_log(["iceberg_maintenance: 2 Iceberg model(s)", "ICEBERG_MAINT_PLAN " + json.dumps(PLAN)])
    assert plan == MaintenancePlan(
        (PendingTable("iceberg_maint_integration_tests.event_log", "analytics.event_log", OPS), PendingTable("iceberg_maint_integration_tests.events", "analytics.events", OPS)), OPS)
    assert MaintenancePlan.from_log(["Compilation Error: invalid arguments"]) is None


def test_settle_removes_reported_operations_and_finished_tables() -> None:
    plan = MaintenancePlan.from_log(["ICEBERG_MAINT_PLAN " + json.dumps(PLAN)])
    reported = [MaintenanceResult("analytics.event_log", op, "success") for op in OPS] + [
        MaintenanceResult("analytics.events", "rewrite_data_files", "skipped")]
    assert settle(plan.tables, reported) == (PendingTable("iceberg_maint_integration_tests.events", "analytics.events", OPS[1:]),)


def test_resume_finishes_a_half_done_table_with_maintain_then_selects_the_rest() -> None:
    plan = MaintenancePlan.from_log(["ICEBERG_MAINT_PLAN " + json.dumps(PLAN)])
    half = (PendingTable("iceberg_maint_integration_tests.event_log", "analytics.event_log", OPS[2:]), plan.tables[1])
    assert resume(half, plan, dry_run=False, force=True) == ([
        "run-operation", "dbt_iceberg_maint.maintain", "--args",
        json.dumps({"relation": "analytics.event_log", "operations": list(OPS[2:]), "dry_run": False, "force": True})],
        half[:1])
    args, covered = resume(plan.tables, plan, dry_run=True, force=False)
    assert json.loads(args[3]) == {"select": ["iceberg_maint_integration_tests.event_log", "iceberg_maint_integration_tests.events"], "operations": list(OPS), "dry_run": True, "force": False}
    assert covered == plan.tables


def test_a_run_time_failure_is_recorded_and_the_rest_still_runs() -> None:
    dbt = Recorder(
        # compaction of event_log stops the run-operation: no result line for it, no summary
        invocation("ICEBERG_MAINT_PLAN " + json.dumps(PLAN), "1 of 2 event_log (analytics.event_log)",
                   start_line("analytics.event_log", "rewrite_data_files"), CODEC_ERROR,
                   "  at org.apache.spark.sql.SparkSession.sql(SparkSession.scala:638)\n" * 100,
                   "Flushing usage events", success=False),
        # maintain() does the rest of event_log
        invocation(*(result_line("analytics.event_log", op) for op in OPS[1:]), success=True),
        # then iceberg_maintenance over the table not started
        invocation("ICEBERG_MAINT_PLAN " + json.dumps({**PLAN, "tables": PLAN["tables"][1:]}),
                   *(result_line("analytics.events", op) for op in OPS), success=True),
    )

    report = run_maintenance(select=["tag:maintained"], force=True, invoke=dbt)

    assert [call[0] for call in dbt.calls] == ["dbt_iceberg_maint.iceberg_maintenance", "dbt_iceberg_maint.maintain",
                                               "dbt_iceberg_maint.iceberg_maintenance"]
    assert dbt.calls[0][1] == {"select": ["tag:maintained"], "dry_run": False, "force": True}
    assert [(r.table, r.operation, r.status) for r in report.results] == [
        ("analytics.event_log", "rewrite_data_files", "failed"),
        *(("analytics.event_log", op, "success") for op in OPS[1:]),
        *(("analytics.events", op, "success") for op in OPS)]
    failed = report.results[0]
    assert failed.reason.startswith("stopped the run-operation at run time (not_iceberg_conflict): ")
    assert failed.metrics["error"].startswith(CODEC_ERROR)  # dbt's error message, the informative head
    assert len(failed.metrics["error"]) == 2000
    assert failed.metrics["exception_class"] == "java.lang.IllegalArgumentException"
    assert (report.invocations, report.exit_code) == (3, 1)
    assert json.loads(report.to_json())["counts"] == {"success": 7, "skipped": 0, "dry_run": 0, "failed": 1}


def test_a_failure_of_the_last_operation_ends_the_run() -> None:
    plan = {**PLAN, "tables": PLAN["tables"][:1]}
    dbt = Recorder(invocation("ICEBERG_MAINT_PLAN " + json.dumps(plan),
                              *(line for op in OPS[:3] for line in (start_line("analytics.event_log", op),
                                                                    result_line("analytics.event_log", op))),
                              start_line("analytics.event_log", OPS[3]), CODEC_ERROR, success=False))
    report = run_maintenance(invoke=dbt)
    assert len(dbt.calls) == 1
    assert [r.status for r in report.results] == ["success", "success", "success", "failed"]


def test_a_completed_run_is_not_resumed_even_when_operations_failed() -> None:
    """The macro's own failures (reported, then the invocation fails after its summary)."""
    plan = {**PLAN, "tables": PLAN["tables"][:1]}
    dbt = Recorder(invocation("ICEBERG_MAINT_PLAN " + json.dumps(plan),
                              *(result_line("analytics.event_log", op, "failed" if op == "expire_snapshots" else "success")
                                for op in OPS),
                              "iceberg_maintenance: 1 operation(s) failed", success=False))
    report = run_maintenance(invoke=dbt)
    assert (len(dbt.calls), report.exit_code, len(report.failed)) == (1, 1, 1)


def test_bad_input_is_a_usage_error_and_nothing_is_resumed() -> None:
    dbt = Recorder(invocation("Compilation Error: dbt_iceberg_maint: argument `operations` contains 'vacuum'", success=False))
    with pytest.raises(UsageError, match="argument `operations` contains 'vacuum'"):
        run_maintenance(operations=["vacuum"], invoke=dbt)
    assert len(dbt.calls) == 1


def test_a_missing_result_after_success_is_an_error_not_a_loop() -> None:
    dbt = Recorder(invocation("ICEBERG_MAINT_PLAN " + json.dumps(PLAN), success=True))
    with pytest.raises(IcebergMaintError, match="reported no result for analytics.event_log rewrite_data_files"):
        run_maintenance(invoke=dbt)


def test_a_table_whose_checks_fail_costs_one_invocation_not_one_per_operation() -> None:
    """No operation taken up (existence, properties or health failed): the whole table failed."""
    dbt = Recorder(
        invocation("ICEBERG_MAINT_PLAN " + json.dumps(PLAN), "1 of 2 event_log (analytics.event_log)", CODEC_ERROR,
                   success=False),
        invocation("ICEBERG_MAINT_PLAN " + json.dumps({**PLAN, "tables": PLAN["tables"][1:]}),
                   *(result_line("analytics.events", op) for op in OPS), success=True),
    )
    report = run_maintenance(invoke=dbt)
    assert [call[1].get("select") for call in dbt.calls] == [None, ["iceberg_maint_integration_tests.events"]]
    assert [(r.table, r.operation, r.status) for r in report.results] == [
        *(("analytics.event_log", op, "failed") for op in OPS), *(("analytics.events", op, "success") for op in OPS)]
    assert report.results[0].reason.startswith(
        "the table's checks before its first operation failed at run time (not_iceberg_conflict): ")


def test_an_unreadable_plan_or_a_package_without_one_is_an_error() -> None:
    with pytest.raises(IcebergMaintError, match="unreadable ICEBERG_MAINT_PLAN line"):
        run_maintenance(invoke=Recorder(invocation("ICEBERG_MAINT_PLAN {not json", success=True)))
    with pytest.raises(IcebergMaintError, match="logged no ICEBERG_MAINT_PLAN line: is the dbt_iceberg_maint package"):
        run_maintenance(invoke=Recorder(invocation("iceberg_maintenance summary: ...", success=True)))
