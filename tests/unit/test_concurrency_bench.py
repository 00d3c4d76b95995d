"""The concurrency benchmark's pure parts: outcomes, ledger, overlap, schedule, hot window."""

from __future__ import annotations

from datetime import date

from benchmarks.concurrency import (
    SMALL_FILE_BYTES,
    VARIANTS,
    FileRow,
    Interval,
    cold_before,
    coverage,
    day_of_batch,
    ledger_mismatches,
    maintenance_kind,
    overlapped,
    plain_dbt_outcome,
    runner_outcome,
    schedule,
    spark_ui_intervals,
    stagger,
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
    report = {"success": True, "nodes": [{"attempts": 2, "kinds": ["missing_files_to_delete", None]}]}
    outcome = runner_outcome(0, report, "")
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


def test_schedule_runs_every_variant_once_per_cycle_with_control_rounds() -> None:
    cycles = schedule(rounds=2, control_every=5)
    assert [[(v.name, w) for v, w in cycle] for cycle in cycles] == [
        [(v.name, True) for v in VARIANTS],
        [(v.name, True) for v in VARIANTS],
        [("naive_runner", False), ("policy_runner", False)],  # the last cycle always has its control
    ]
    full = [round_ for cycle in schedule(rounds=10, control_every=5) for round_ in cycle]
    assert sum(not writers for _, writers in full) == 4
    assert all(sum(v is variant and w for v, w in full) == 10 for variant in VARIANTS)


def test_hot_window_moves_and_leaves_cold_days_behind() -> None:
    assert day_of_batch(0) == date(2024, 1, 1) and day_of_batch(2) == date(2024, 1, 2)
    # Batch 3 writes days 2-3 and rewrites batch 2's rows (days 2-3): day 1 is cold.
    assert cold_before(3) == date(2024, 1, 2)
    assert cold_before(1) == date(2024, 1, 1)


def test_stagger_aims_the_compaction_at_a_third_of_the_merge() -> None:
    assert stagger(None, 0.0, 5.0) == 0.0
    # The MERGE starts 30 s after its process and runs 9 s; the CALL 10 s after its process.
    assert stagger(30.0, 9.0, 10.0) == 23.0
    assert stagger(5.0, 3.0, 40.0) == -34.0
    assert stagger(500.0, 0.0, 0.0) == 90.0


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
