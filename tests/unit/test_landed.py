"""landed: did a failed node's write land? Decided from snapshot logs (pure, no JVM).

The recorded case comes from a real run (tests/unit/recorded/landed_posthook_append.json); the
commit_state_unknown cases are decided on that recorded log and on logs built from it, since the
suite cannot make Iceberg report an unknown commit state on demand.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dbt_iceberg_maint.runner.landed import (
    SNAPSHOTS_MARKER,
    Snapshot,
    SnapshotLogError,
    Statement,
    TableLog,
    parse_snapshot_lines,
    verify_landed,
)

RECORDED = json.loads((Path(__file__).parent / "recorded" / "landed_posthook_append.json").read_text())
TABLE = "it_test_zz_rec.conflict_hooked_append"
APP = "local-1795450748017"
OTHER_APP = "app-20261123-0007"


def line(payload: dict[str, Any]) -> str:
    return f"{SNAPSHOTS_MARKER} {json.dumps(payload)}"


def recorded_logs() -> tuple[TableLog, TableLog, tuple[Statement, ...]]:
    _, before = parse_snapshot_lines([line(RECORDED["before"])])
    app_id, after = parse_snapshot_lines([line(RECORDED["after"])])
    assert app_id == APP
    statements = tuple(Statement(start, end) for start, end in RECORDED["statements"])
    return before[TABLE], after[TABLE], statements


BEFORE, AFTER, STATEMENTS = recorded_logs()
RECORDED_ID = 160341945986296712
APPEND_ID = 8458761741095938103
APPEND = AFTER.find(APPEND_ID)
assert APPEND is not None


def with_snapshots(*extra: Snapshot, base: TableLog = BEFORE) -> TableLog:
    return TableLog(base.table, True, (*base.snapshots, *extra))


def snapshot(snapshot_id: int, at: int, operation: str = "append", app: str | None = APP) -> Snapshot:
    return Snapshot(snapshot_id, at, operation, app, 10)


def test_recorded_append_whose_post_hook_failed_landed() -> None:
    verdict = verify_landed(BEFORE, AFTER, kind=RECORDED["kind"], app_id=APP, statements=STATEMENTS)
    assert verdict.landed is True
    assert verdict.failed_in == "post-hook"
    assert verdict.snapshot_ids == (APPEND_ID,) and verdict.recorded_snapshot_id == RECORDED_ID
    assert f"snapshot {APPEND_ID} (append, +35 rows" in verdict.reason
    assert "later statement (post-hook) failed with missing_files_to_delete" in verdict.reason


def test_commit_state_unknown_that_landed_during_the_failing_statement() -> None:
    # The same log, had the append's own statement raised CommitStateUnknownException.
    statements = (*STATEMENTS[:2], replace(STATEMENTS[2], ended_ms=None))
    verdict = verify_landed(BEFORE, AFTER, kind="commit_state_unknown", app_id=APP, statements=statements)
    assert verdict.landed is True and verdict.failed_in == "commit"
    assert verdict.snapshot_ids == (APPEND_ID,)
    assert "the commit whose state was unknown landed" in verdict.reason


def test_commit_state_unknown_that_did_not_land() -> None:
    statements = (*STATEMENTS[:2], replace(STATEMENTS[2], ended_ms=None))
    verdict = verify_landed(BEFORE, with_snapshots(), kind="commit_state_unknown", app_id=APP, statements=statements)
    assert verdict.landed is False
    assert f"no data-changing snapshot of this application ({APP})" in verdict.reason
    assert f"since snapshot {RECORDED_ID}" in verdict.reason


def test_commit_state_unknown_with_two_commits_of_this_application_is_undecidable() -> None:
    failing = Statement(STATEMENTS[2].started_ms, None)
    second = snapshot(42, APPEND.committed_at_ms + 5)
    verdict = verify_landed(BEFORE, with_snapshots(APPEND, second), kind="commit_state_unknown", app_id=APP,
                            statements=(*STATEMENTS[:2], failing))
    assert verdict.landed is None
    assert verdict.snapshot_ids == (APPEND_ID, 42)
    assert "do not identify one commit" in verdict.reason


def test_commit_state_unknown_whose_snapshot_fell_in_an_earlier_statement_is_undecidable() -> None:
    verdict = verify_landed(BEFORE, AFTER, kind="commit_state_unknown", app_id=APP, statements=STATEMENTS)
    assert verdict.landed is None


def test_other_applications_and_compactions_do_not_count() -> None:
    compaction = snapshot(7, APPEND.committed_at_ms, "replace")
    other = snapshot(8, APPEND.committed_at_ms + 1, "append", OTHER_APP)
    verdict = verify_landed(BEFORE, with_snapshots(compaction, other), kind="missing_files_to_delete", app_id=APP,
                            statements=STATEMENTS)
    assert verdict.landed is False
    assert verdict.snapshot_ids == (8,)
    assert "1 from other applications (8 (append, +10 rows, app app-20261123-0007))" in verdict.reason
    assert "1 rewrite snapshot(s) ignored (7 (replace" in verdict.reason


def test_a_write_of_this_application_while_the_conflicting_statement_ran_is_undecidable() -> None:
    failing = (*STATEMENTS[:2], replace(STATEMENTS[2], ended_ms=None))
    verdict = verify_landed(BEFORE, AFTER, kind="conflicting_added_files", app_id=APP, statements=failing)
    assert verdict.landed is None and verdict.snapshot_ids == (APPEND_ID,)
    assert "while the statement that failed with conflicting_added_files ran" in verdict.reason


def test_a_write_of_this_application_outside_the_node_s_statements_is_undecidable() -> None:
    elsewhere = snapshot(9, STATEMENTS[0].started_ms - 20_000)  # after the recorded one
    verdict = verify_landed(BEFORE, with_snapshots(elsewhere, APPEND), kind="missing_files_to_delete", app_id=APP,
                            statements=STATEMENTS)
    assert verdict.landed is None and verdict.snapshot_ids == (9,)
    assert "another writer of this application" in verdict.reason


def test_the_recorded_snapshot_gone_is_undecidable() -> None:
    after = TableLog(TABLE, True, (APPEND,))
    verdict = verify_landed(BEFORE, after, kind="missing_files_to_delete", app_id=APP, statements=STATEMENTS)
    assert verdict.landed is None
    assert f"snapshot {RECORDED_ID}, current before the attempt, is no longer" in verdict.reason


@pytest.mark.parametrize(("before_exists", "after", "landed", "says"), [
    (False, TableLog(TABLE, False), False, "did not exist before the attempt and still does not"),
    (True, TableLog(TABLE, False), None, "existed before the attempt and is gone now"),
    (False, TableLog(TABLE, True, (APPEND,)), True, "the write committed snapshot"),
])
def test_tables_that_do_not_exist_on_one_side(before_exists: bool, after: TableLog, landed: bool | None,
                                              says: str) -> None:
    before = BEFORE if before_exists else TableLog(TABLE, False)
    verdict = verify_landed(before, after, kind="missing_files_to_delete", app_id=APP, statements=STATEMENTS)
    assert verdict.landed is landed and says in verdict.reason


def test_without_the_application_id_only_an_unchanged_log_proves_anything() -> None:
    unchanged = verify_landed(BEFORE, with_snapshots(), kind="missing_files_to_delete", app_id=None)
    assert unchanged.landed is False
    changed = verify_landed(BEFORE, AFTER, kind="missing_files_to_delete", app_id=None, statements=STATEMENTS)
    assert changed.landed is None and "application's id is unknown" in changed.reason


def test_without_statement_times_a_write_of_this_application_is_undecidable() -> None:
    verdict = verify_landed(BEFORE, AFTER, kind="missing_files_to_delete", app_id=APP)
    assert verdict.landed is None and "no statement times" in verdict.reason


def test_verdict_evidence_as_the_report_shows_it() -> None:
    verdict = verify_landed(BEFORE, AFTER, kind=RECORDED["kind"], app_id=APP, statements=STATEMENTS)
    assert verdict.to_dict() == {"table": TABLE, "recorded_snapshot_id": RECORDED_ID, "snapshot_ids": [APPEND_ID],
                                 "why": verdict.reason}


def test_snapshot_lines_among_other_log_lines() -> None:
    app_id, tables = parse_snapshot_lines(["Running with dbt=1.11", f"12:00:01  {line(RECORDED['after'])}"])
    assert app_id == APP and set(tables) == {TABLE}
    assert tables[TABLE].current == APPEND
    assert APPEND.added_records == 35 and APPEND.changes_data


NO_ID = {"tables": [{"table": "s.t", "exists": True, "snapshots": [{"operation": "x"}]}]}


@pytest.mark.parametrize("bad", [f"{SNAPSHOTS_MARKER} {{not json", line(NO_ID)])
def test_unreadable_snapshot_lines_raise(bad: str) -> None:
    with pytest.raises(SnapshotLogError):
        parse_snapshot_lines([bad])


# Lineage, not clocks: a compaction committed by another application's JVM (C), then this
# writer's append (A, parent C). Iceberg accepts A stamped up to a minute before C.
COMPACTION_ID, WRITE_ID, OLD_ID = 501, 502, 500
OLD = Snapshot(OLD_ID, 1_000_000, "append", APP, 10)
COMPACTION = Snapshot(COMPACTION_ID, 2_000_000, "replace", OTHER_APP, 10, parent_id=OLD_ID)
BEFORE_WRITE = TableLog(TABLE, True, (OLD, COMPACTION), current_id=COMPACTION_ID)


def appended(skew_ms: int) -> tuple[TableLog, tuple[Statement, ...]]:
    """After the attempt: A committed by a writer whose clock is `skew_ms` off the compactor's;
    the node's statements as that writer's process timed them (the insert, then the failing hook)."""
    at = COMPACTION.committed_at_ms + 5_000 + skew_ms
    write = Snapshot(WRITE_ID, at, "append", APP, 35, parent_id=COMPACTION_ID)
    statements = (Statement(at - 900, at + 50), Statement(at + 100, None))
    return TableLog(TABLE, True, (OLD, COMPACTION, write), current_id=WRITE_ID), statements


@pytest.mark.parametrize("skew_ms", [-30_000, -59_000, 0, 30_000])
def test_an_append_stamped_before_the_snapshot_it_follows_still_landed(skew_ms: int) -> None:
    after, statements = appended(skew_ms)
    verdict = verify_landed(BEFORE_WRITE, after, kind="missing_files_to_delete", app_id=APP, statements=statements)
    assert verdict.landed is True and verdict.failed_in == "post-hook"
    assert verdict.snapshot_ids == (WRITE_ID,) and verdict.recorded_snapshot_id == COMPACTION_ID


def test_snapshots_present_before_the_attempt_never_count_whatever_their_time() -> None:
    # This application's old append is stamped after the compaction (a clock ahead): still old.
    old_ahead = replace(OLD, committed_at_ms=COMPACTION.committed_at_ms + 60_000)
    before = TableLog(TABLE, True, (old_ahead, COMPACTION), current_id=COMPACTION_ID)
    other = Snapshot(503, COMPACTION.committed_at_ms - 20_000, "append", OTHER_APP, 3, parent_id=COMPACTION_ID)
    after = TableLog(TABLE, True, (old_ahead, COMPACTION, other), current_id=503)
    verdict = verify_landed(before, after, kind="missing_files_to_delete", app_id=APP, statements=STATEMENTS)
    assert verdict.landed is False and verdict.snapshot_ids == (503,)


def test_a_rolled_back_descendant_present_before_is_not_new() -> None:
    # 504 was committed on top of the compaction and rolled back before the attempt began.
    rolled_back = Snapshot(504, COMPACTION.committed_at_ms + 1_000, "append", APP, 4, parent_id=COMPACTION_ID)
    before = TableLog(TABLE, True, (OLD, COMPACTION, rolled_back), current_id=COMPACTION_ID)
    verdict = verify_landed(before, before, kind="missing_files_to_delete", app_id=APP, statements=STATEMENTS)
    assert verdict.landed is False and verdict.snapshot_ids == ()


def test_a_replacement_snapshot_without_parent_counts_as_new() -> None:
    # create or replace: the new snapshot starts a new lineage (no parent) and is stamped earlier.
    replaced = Snapshot(505, COMPACTION.committed_at_ms - 10_000, "overwrite", APP, 35)
    after = TableLog(TABLE, True, (OLD, COMPACTION, replaced), current_id=505)
    statements = (Statement(replaced.committed_at_ms - 500, replaced.committed_at_ms + 10),
                  Statement(replaced.committed_at_ms + 20, None))
    verdict = verify_landed(BEFORE_WRITE, after, kind="missing_files_to_delete", app_id=APP, statements=statements)
    assert verdict.landed is True and verdict.snapshot_ids == (505,)


def test_since_follows_the_parent_chain_and_new_ids_only() -> None:
    after, _ = appended(-30_000)
    assert [s.snapshot_id for s in after.since(BEFORE_WRITE)] == [WRITE_ID]
    assert after.current is not None and after.current.snapshot_id == WRITE_ID  # the main ref, not the newest stamp
