"""runner + landed verification: which failed nodes are re-run once the snapshot log has spoken.

Pure planning from verdicts, and the retry loop with recorded dbt results and recorded snapshot
logs (a `SnapshotReader` that replays them): the loop's I/O boundaries, not Spark.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from dbt_iceberg_maint.runner import NodeOutcome, hook_rerun_args, plan_reruns, run_dbt_with_retries
from dbt_iceberg_maint.runner.landed import LandedVerdict, Snapshot, TableLog
from dbt_iceberg_maint.runner.snapshot_reader import CONTEXT_FLAGS, SnapshotRead, keep_flags, verified_table
from dbt_iceberg_maint.runtime.invoke import DbtInvocation, NodeResult
from tests.unit.test_runner import MISSING_FILES, NODES, PKG, SQL_ERROR, STATE_UNKNOWN, model, recorded, uid

APP = "local-1"
NOT_LANDED = LandedVerdict("analytics.event_log", False, "no data-changing snapshot of this application", 11)
LANDED_HOOK = LandedVerdict("analytics.event_log", True, "the write committed snapshot 12", 11, (12,), "post-hook")
LANDED_COMMIT = LandedVerdict("analytics.event_log", True, "the commit whose state was unknown landed", 11, (12,),
                              "commit")
UNDECIDED = LandedVerdict("analytics.event_log", None, "another writer of this application committed 13", 11, (13,))


def decide(name: str, message: str, verdict: LandedVerdict | None, nodes: Mapping[str, Any] = NODES,
           extra: dict[str, tuple[str, str | None]] | None = None) -> Any:
    outcomes = recorded({name: ("error", message.format(name=name)), **(extra or {})})
    return plan_reruns(outcomes, nodes, landed={uid(name): verdict} if verdict else None)


def test_an_append_whose_write_verifiably_did_not_land_is_re_run_with_its_children() -> None:
    plan = decide("event_log", MISSING_FILES, NOT_LANDED, extra={"log_summary": ("skipped", None)})
    assert plan.rerun == (uid("event_log"),) and plan.rerun_skipped == (uid("log_summary"),)
    reason = plan.decisions[uid("event_log")].reason
    assert "not idempotent (append" in reason and "verifiably did not land" in reason


def test_an_append_whose_write_landed_before_its_hook_failed_is_not_re_run() -> None:
    plan = decide("event_log", MISSING_FILES, LANDED_HOOK, extra={"log_summary": ("skipped", None)})
    assert plan.selected == ()
    decision = plan.decisions[uid("event_log")]
    assert decision.reason.startswith(
        "write landed; post-hook failed: missing_files_to_delete; the model is not re-run")
    assert "its post-hook is not re-run" in decision.reason and decision.hook_rerun is None
    assert not decision.resolved


def test_undecidable_is_refused_with_the_reason() -> None:
    plan = decide("event_log", MISSING_FILES, UNDECIDED)
    assert plan.selected == ()
    reason = plan.decisions[uid("event_log")].reason
    assert "not idempotent" in reason and "cannot be decided: another writer of this application" in reason


def test_without_verification_an_append_is_refused_as_before() -> None:
    reason = decide("event_log", MISSING_FILES, None).decisions[uid("event_log")].reason
    assert "not idempotent" in reason and "duplicates rows" in reason and "not verified" in reason


def test_an_idempotent_node_keeps_today_s_rule_whatever_the_log_says() -> None:
    for verdict in (LANDED_HOOK, UNDECIDED, None):
        assert decide("events", MISSING_FILES, verdict).rerun == (uid("events"),)


def test_a_non_retryable_failure_stays_refused_even_when_not_landed() -> None:
    plan = decide("broken", SQL_ERROR, NOT_LANDED)
    assert plan.selected == () and plan.decisions[uid("broken")].reason.startswith("not_iceberg_conflict")


def test_commit_state_unknown_that_landed_counts_as_success_and_frees_its_children() -> None:
    plan = decide("event_log", STATE_UNKNOWN, LANDED_COMMIT, extra={"log_summary": ("skipped", None)})
    decision = plan.decisions[uid("event_log")]
    assert decision.resolved and not decision.rerun
    assert decision.reason.startswith("write landed; commit failed: commit_state_unknown; counts as success")
    assert plan.rerun == () and plan.rerun_skipped == (uid("log_summary"),)


@pytest.mark.parametrize("name", ["event_log", "events"])
def test_commit_state_unknown_that_did_not_land_is_re_run_even_for_an_append(name: str) -> None:
    plan = decide(name, STATE_UNKNOWN, NOT_LANDED)
    assert plan.rerun == (uid(name),)
    assert plan.decisions[uid(name)].reason.startswith("commit_state_unknown: the write verifiably did not land")


def test_commit_state_unknown_undecidable_is_refused() -> None:
    plan = decide("events", STATE_UNKNOWN, UNDECIDED)
    assert plan.selected == ()
    assert "cannot be decided" in plan.decisions[uid("events")].reason


MAINTAINED = model("maintained_log", "incremental", incremental_strategy="append",
                   **{"post-hook": [{"sql": "{{ dbt_iceberg_maint.maintain() }}", "transaction": True, "index": 1}]})


def test_only_this_package_s_maintain_hook_is_repeated_alone() -> None:
    assert hook_rerun_args(MAINTAINED) == (
        "run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args",
        json.dumps({"select": [f"{PKG}.maintained_log"]}))
    mixed = {**MAINTAINED, "config": {**MAINTAINED["config"], "post-hook": [
        {"sql": "{{dbt_iceberg_maint.maintain()}}"}, {"sql": "merge into audit ..."}]}}
    assert hook_rerun_args(mixed) is None
    assert hook_rerun_args(NODES[uid("event_log")]) is None  # no hooks at all
    nodes = {**NODES, MAINTAINED["unique_id"]: MAINTAINED}
    outcome = NodeOutcome(MAINTAINED["unique_id"], "error", MISSING_FILES.format(name="maintained_log"))
    plan = plan_reruns([outcome], nodes, landed={MAINTAINED["unique_id"]: LANDED_HOOK})
    decision = plan.decisions[MAINTAINED["unique_id"]]
    assert decision.hook_rerun is not None and "post-hook (maintain()) is re-run alone" in decision.reason


class ReplayedDbt:
    """Recorded per-attempt results for `run`/`build`; run-operation calls answer `hook_success`."""

    def __init__(self, attempts: list[dict[str, tuple[str, str | None]]], nodes: Mapping[str, Any],
                 hook_success: bool = True) -> None:
        self.attempts, self.nodes, self.hook_success = attempts, nodes, hook_success
        self.calls: list[list[str]] = []
        self.runs = 0

    def __call__(self, args: Sequence[str]) -> DbtInvocation:
        self.calls.append(list(args))
        if args[0] == "run-operation":
            return DbtInvocation(tuple(args), self.hook_success, (), (), None if self.hook_success else "hook failed")
        results = self.attempts[self.runs]
        self.runs += 1
        by_name = {node["name"]: node for node in self.nodes.values()}
        nodes = tuple(NodeResult(by_name[n]["unique_id"], n, status, message, "model", by_name[n])
                      for n, (status, message) in results.items())
        statements = {by_name[n]["unique_id"]: ((1_000, 2_000), (2_100, None))
                      for n, (status, _) in results.items() if status == "error"}
        success = all(status == "success" for status, _ in results.values())
        return DbtInvocation(tuple(args), success, nodes, (), statements=statements)


class ReplayedSnapshots:
    """A `SnapshotReader` over recorded logs: `before` for the first read, then `after`."""

    def __init__(self, nodes: Mapping[str, Any], before: TableLog, after: TableLog) -> None:
        self.nodes, self.before, self.after = nodes, before, after
        self.reads: list[list[str]] = []

    def selected_nodes(self, dbt_args: Sequence[str]) -> dict[str, Mapping[str, Any]]:
        return dict(self.nodes)

    def read(self, tables: Sequence[str]) -> SnapshotRead:
        self.reads.append(list(tables))
        return SnapshotRead(APP, {self.before.table: self.after if len(self.reads) > 1 else self.before})


def iceberg(node: dict[str, Any]) -> dict[str, Any]:
    return {**node, "schema": "analytics", "config": {**node["config"], "file_format": "iceberg"}}


LOG = iceberg(model("event_log", "incremental", incremental_strategy="append"))
HOOKED = iceberg(MAINTAINED)
RECORDED_SNAPSHOT = Snapshot(11, 500, "append", APP, 5)


def test_loop_re_runs_an_append_proven_not_landed_and_reports_the_evidence() -> None:
    nodes = {LOG["unique_id"]: LOG}
    log = TableLog("analytics.event_log", True, (RECORDED_SNAPSHOT,), current_id=11)
    compacted = TableLog(log.table, True, (RECORDED_SNAPSHOT, Snapshot(12, 1_500, "replace", APP, 5, parent_id=11)),
                         current_id=12)
    reader = ReplayedSnapshots(nodes, log, compacted)
    conflict = ("error", MISSING_FILES.format(name="event_log"))
    dbt = ReplayedDbt([{"event_log": conflict}, {"event_log": conflict}, {"event_log": ("success", None)}], nodes)
    report = run_dbt_with_retries(["--vars", "{batch: 2}"], invoke=dbt, snapshots=reader, sleep=lambda s: None)
    assert report.success and report.attempts == 3
    # Before attempt 1, and after each failure. Attempt 2 starts from the log read after attempt 1
    # (current snapshot 12), without reading again.
    table = "analytics.event_log"
    assert reader.reads == [[table], [table], [table]]
    node = report.node("event_log").to_dict()
    assert node["write_landed"] is False
    assert node["landed_evidence"]["recorded_snapshot_id"] == 12
    first = node["history"][0]["landed_evidence"]
    assert first["recorded_snapshot_id"] == 11 and "1 rewrite snapshot(s) ignored (12 (replace" in first["why"]
    assert [h.get("write_landed") for h in node["history"]] == [False, False, None]


def test_loop_reads_every_snapshot_of_a_table_created_during_the_failed_attempt() -> None:
    nodes = {LOG["unique_id"]: LOG}
    created = TableLog("analytics.event_log", True, (Snapshot(12, 1_500, "append", APP, 5),), current_id=12)
    reader = ReplayedSnapshots(nodes, TableLog("analytics.event_log", False), created)
    dbt = ReplayedDbt([{"event_log": ("error", MISSING_FILES.format(name="event_log"))}], nodes)
    report = run_dbt_with_retries([], invoke=dbt, snapshots=reader, sleep=lambda s: None)
    assert reader.reads[1] == ["analytics.event_log"]
    node = report.node("event_log").to_dict()
    assert node["write_landed"] is True and node["landed_evidence"]["snapshot_ids"] == [12]
    assert report.attempts == 1 and "write landed; post-hook failed" in (node["not_rerun_reason"] or "")


@pytest.mark.parametrize("hook_success", [True, False])
def test_loop_re_runs_a_failed_maintain_hook_alone_after_a_landed_append(hook_success: bool) -> None:
    nodes = {HOOKED["unique_id"]: HOOKED}
    log = TableLog("analytics.maintained_log", True, (RECORDED_SNAPSHOT,), current_id=11)
    appended = TableLog(log.table, True, (RECORDED_SNAPSHOT, Snapshot(12, 1_500, "append", APP, 5, parent_id=11)),
                        current_id=12)
    dbt = ReplayedDbt([{"maintained_log": ("error", MISSING_FILES.format(name="maintained_log"))}], nodes,
                      hook_success)
    report = run_dbt_with_retries(["--vars", "{batch: 2}", "--threads", "2"], invoke=dbt,
                                  snapshots=ReplayedSnapshots(nodes, log, appended), sleep=lambda s: None)
    assert report.attempts == 1  # the model is never re-run
    assert dbt.calls[1] == ["run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args",
                            json.dumps({"select": [f"{PKG}.maintained_log"]}), "--vars", "{batch: 2}"]
    node = report.node("maintained_log")
    document = node.to_dict()
    assert document["write_landed"] is True and document["landed_evidence"]["snapshot_ids"] == [12]
    assert document["hook_rerun"]["success"] is hook_success
    assert (node.final_status, report.success) == (("success", True) if hook_success else ("error", False))
    assert "hook re-run alone (dbt run-operation dbt_iceberg_maint.iceberg_maintenance" in (node.not_rerun_reason or "")


def test_loop_without_a_reader_when_dbt_is_injected_verifies_nothing() -> None:
    nodes = {LOG["unique_id"]: LOG}
    dbt = ReplayedDbt([{"event_log": ("error", MISSING_FILES.format(name="event_log"))}], nodes)
    report = run_dbt_with_retries([], invoke=dbt, sleep=lambda s: None)
    document = report.node("event_log").to_dict()
    assert document["write_landed"] is None and document["landed_evidence"]["why"].startswith("not verified")
    assert report.attempts == 1


def test_keep_flags_keeps_the_project_context_for_ls_and_run_operation() -> None:
    args = ["--select", "a", "b", "--vars", "{batch: 2}", "--threads", "4", "--target=prod", "--defer",
            "--state", "state/", "--full-refresh"]
    assert keep_flags(args, CONTEXT_FLAGS) == ["--vars", "{batch: 2}", "--target=prod", "--defer", "--state", "state/"]


@pytest.mark.parametrize(("node", "table"), [
    (LOG, "analytics.event_log"),
    ({**LOG, "alias": "log_v2"}, "analytics.log_v2"),
    ({**LOG, "config": {**LOG["config"], "file_format": "parquet"}}, None),
    ({**LOG, "config": {**LOG["config"], "materialized": "view"}}, None),
    ({**LOG, "resource_type": "seed"}, None),
])
def test_verified_table_only_for_iceberg_tables_and_incremental_models(node: dict[str, Any], table: str | None) -> None:
    assert verified_table(node) == table
