"""A compaction's failed rewrite versus its lost commit: the text's verdict, the driver log's,
the re-run once (`rewrite_probe`), the runner and the maintain command (no JVM)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from dbt_iceberg_maint.conflicts import classify
from dbt_iceberg_maint.maintenance.rewrite_probe import (
    TOLERATED_FAILED_COMMITS,
    failed_commits,
    judge_probe,
    probe_args,
)
from dbt_iceberg_maint.maintenance.run import run_maintenance
from dbt_iceberg_maint.runner import NodeOutcome, plan_reruns
from dbt_iceberg_maint.runtime.invoke import DbtInvocation

# Iceberg 1.10's words, as PySpark and dbt print them (recorded from the suite's real runs).
PARTIAL_PROGRESS = (
    "py4j.protocol.Py4JJavaError: An error occurred while calling o49.sql.\n"
    ": java.lang.RuntimeException: partial-progress.enabled is true but 1 rewrite commits failed. This is more "
    "than the maximum allowed failures of 0. Check the logs to determine why the individual commits failed. If "
    "this is persistent it may help to increase partial-progress.max-commits which will split the rewrite "
    "operation into smaller commits.\n"
    "\tat org.apache.iceberg.spark.actions.RewriteDataFilesSparkAction.doExecuteWithPartialProgress("
    "RewriteDataFilesSparkAction.java:390)\n"
)
GROUP = "FileGroupInfo{globalIndex=1, partitionIndex=1, partition=PartitionData{event_ts_day=20758}}"
REWRITE_GROUP_FAILED_LOG = (
    f"26/11/23 19:12:30 ERROR RewriteDataFilesSparkAction: Failure during rewrite group {GROUP}\n"
    "org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 12.0 failed 1 times, "
    "most recent failure: Lost task 0.0 in stage 12.0 (TID 8) (localhost executor driver): "
    "java.lang.IllegalArgumentException: Unsupported compression codec: no-such-codec\n"
    "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2898)\n"
    "Caused by: java.lang.IllegalArgumentException: Unsupported compression codec: no-such-codec\n"
    "\t... 3 more\n"
)
LOST_COMMIT_LOG = (
    "26/11/23 19:12:41 ERROR BaseCommitService: Failure during rewrite commit process, partial progress "
    "enabled. Ignoring\n"
    "org.apache.iceberg.exceptions.CommitFailedException: Version 10 already exists: "
    "/tmp/wh/s/t/metadata/v10.metadata.json\n"
    "\tat org.apache.iceberg.hadoop.HadoopTableOperations.renameToFinal(HadoopTableOperations.java:380)\n"
)


def test_the_partial_progress_count_alone_is_undecided() -> None:
    verdict = classify(PARTIAL_PROGRESS)
    assert (verdict.kind, verdict.retryable) == ("rewrite_commit_conflict", True)  # the contract's kind: safe
    assert verdict.undecided is not None and "failed to rewrite" in verdict.undecided


# Without partial progress a lost commit shows its cause.
LOST_WITHOUT_PARTIAL_PROGRESS = (
    "java.lang.RuntimeException: Cannot commit rewrite because of a ValidationException or "
    "CommitFailedException. This usually means that this rewrite has conflicted with another "
    "concurrent Iceberg operation.\n"
    "Caused by: org.apache.iceberg.exceptions.CommitFailedException: Version 4 already exists\n"
)


def test_the_circuit_breakers_count_is_read_from_its_exception_only() -> None:
    assert failed_commits(PARTIAL_PROGRESS) == 1
    assert failed_commits(PARTIAL_PROGRESS.replace("but 1 rewrite", "but 12 rewrite")) == 12
    assert failed_commits(LOST_WITHOUT_PARTIAL_PROGRESS) is None
    assert failed_commits(LOST_COMMIT_LOG) is None  # the driver log's lines carry no count


def test_a_visible_cause_decides_and_is_never_undecided() -> None:
    verdict = classify(LOST_WITHOUT_PARTIAL_PROGRESS)
    assert (verdict.kind, verdict.retryable, verdict.undecided) == ("commit_failed", True, None)


def test_a_driver_log_with_a_failed_rewrite_group_is_deterministic() -> None:
    verdict = classify(REWRITE_GROUP_FAILED_LOG + PARTIAL_PROGRESS)
    assert (verdict.kind, verdict.retryable, verdict.undecided) == ("not_iceberg_conflict", False, None)
    assert verdict.exception_class == "java.lang.IllegalArgumentException"


def test_a_failed_rewrite_group_wins_over_a_lost_commit_in_the_same_log() -> None:
    verdict = classify(LOST_COMMIT_LOG + REWRITE_GROUP_FAILED_LOG + PARTIAL_PROGRESS)
    assert (verdict.kind, verdict.retryable) == ("not_iceberg_conflict", False)


def test_a_driver_log_with_a_lost_group_commit_is_a_commit_failure() -> None:
    verdict = classify(LOST_COMMIT_LOG + PARTIAL_PROGRESS)
    assert (verdict.kind, verdict.retryable, verdict.undecided) == ("commit_failed", True, None)


@pytest.mark.parametrize("line", [
    f"26/11/23 19:12:30 WARN RewriteDataFilesSparkAction: Failure during rewrite group {GROUP}",  # below ERROR
    f"select 'ERROR X: Failure during rewrite group {GROUP}'",  # not a log line
])
def test_only_an_error_log_line_says_a_group_failed(line: str) -> None:
    traceback = 'Traceback (most recent call last):\n  File "job.py", line 3, in <module>\n'
    assert classify(f"{line}\n{traceback}{PARTIAL_PROGRESS}").undecided is not None


def test_the_re_run_tolerates_every_failed_commit_under_the_models_policy() -> None:
    args = probe_args("analytics.event_log", as_of="2026-11-20T00:00:00Z")
    assert args[:2] == ["run-operation", "dbt_iceberg_maint.maintain"]
    assert json.loads(args[3]) == {
        "relation": "analytics.event_log", "operations": ["compaction"], "force": True, "as_of": "2026-11-20T00:00:00Z",
        "policy": {"compaction": {"max_failed_commits": TOLERATED_FAILED_COMMITS}},
    }
    # The fleet engine's tables from the catalog carry their policy with them; only the failed
    # commits tolerated change.
    policy = {"compaction": {"min_input_files": 5, "max_failed_commits": 0}, "expire_snapshots": {"retain_last": 2}}
    assert json.loads(probe_args("raw.feed", policy=policy)[3])["policy"] == {
        "compaction": {"min_input_files": 5, "max_failed_commits": TOLERATED_FAILED_COMMITS},
        "expire_snapshots": {"retain_last": 2}}
    assert policy["compaction"]["max_failed_commits"] == 0


@pytest.mark.parametrize(("status", "metrics", "error", "expected"), [
    ("success", {"rewritten_data_files_count": 0, "failed_data_files_count": 4}, None,
     ("failed", "not_iceberg_conflict", False, "deterministic: ")),
    ("success", {"rewritten_data_files_count": 6, "failed_data_files_count": 0}, None,
     ("success", "rewrite_commit_conflict", True, "the first attempt's failed commits were not deterministic")),
    ("success", {"rewritten_data_files_count": 0, "failed_data_files_count": 0}, None,
     ("failed", "rewrite_commit_conflict", True, "re-run once with failed commits tolerated: nothing failed")),
    (None, {}, "java.lang.IllegalArgumentException: Cannot parse predicates in where option: x",
     ("failed", "invalid_request", False, "re-run once to tell a lost commit from a failed rewrite, it failed")),
])
def test_the_re_run_decides(status: str | None, metrics: dict[str, Any], error: str | None,
                            expected: tuple[str, str, bool, str]) -> None:
    verdict = judge_probe(status, metrics, error)
    assert (verdict.status, verdict.kind, verdict.retryable) == expected[:3]
    assert verdict.reason.startswith(expected[3]), verdict.reason


def test_the_runner_never_re_runs_a_model_on_an_undecided_verdict() -> None:
    uid = "model.proj.events"
    node = {"unique_id": uid, "resource_type": "model", "name": "events", "package_name": "proj",
            "fqn": ["proj", "events"], "original_file_path": "models/events.sql",
            "config": {"materialized": "table"}}
    message = f"Runtime Error in model events (models/events.sql)\n  {PARTIAL_PROGRESS}"
    plan = plan_reruns([NodeOutcome(uid, "error", message)], {uid: node}, root_project="proj")
    decision = plan.decisions[uid]
    assert not decision.rerun and plan.selected == ()
    assert decision.reason.startswith("rewrite_commit_conflict: undecided, not re-run: under partial progress")
    # The same model losing a real conflict is re-run (table: idempotent).
    lost = f"Runtime Error in model events (models/events.sql)\n  {LOST_WITHOUT_PARTIAL_PROGRESS}"
    assert plan_reruns([NodeOutcome(uid, "error", lost)], {uid: node}, root_project="proj").selected == (uid,)


TABLE = "analytics.event_log"
STEP = {"table": TABLE, "operation": "rewrite_data_files", "status": "planned", "reason": "due",
        "sql": "CALL system.rewrite_data_files(table => 'analytics.event_log')"}


def _invocation(*messages: str, success: bool) -> DbtInvocation:
    return DbtInvocation(args=(), success=success, nodes=(), log_messages=messages)


def _result(status: str, metrics: dict[str, int]) -> str:
    return "ICEBERG_MAINT_RESULT " + json.dumps({"table": TABLE, "operation": "rewrite_data_files",
                                                 "status": status, "metrics": metrics})


@pytest.mark.parametrize(("probe_metrics", "status", "kind", "exit_code"), [
    ({"rewritten_data_files_count": 0, "failed_data_files_count": 2}, "failed", "not_iceberg_conflict", 1),
    ({"rewritten_data_files_count": 2, "failed_data_files_count": 0}, "success", "rewrite_commit_conflict", 0),
])
def test_the_maintain_command_re_runs_an_undecided_compaction_once(
    probe_metrics: dict[str, int], status: str, kind: str, exit_code: int
) -> None:
    calls: list[Sequence[str]] = []
    replies = [
        _invocation("ICEBERG_MAINT_PLAN " + json.dumps({"tables": [{"model": "p.event_log", "table": TABLE}],
                                                        "operations": ["rewrite_data_files"], "steps": [STEP]}),
                    "Encountered an error while running operation: Runtime Error\n  " + PARTIAL_PROGRESS,
                    success=False),
        _invocation(_result("success", probe_metrics), success=True),
    ]
    # Still failed after the re-run: its lease is given back (the re-run's own may have ended it),
    # and its history row is recorded (no macro could write it; the re-run wrote its own).
    after = ["dbt_iceberg_maint.break_lease", "dbt_iceberg_maint.execute_maintenance_steps"] if status == "failed" \
        else []
    replies += [_invocation("ICEBERG_MAINT_LEASES []", success=True), _invocation(success=True)][:len(after)]

    def invoke(args: Sequence[str]) -> DbtInvocation:
        calls.append(args)
        return replies.pop(0)

    report = run_maintenance(invoke=invoke)

    assert [c[1] for c in calls] == ["dbt_iceberg_maint.iceberg_maintenance", "dbt_iceberg_maint.maintain", *after]
    [result] = report.results
    assert (result.status, result.metrics["kind"], report.exit_code, report.invocations) == (
        status, kind, exit_code, 2 + len(after))
    if after:
        assert json.loads(calls[-1][3])["steps"] == [{"table": TABLE, "operation": "rewrite_data_files",
                                                      "status": "failed", "reason": result.reason, "sql": STEP["sql"]}]
    assert result.reason is not None and "(rewrite_commit_conflict, undecided)" in result.reason
    assert result.metrics["probe"]["metrics"] == probe_metrics
    assert result.metrics["failed_commits"] == 1  # the circuit breaker's count, from its exception
