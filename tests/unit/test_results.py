"""parse_result_lines reads the macros' ICEBERG_MAINT_RESULT lines into frozen records."""

from __future__ import annotations

import dataclasses
import json

import pytest

from dbt_iceberg_maint.maintenance.results import (
    MaintenanceResult,
    ResultLineError,
    checked_facts,
    failed_results,
    history_written,
    kept_leases,
    parse_result_lines,
)


def line(**fields: object) -> str:
    return "ICEBERG_MAINT_RESULT " + json.dumps(fields)


SUCCESS = line(
    table="local.analytics.events",
    operation="rewrite_data_files",
    status="success",
    reason="",
    sql="CALL system.rewrite_data_files(table => 'analytics.events')",
    metrics={"rewritten_data_files_count": 12, "added_data_files_count": 2},
    duration_ms=1534,
)
SKIPPED = line(
    table="local.analytics.events",
    operation="rewrite_manifests",
    status="skipped",
    reason="only 3 data manifests, below threshold of 5",
    sql=None,
    metrics={},
    duration_ms=0,
)


def test_reads_records_from_dbt_log_messages_and_ignores_other_messages() -> None:
    results = parse_result_lines(["Running with dbt=1.11", SUCCESS, "1 of 2 events", SKIPPED])

    assert [r.status for r in results] == ["success", "skipped"]
    first = results[0]
    assert first.table == "local.analytics.events"
    assert first.operation == "rewrite_data_files"
    assert first.metrics["rewritten_data_files_count"] == 12
    assert first.duration_ms == 1534
    assert first.reason is None
    assert results[1].reason == "only 3 data manifests, below threshold of 5"
    assert results[1].sql is None


def test_reads_records_from_text_output_with_timestamp_prefixes() -> None:
    text = f"07:31:02  {SUCCESS}\n07:31:02  something else\n07:31:03  {SKIPPED}\n"

    assert [r.operation for r in parse_result_lines(text)] == [
        "rewrite_data_files",
        "rewrite_manifests",
    ]


def test_records_are_frozen() -> None:
    (result,) = parse_result_lines([SUCCESS])
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = "failed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        result.metrics["x"] = 1  # type: ignore[index]


def test_failed_results_selects_failures() -> None:
    failed = line(table="t", operation="expire_snapshots", status="failed", reason="GC is disabled")
    results = parse_result_lines([SUCCESS, failed])

    assert failed_results(results) == (results[1],)
    assert results[1].failed and results[1].executed
    assert not results[0].failed


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("ICEBERG_MAINT_RESULT {not json", "not JSON"),
        ("ICEBERG_MAINT_RESULT [1, 2]", "JSON object"),
        (line(table="t", status="success"), "lacks operation"),
        (line(table="t", operation="expire_snapshots", status="done"), "status 'done'"),
    ],
)
def test_malformed_lines_raise_a_clear_error(bad_line: str, message: str) -> None:
    with pytest.raises(ResultLineError, match=message):
        parse_result_lines([bad_line])


def test_a_record_round_trips_its_fields() -> None:
    result = MaintenanceResult.from_json(
        json.dumps({"table": "t", "operation": "remove_orphan_files", "status": "dry_run"})
    )
    assert result == MaintenanceResult(table="t", operation="remove_orphan_files", status="dry_run")


def test_history_written_needs_a_line_that_says_written_true() -> None:
    """The fleet engine skips the history checks only after such a line (docs/history.md)."""
    written = 'ICEBERG_MAINT_HISTORY {"table": "a.iceberg_maint_history", "rows": 2, "written": true, "problem": null}'
    refused = written.replace('"written": true', '"written": false')
    assert history_written(["other", written])
    assert not history_written([refused, "ICEBERG_MAINT_HISTORY {not json", "mentions ICEBERG_MAINT_HISTORY"])
    assert not history_written([])


def test_checked_facts_gather_every_checked_line_and_leave_out_what_they_cannot_read() -> None:
    """What the fleet engine hands to its run's later steps (execute_maintenance_steps' `checked`)."""
    lines = ['ICEBERG_MAINT_CHECKED {"lease_logs": ["a.iceberg_maint_leases"], "catalogs": [""]}',
             'ICEBERG_MAINT_CHECKED {"lease_logs": ["b.iceberg_maint_leases", 3], "catalogs": "local"}',
             "ICEBERG_MAINT_CHECKED {not json", "mentions ICEBERG_MAINT_CHECKED", 'ICEBERG_MAINT_CHECKED ["x"]']
    assert checked_facts(lines) == {"lease_logs": frozenset({"a.iceberg_maint_leases", "b.iceberg_maint_leases"}),
                                    "catalogs": frozenset({""})}
    assert checked_facts([]) == {"lease_logs": frozenset(), "catalogs": frozenset()}


def test_kept_leases_by_table_the_last_line_winning_and_nothing_unreadable() -> None:
    """What the fleet engine hands to a table's next step (execute_maintenance_steps' `leases`)."""
    first = {"table": "a.t", "claim_id": "c1", "renewed_ms": 1}
    again = {"table": "a.t", "claim_id": "c1", "renewed_ms": 2}
    other = {"table": "a.u", "claim_id": "c2"}
    lines = [f"ICEBERG_MAINT_KEPT {json.dumps({'leases': [first, other]})}", "ICEBERG_MAINT_KEPT {not json",
             'ICEBERG_MAINT_KEPT {"leases": "a.t"}', 'ICEBERG_MAINT_KEPT {"leases": [{"table": 3}, "x"]}',
             f"ICEBERG_MAINT_KEPT {json.dumps({'leases': [again]})}", "mentions ICEBERG_MAINT_KEPT"]
    assert kept_leases(lines) == {"a.t": again, "a.u": other}
    assert kept_leases([]) == {}
