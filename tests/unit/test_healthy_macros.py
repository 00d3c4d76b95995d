"""iceberg_healthy's pure macros: argument checks, figures -> violated thresholds, rows -> SQL.

dbt renders the macros (run-operation on the integration project); no query runs, so no JVM
starts. All cases go through one dbt invocation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_properties_macros import render_cases

T = "analytics.events"
ALL = ("max_small_files, max_small_files_in_partition, max_snapshots, max_delete_files, max_manifests, "
       "max_data_manifests, max_days_since_compaction, max_hours_since_compaction, max_days_since_expiry, "
       "max_hours_since_expiry, max_backlog_operations")

ERROR_CASES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "valid": ({"given": {"max_snapshots": 0, "max_days_since_expiry": 0.5}}, []),
    "nothing": (
        {"given": {"max_snapshots": None}},
        [f"iceberg_healthy: no threshold given; set at least one of {ALL}"],
    ),
    "negative": (
        {"given": {"max_snapshots": -1}},
        ["iceberg_healthy: argument `max_snapshots` is -1; it must be >= 0"],
    ),
    "fraction_count": (
        {"given": {"max_manifests": 2.5}},
        ["iceberg_healthy: argument `max_manifests` is 2.5; expected a whole number >= 0"],
    ),
    "string_count": (
        {"given": {"max_small_files": "50"}},
        ['iceberg_healthy: argument `max_small_files` is "50"; expected a whole number >= 0'],
    ),
    "boolean_count": (
        {"given": {"max_delete_files": True}},
        ["iceberg_healthy: argument `max_delete_files` is True; expected a whole number >= 0"],
    ),
    "zero_days": (
        {"given": {"max_days_since_compaction": 0}},
        ["iceberg_healthy: argument `max_days_since_compaction` is 0; it must be greater than 0"],
    ),
    "string_hours": (
        {"given": {"max_hours_since_expiry": "a day"}},
        ['iceberg_healthy: argument `max_hours_since_expiry` is "a day"; expected a number of hours greater than 0'],
    ),
    "centuries": (
        {"given": {"max_days_since_expiry": 40000}},
        ["iceberg_healthy: argument `max_days_since_expiry` is 40000; it must be at most 100 years"],
    ),
    "both_units": (
        {"given": {"max_days_since_compaction": 1, "max_hours_since_compaction": 24}},
        ["iceberg_healthy: give `max_days_since_compaction` or `max_hours_since_compaction`, not both"],
    ),
    "backlog_fraction": (
        {"given": {"max_backlog_operations": 0.5}},
        ["iceberg_healthy: argument `max_backlog_operations` is 0.5; expected a whole number >= 0"],
    ),
    "unknown_only": (
        {"given": {}, "unknown": {"max_snapshot": 3}},
        [
            f'iceberg_healthy: unknown argument `max_snapshot` (value "3"); allowed: {ALL}',
            f"iceberg_healthy: no threshold given; set at least one of {ALL}",
        ],
    ),
}

FIGURES = {
    "exists": True, "iceberg": True, "snapshots": 12, "oldest_snapshot_age_hours": 200.0, "data_files": 40,
    "delete_files": 3, "small_files": 30, "max_small_files_in_partition": 9, "manifests": 8, "data_manifests": 6,
    "small_file_threshold_bytes": 402653184, "hours_since_rewrite_data_files": 50.0, "checked_hours_ago": {},
}


def violations(thresholds: dict[str, Any], **figures: Any) -> dict[str, Any]:
    return {"table": T, "thresholds": thresholds, "figures": {**FIGURES, **figures}}


VIOLATION_CASES: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    "within_every_threshold": (
        violations({"max_small_files": 30, "max_snapshots": 12, "max_delete_files": 3, "max_manifests": 8,
                    "max_data_manifests": 6, "max_small_files_in_partition": 9, "max_days_since_compaction": 3}),
        [],
    ),
    "counts_in_argument_order": (
        violations({"max_data_manifests": 5, "max_snapshots": 10, "max_small_files": 29}),
        [
            {"table": T, "check": "max_small_files", "value": 30, "threshold": 29,
             "message": f"{T} has 30 small data files (under 402653184 bytes), more than 29 "
                        "(rewrite_data_files (compaction) merges them)"},
            {"table": T, "check": "max_snapshots", "value": 12, "threshold": 10,
             "message": f"{T} has 12 snapshots, more than 10 (expire_snapshots removes old ones)"},
            {"table": T, "check": "max_data_manifests", "value": 6, "threshold": 5,
             "message": f"{T} has 6 data manifests, more than 5 (rewrite_manifests merges them)"},
        ],
    ),
    # The summary bounded it (no more data files than the threshold): not read, not violated.
    "small_files_not_read": (violations({"max_small_files": 40}, small_files=None), []),
    "compaction_snapshot_is_the_evidence": (
        violations({"max_days_since_compaction": 2}, checked_hours_ago={"rewrite_data_files": 60.0}),
        [{"table": T, "check": "max_days_since_compaction", "value": 2.08, "threshold": 2,
          "message": f"{T}: its last compaction (a rewrite_data_files snapshot) was 2.08 days ago, more than 2 days"}],
    ),
    "a_recorded_check_counts_as_compaction": (
        violations({"max_hours_since_compaction": 10}, checked_hours_ago={"rewrite_data_files": 12.0}),
        [{"table": T, "check": "max_hours_since_compaction", "value": 12.0, "threshold": 10,
          "message": f"{T}: maintenance last ran or checked rewrite_data_files 12.0 hours ago (property "
                     "dbt-iceberg-maint.checked-at.rewrite_data_files), more than 10 hours"}],
    ),
    "a_recent_check_passes": (
        violations({"max_hours_since_compaction": 10}, checked_hours_ago={"rewrite_data_files": 1.0}),
        [],
    ),
    "never_compacted_in_history": (
        violations({"max_days_since_compaction": 7}, hours_since_rewrite_data_files=None),
        [{"table": T, "check": "max_days_since_compaction", "value": 8.33, "threshold": 7,
          "message": f"{T}: no rewrite_data_files recorded (no compaction snapshot in its history, no "
                     "dbt-iceberg-maint.checked-at.rewrite_data_files property) while its oldest snapshot is "
                     "8.33 days old, more than 7 days"}],
    ),
    "young_table_never_compacted_passes": (
        violations({"max_days_since_compaction": 9}, hours_since_rewrite_data_files=None),
        [],
    ),
    "expiry_without_record": (
        violations({"max_days_since_expiry": 3}),
        [{"table": T, "check": "max_days_since_expiry", "value": 8.33, "threshold": 3,
          "message": f"{T}: no expire_snapshots recorded (no dbt-iceberg-maint.checked-at.expire_snapshots "
                     "property) while its oldest snapshot is 8.33 days old, more than 3 days"}],
    ),
    "expiry_recorded": (violations({"max_days_since_expiry": 3}, checked_hours_ago={"expire_snapshots": 5.0}), []),
    "no_snapshots_no_age": (
        violations({"max_days_since_expiry": 1, "max_days_since_compaction": 1}, oldest_snapshot_age_hours=None,
                   hours_since_rewrite_data_files=None),
        [],
    ),
    "backlog_over_the_threshold": (
        violations({"max_backlog_operations": 0}, backlog_operations=2, backlog_run_id="nightly-7",
                   backlog_list="expire_snapshots, rewrite_data_files"),
        [{"table": T, "check": "max_backlog_operations", "value": 2, "threshold": 0,
          "message": f"{T}: the last maintenance run (nightly-7) left 2 operation(s) as backlog (expire_snapshots, "
                     "rewrite_data_files), more than 0 (its budget closed before they started; a longer --budget "
                     "or more --concurrency reaches them)"}],
    ),
    "backlog_within_the_threshold": (
        violations({"max_backlog_operations": 1}, backlog_operations=1, backlog_run_id="nightly-7",
                   backlog_list="rewrite_data_files"),
        [],
    ),
    "no_run_no_backlog": (violations({"max_backlog_operations": 0}, backlog_operations=0, backlog_run_id=None), []),
    # No history to read fails the check: it could otherwise never fire.
    "backlog_without_history": (
        violations({"max_backlog_operations": 3}, backlog_history_missing="analytics.iceberg_maint_history"),
        [{"table": T, "check": "max_backlog_operations", "value": None, "threshold": 3,
          "message": f"{T}: no maintenance history (table analytics.iceberg_maint_history does not exist), so the "
                     "backlog of its last maintenance run cannot be read"}],
    ),
    "missing_table": (
        {"table": T, "thresholds": {"max_snapshots": 1}, "figures": {"exists": False}},
        [{"table": T, "check": "table_exists", "value": None, "threshold": None,
          "message": f"{T} does not exist (or is not a table): there is no health to check"}],
    ),
    "not_iceberg": (
        {"table": T, "thresholds": {"max_snapshots": 1}, "figures": {"exists": True, "iceberg": False,
                                                                     "format": "parquet"}},
        [{"table": T, "check": "iceberg_table", "value": None, "threshold": None,
          "message": f"{T} is not an Iceberg table (format parquet): iceberg_healthy reads Iceberg metadata tables"}],
    ),
}


@pytest.fixture(scope="module")
def rendered(render_target: Path) -> dict[str, Any]:
    cases = [(f"errors:{k}", "_iceberg_maint_healthy_errors", kwargs) for k, (kwargs, _) in ERROR_CASES.items()]
    cases += [(f"rows:{k}", "_iceberg_maint_health_violations", kwargs) for k, (kwargs, _) in VIOLATION_CASES.items()]
    cases.append(("sql:none", "_iceberg_maint_health_rows_sql", {"rows": []}))
    cases.append(("sql:rows", "_iceberg_maint_health_rows_sql", {"rows": [
        {"table": T, "check": "max_snapshots", "value": 12, "threshold": 10, "message": "it's old"},
        {"table": T, "check": "table_exists", "value": None, "threshold": None, "message": "gone"}]}))
    return render_cases(render_target, cases)


@pytest.mark.parametrize("case", ERROR_CASES)
def test_arguments_are_checked_with_messages_naming_them(rendered: dict[str, Any], case: str) -> None:
    assert rendered[f"errors:{case}"] == ERROR_CASES[case][1]


@pytest.mark.parametrize("case", VIOLATION_CASES)
def test_one_row_per_violated_threshold(rendered: dict[str, Any], case: str) -> None:
    assert rendered[f"rows:{case}"] == VIOLATION_CASES[case][1]


def test_rows_become_a_select_of_literals(rendered: dict[str, Any]) -> None:
    columns = "`table`, {} as `check`, {} as `value`, {} as `threshold`, {} as `message`"
    assert rendered["sql:none"] == (
        "select cast(null as string) as " + columns.format(
            "cast(null as string)", "cast(null as double)", "cast(null as double)", "cast(null as string)")
        + " where false"
    )
    null = "cast(null as double)"
    assert rendered["sql:rows"] == (
        f"select '{T}' as "
        + columns.format("'max_snapshots'", "cast(12 as double)", "cast(10 as double)", "'it\\'s old'")
        + "\nunion all\n"
        + f"select '{T}' as " + columns.format("'table_exists'", null, null, "'gone'")
    )
