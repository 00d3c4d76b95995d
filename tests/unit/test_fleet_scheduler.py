"""The fleet engine's pure core (dbt_iceberg_maint/fleet/scheduler.py): durations, worst-first
ordering, which step runs next, the budget's cut-off, backlog sums, resume and the report."""

from __future__ import annotations

import json

import pytest

from dbt_iceberg_maint.errors import IcebergMaintError, UsageError
from dbt_iceberg_maint.fleet.scheduler import (
    FleetReport,
    Step,
    StepOutcome,
    TableWork,
    backlog_totals,
    check_concurrency,
    eta_s,
    health_components,
    left_behind,
    may_start,
    next_step,
    order_tables,
    parse_duration,
    settled_keys,
    without_settled,
)


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90), ("30m", 1800), ("2h", 7200), ("1h30m", 5400), ("1.5h", 5400), ("250ms", 0.25), ("45", 45),
    (" 2H ", 7200), ("1d", 86400), (12, 12), (0.5, 0.5), (None, None)])
def test_durations(text: str | float | None, seconds: float | None) -> None:
    assert parse_duration("--budget", text) == seconds


@pytest.mark.parametrize("text", ["abc", "", "0", "0s", "-5m", "5x", "1h30", "m", "1e3", "nan", True])
def test_a_bad_duration_names_the_option_the_value_and_what_is_allowed(text: object) -> None:
    with pytest.raises(UsageError) as raised:
        parse_duration("--step-timeout", text)  # type: ignore[arg-type]
    assert str(raised.value) == (f"--step-timeout is {text!r}; expected a positive duration such as 90s, 30m, 2h or "
                                 "1h30m (units ms, s, m, h, d; no unit: seconds)")
    assert isinstance(raised.value, IcebergMaintError)  # the package's one root


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True, None])
def test_concurrency_is_a_whole_number_of_workers(value: object) -> None:
    with pytest.raises(UsageError, match=r"--concurrency is .*; expected a whole number of workers >= 1"):
        check_concurrency(value)
    assert check_concurrency(3) == 3


def step(table: str, operation: str, status: str = "planned", files: int | None = None) -> Step:
    return Step(table, operation, status, "due", "CALL ..." if status == "planned" else None,
                eligible_files=files, eligible_bytes=None if files is None else files * 1000)


def work(table: str, small_files: int, *steps: Step, **figures: int) -> TableWork:
    return TableWork(table, f"source:lake.{table}", steps, {"small_files": small_files, **figures})


def test_worst_table_first_by_a_score_whose_components_are_reported() -> None:
    calm = work("s.calm", 0, step("s.calm", "expire_snapshots"), snapshots=3)
    messy = work("s.messy", 40, step("s.messy", "rewrite_data_files", files=40), snapshots=2)
    deletes = work("s.deletes", 0, step("s.deletes", "rewrite_position_delete_files"), delete_files=12)
    tie = work("s.a_tie", 0, step("s.a_tie", "expire_snapshots"), snapshots=3)
    assert [t.table for t in order_tables([calm, deletes, tie, messy])] == ["s.messy", "s.deletes", "s.a_tie",
                                                                            "s.calm"]
    assert messy.components == {"small_files": 40.0, "small_bytes": 0.0, "delete_files": 0.0, "data_manifests": 0.0,
                                "snapshots": 0.1, "oldest_snapshot_age_hours": 0.0}
    assert messy.score == 40.1
    # An unread figure (None: the planner did not need that tier) counts nothing.
    assert health_components({"small_files": None, "data_manifests": 6, "oldest_snapshot_age_hours": 48})[
        "data_manifests"] == 5.0


def test_a_free_worker_takes_the_worst_table_that_is_not_busy_one_step_at_a_time() -> None:
    queues = {"a": [step("a", "rewrite_data_files"), step("a", "expire_snapshots")],
              "b": [step("b", "rewrite_manifests")]}
    assert next_step(queues, ["a", "b"], busy=set()) == queues["a"][0]
    assert next_step(queues, ["a", "b"], busy={"a"}) == queues["b"][0]  # never two steps of one table at once
    assert next_step(queues, ["a", "b"], busy={"a", "b"}) is None
    assert next_step({"a": [], "b": []}, ["a", "b"], busy=set()) is None


def test_no_step_starts_once_the_window_is_closed() -> None:
    assert may_start(0.0, None) and may_start(59.9, 60.0)
    assert not may_start(60.0, 60.0) and not may_start(61.0, 60.0)


def test_eta_from_the_steps_done() -> None:
    assert eta_s([], 5, 1, 2) is None
    assert eta_s([2.0, 4.0], left=3, running=1, concurrency=2) == 6.0


def test_backlog_sums_and_left_behind_files() -> None:
    outcomes = [StepOutcome("s.a", "rewrite_data_files", "backlog", eligible_files=40, eligible_bytes=4000),
                StepOutcome("s.a", "expire_snapshots", "backlog"),
                StepOutcome("s.b", "rewrite_data_files", "backlog", eligible_files=2, eligible_bytes=200),
                StepOutcome("s.c", "rewrite_data_files", "success", eligible_files=9, eligible_bytes=900)]
    assert backlog_totals(outcomes) == {"steps": 3, "tables": 2, "eligible_files": 42, "eligible_bytes": 4200}
    assert left_behind(40, {"rewritten_data_files_count": 25}) == 15  # a max-files-to-rewrite cap
    assert left_behind(40, {"rewritten_data_files_count": 41}) == 0
    assert left_behind(None, {"rewritten_data_files_count": 3}) is None


def test_resume_skips_what_the_previous_report_settled() -> None:
    previous = {"results": [
        {"table": "s.a", "operation": "rewrite_data_files", "status": "success"},
        {"table": "s.a", "operation": "expire_snapshots", "status": "failed"},  # taken up again
        {"table": "s.b", "operation": "rewrite_data_files", "status": "success"},
        {"table": "s.b", "operation": "expire_snapshots", "status": "backlog"},  # taken up again
        # Skipped: another job's lease, or not due: planned again (from metadata, at no cost).
        {"table": "s.c", "operation": "rewrite_data_files", "status": "skipped",
         "reason": "lease held by nightly-2 since 2026-11-25T01:00:00Z (iceberg_maintenance, expires ...)"},
    ]}
    settled = settled_keys(previous)
    assert settled == {("s.a", "rewrite_data_files"), ("s.b", "rewrite_data_files")}
    tables = [work("s.a", 1, step("s.a", "rewrite_data_files"), step("s.a", "expire_snapshots")),
              work("s.b", 1, step("s.b", "rewrite_data_files")),
              work("s.c", 1, step("s.c", "rewrite_data_files"))]
    kept = without_settled(tables, settled)
    assert [(t.table, [s.operation for s in t.steps]) for t in kept] == [
        ("s.a", ["expire_snapshots"]), ("s.c", ["rewrite_data_files"])]
    for bad in ({}, {"results": "x"}, {"results": [{"table": "s.a"}]}):
        with pytest.raises(UsageError, match="--resume"):
            settled_keys(bad)


def test_the_report_keeps_maintains_keys_and_adds_backlog_and_totals() -> None:
    outcomes = (StepOutcome("s.a", "rewrite_data_files", "success", metrics={"rewritten_data_files_count": 3},
                            duration_s=1.5, worker=1, eligible_files=3, eligible_bytes=30, left_files=0,
                            statements=7, calls=((1, 2),)),
                StepOutcome("s.a", "expire_snapshots", "failed", kind="timeout", worker=2),
                StepOutcome("s.b", "rewrite_data_files", "backlog", eligible_files=5, eligible_bytes=50))
    report = FleetReport("run-1", outcomes, (), 2, "subprocess", 60.0, 30.0, 0.25, 12.0, 2, 7)
    document = json.loads(report.to_json())
    assert {"invocations", "counts", "results", "backlog", "totals", "tables", "run_id"} <= set(document)
    assert document["counts"] == {"success": 1, "skipped": 0, "failed": 1, "dry_run": 0, "backlog": 1}
    assert document["results"][0]["duration_ms"] == 1500 and document["results"][0]["calls"] == [
        {"started_ms": 1, "ended_ms": 2}]
    assert document["backlog"] == [{"table": "s.b", "operation": "rewrite_data_files", "reason": None,
                                    "eligible_files": 5, "eligible_bytes": 50}]
    assert document["totals"]["calls"] == 1 and document["totals"]["statements"] == 7
    assert report.exit_code == 1
    assert FleetReport("run-2", outcomes[2:], (), 1, "none").exit_code == 0  # backlog alone is no failure


def test_a_steps_arguments_carry_what_the_run_checked_once() -> None:
    """execute_maintenance_steps' `checked`: the names sorted, an empty kind left out, nothing when
    nothing was checked (the macros then check for themselves)."""
    from dbt_iceberg_maint.fleet.steps import step_args

    step = Step("a.t", "expire_snapshots", "planned", "due", "CALL system.expire_snapshots(table => 'a.t')")
    checked = {"lease_logs": {"b.iceberg_maint_leases", "a.iceberg_maint_leases"}, "catalogs": set()}
    args = json.loads(step_args(step, None, ["--target", "dev"], checked=checked)[3])
    assert args["checked"] == {"lease_logs": ["a.iceberg_maint_leases", "b.iceberg_maint_leases"]}
    assert "checked" not in json.loads(step_args(step, None, [], checked={"lease_logs": set(), "catalogs": set()})[3])
    assert "checked" not in json.loads(step_args(step, None, [])[3])


def test_a_steps_arguments_hand_over_the_tables_kept_lease_and_ask_to_keep_it() -> None:
    """execute_maintenance_steps' `leases` (what the table's previous step kept) and `keep_leases`
    (the table has steps left), each only when there is something to say."""
    from dbt_iceberg_maint.fleet.steps import step_args

    step = Step("a.t", "expire_snapshots", "planned", "due", "CALL system.expire_snapshots(table => 'a.t')")
    lease = {"table": "a.t", "claim_id": "c1", "holder": "run-1"}
    args = json.loads(step_args(step, None, [], lease=lease, keep_lease=True)[3])
    assert (args["leases"], args["keep_leases"]) == ([lease], True)
    plain = json.loads(step_args(step, None, [])[3])
    assert "leases" not in plain and "keep_leases" not in plain
    assert json.loads(step_args(step, None, [], defer_history=True)[3])["defer_history"] is True
    assert "defer_history" not in plain


def test_a_batch_claims_arguments_name_the_tables_the_leases_to_release_and_the_logs_checked() -> None:
    from dbt_iceberg_maint.maintenance.leases import claim_args

    lease = {"table": "a.t", "claim_id": "c1", "holder": "run-1"}
    args = claim_args(["a.u", "a.v"], [lease], {"lease_logs": {"a.iceberg_maint_leases"}, "catalogs": {""}})
    assert args[:3] == ["run-operation", "dbt_iceberg_maint.claim_leases", "--args"]
    assert json.loads(args[3]) == {"tables": ["a.u", "a.v"], "release": [lease],
                                   "checked": {"lease_logs": ["a.iceberg_maint_leases"]}}
    assert json.loads(claim_args([])[3]) == {"tables": []}


def test_a_batch_claim_carries_the_deferred_history_rows_and_whether_the_table_was_checked() -> None:
    """claim_leases' `history_rows` (what the steps' ICEBERG_MAINT_HISTORY_ROWS lines logged) and
    `history_checked`, which says nothing without rows to write."""
    from dbt_iceberg_maint.maintenance.leases import claim_args
    from dbt_iceberg_maint.maintenance.results import deferred_history_rows

    logged = ('ICEBERG_MAINT_HISTORY_ROWS {"rows": [{"table_name": "a.t", "operation": "expire_snapshots", '
              '"status": "success", "started_at": "2026-12-05 09:00:00.120000+00:00"}]}',
              "ICEBERG_MAINT_HISTORY_ROWS not json", 'ICEBERG_MAINT_HISTORY_ROWS {"rows": [7, {"table_name": "a.u"}]}',
              'ICEBERG_MAINT_HISTORY {"table": "a.iceberg_maint_history", "written": true}')
    rows = deferred_history_rows(logged)
    assert rows == [{"table_name": "a.t", "operation": "expire_snapshots", "status": "success",
                     "started_at": "2026-12-05 09:00:00.120000+00:00"}, {"table_name": "a.u"}]
    args = json.loads(claim_args(["a.v"], history_rows=rows, history_checked=True)[3])
    assert (args["history_rows"], args["history_checked"]) == (rows, True)
    assert json.loads(claim_args(["a.v"], history_checked=True)[3]) == {"tables": ["a.v"]}
