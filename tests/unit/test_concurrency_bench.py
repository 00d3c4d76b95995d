"""The concurrency benchmark's pure parts: outcomes, ledgers, overlap, pacing, schedule, hot window,
headline statistics."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from benchmarks.concurrency import (
    SMALL_FILE_BYTES,
    VARIANTS,
    FileRow,
    Interval,
    append_event,
    cold_before,
    coverage,
    day_of_batch,
    headline,
    ledger_mismatches,
    maintenance_kind,
    open_lab,
    overlap_met,
    overlapped,
    plain_dbt_outcome,
    quiet_wait,
    runner_outcome,
    schedule,
    share_figures,
    spark_ui_intervals,
)

MISSING_FILES = ("org.apache.iceberg.exceptions.ValidationException: Missing required files to delete: "
                 "/w/lab/events/data/day=2024-01-03/00000-1.parquet")


def test_plain_dbt_green_on_exit_zero() -> None:
    assert plain_dbt_outcome(0, None, "").green


def test_plain_dbt_failure_is_classified_from_run_results() -> None:
    results = {"results": [{"status": "error", "message": f"Runtime Error\n  {MISSING_FILES}"}]}
    outcome = plain_dbt_outcome(1, results, "")
    assert not outcome.green and outcome.failure_kinds == ("missing_files_to_delete",)
    assert outcome.final_kind == "missing_files_to_delete"


def test_runner_outcome_counts_failed_attempts_of_a_green_run() -> None:
    merge = {"name": "events_x", "attempts": 2, "kinds": ["missing_files_to_delete", None]}
    report = {"success": True, "nodes": [{"name": "appends_x", "attempts": 1, "kinds": [None]}, merge]}
    outcome = runner_outcome(0, report, "", "events_x")
    assert outcome.green and outcome.attempts == 2 and outcome.failure_kinds == ("missing_files_to_delete",)
    assert outcome.final_kind is None


def test_runner_without_report_is_red() -> None:
    outcome = runner_outcome(2, None, "Error: no such option")
    assert not outcome.green and outcome.final_kind == "not_iceberg_conflict"


def test_ledger_flags_committed_batches_missing_or_duplicated() -> None:
    rows = {0: 200, 1: 200, 2: 199, 3: 400}
    assert ledger_mismatches({0, 1, 2, 3, 4}, rows, 200) == [2, 3, 4]
    assert ledger_mismatches({0, 1}, rows, 200) == []


def test_overlap_needs_intersecting_intervals() -> None:
    assert overlapped([Interval(0, 2)], [Interval(1, 3)])
    assert not overlapped([Interval(0, 1)], [Interval(1, 3)])
    assert not overlapped([], [Interval(0, 1)])


def test_spark_ui_intervals_match_text_and_start() -> None:
    executions = [
        {"description": "/* dbt */ MERGE INTO lab.events t", "submissionTime": "2026-11-23T19:00:10.500GMT",
         "duration": 2000},
        {"description": "merge into lab.events", "submissionTime": "2026-11-23T18:00:00.000GMT", "duration": 1},
        {"description": "describe lab.events", "submissionTime": "2026-11-23T19:00:11.000GMT", "duration": 5},
    ]
    since = spark_ui_intervals([executions[0]], "merge into", 0)[0].start - 5
    found = spark_ui_intervals(executions, "merge into", since)
    assert len(found) == 1 and found[0].end - found[0].start == 2.0


def test_schedule_runs_every_variant_once_per_cycle_then_the_controls() -> None:
    cycles = schedule(rounds=2)
    assert [[(v.name, w) for v, w in cycle] for cycle in cycles] == [
        [(v.name, True) for v in VARIANTS],
        [(v.name, True) for v in VARIANTS],
        [("naive_runner", False), ("policy_runner", False)],  # controls last: no pause cools the hot days
    ]
    full = [round_ for cycle in schedule(rounds=10) for round_ in cycle]
    assert sum(not writers for _, writers in full) == 2
    assert all(sum(v is variant and w for v, w in full) == 10 for variant in VARIANTS)


def test_hot_window_moves_a_day_a_round_and_leaves_days_behind() -> None:
    assert day_of_batch(0) == date(2024, 1, 1) and day_of_batch(2) == date(2024, 1, 3)
    # Batch 5 writes days 6-7 and rewrites batch 4's rows (days 5-6); batch 4 rewrote batch 3's
    # (days 4-5): days before day(3) = 2024-01-04 were last written two rounds ago or earlier.
    assert cold_before(5) == date(2024, 1, 4)
    assert cold_before(1) == date(2024, 1, 1)


def test_quiet_wait_lets_the_days_left_two_rounds_ago_go_cold() -> None:
    assert quiet_wait(1000.0, [900.0], 150.0) == 0.0  # no round before last: nothing to wait for
    assert quiet_wait(1000.0, [900.0, 950.0], 150.0, margin_s=5.0) == 55.0
    assert quiet_wait(1000.0, [800.0, 950.0], 150.0, margin_s=5.0) == 0.0


def test_a_round_overlaps_only_when_the_compaction_ran_inside_the_held_merge() -> None:
    assert overlap_met(True, "success", True) and overlap_met(True, "failed", True)
    assert not overlap_met(False, "success", True)  # the MERGE never reached the gate
    assert not overlap_met(True, "skipped", True)  # the policy found nothing cold: no CALL ran
    assert not overlap_met(True, None, True)  # the maintenance wrote no result
    assert not overlap_met(True, "success", False)  # the writer was no longer held


def test_append_events_follow_what_the_writer_saw() -> None:
    assert append_event("success", False) == "committed"
    assert append_event("error", True) == "unknown"  # may have landed: once is fine, twice is not
    assert append_event("success", True) == "committed"  # a re-run that went green
    assert append_event("skipped", False) == "failed" and append_event(None, False) == "failed"


def test_share_figures_carry_wilson_intervals() -> None:
    figures = share_figures(0, 10)
    assert figures["share"] == 0.0 and figures["wilson_95"] == [0.0, 0.2775]
    assert figures["wilson_99"][1] > figures["wilson_95"][1]
    assert share_figures(0, 0)["wilson_95"] is None and share_figures(0, 0)["share"] is None


def test_headline_compares_naive_dbt_and_policy_runner_with_fishers_test() -> None:
    variants = [{"name": "naive_dbt", "overlapped": share_figures(0, 5)},
                {"name": "naive_runner", "overlapped": share_figures(5, 5)},
                {"name": "policy_dbt", "overlapped": share_figures(5, 5)},
                {"name": "policy_runner", "overlapped": share_figures(5, 5)}]
    found = headline(variants)
    assert found["table"] == [[0, 5], [5, 0]] and found["test"] == "Fisher's exact test, two-sided"
    assert abs(found["p_value"] - 2 / 252) < 1e-12 and found["significant"]
    assert found["rounds_needed_at_observed_shares"] == 5
    variants[0]["overlapped"] = share_figures(3, 4)
    variants[3]["overlapped"] = share_figures(4, 4)
    weak = headline(variants)
    assert not weak["significant"] and weak["p_value"] == 1.0


def test_coverage_separates_a_partitions_lone_file_from_compactable_ones() -> None:
    jan = [date(2024, 1, d) for d in (1, 2, 3, 4)]
    before = [FileRow("a1", jan[0], 10), FileRow("a2", jan[0], 10), FileRow("a3", jan[0], 10),  # cold, compactable
              FileRow("b1", jan[1], 10),  # cold, alone in its day: nothing to compact it with
              FileRow("c1", jan[2], int(SMALL_FILE_BYTES) + 1), FileRow("c2", jan[2], 10),  # c2: the lone small one
              FileRow("d1", jan[3], 10), FileRow("d2", jan[3], 10)]  # hot: not counted
    live = {"a3", "b1", "c1", "d1", "d2", "new"}
    covered = coverage(before, live, date(2024, 1, 4), SMALL_FILE_BYTES)
    assert (covered.at_start, covered.compacted) == (5, 3)  # a1, a2, a3, b1, c2; a1, a2, c2 gone
    assert (covered.alone, covered.compactable, covered.compacted_compactable) == (2, 3, 2)


def test_maintenance_kind_is_the_one_maintain_recorded_from_sparks_error() -> None:
    failed = {"status": "failed", "reason": "stopped the run-operation at run time (missing_files_to_delete): ...",
              "metrics": {"kind": "missing_files_to_delete", "error": MISSING_FILES}}
    assert maintenance_kind(failed) == "missing_files_to_delete"
    assert maintenance_kind({"status": "failed", "reason": "x", "metrics": {"error": MISSING_FILES}}) == \
        "missing_files_to_delete"
    assert maintenance_kind({"status": "success", "reason": "a partition has 7 small files"}) is None


def test_an_unknown_lab_catalog_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="catalog_kind is 'nessie'; expected one of hive, jdbc"):
        open_lab(tmp_path / "run", catalog_kind="nessie")
    assert not (tmp_path / "run").exists()
