"""`dbt-iceberg-maint classify`: run_results.json, log files and raw text; text and JSON output."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from dbt_iceberg_maint.cli import main

CONFLICT = (
    "Runtime Error in model events (models/events.sql)\n  An error occurred while calling o61.sql.\n"
    "  : org.apache.iceberg.exceptions.ValidationException: Missing required files to delete: "
    "file:/wh/events/data/a.parquet\n  \tat org.apache.iceberg.SnapshotProducer.apply(SnapshotProducer.java:240)"
)
RUN_RESULTS = {
    "metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/run-results/v6.json"},
    "results": [
        {"unique_id": "model.p.events", "status": "error", "message": CONFLICT},
        {"unique_id": "model.p.user_summary", "status": "skipped", "message": None},
        {"unique_id": "model.p.event_log", "status": "success", "message": "OK"},
        {"unique_id": "model.p.broken", "status": "error", "message": "Runtime Error\n  [TABLE_OR_VIEW_NOT_FOUND] x"},
    ],
}


def test_classifies_each_failed_result_of_run_results(tmp_path: Path) -> None:
    path = tmp_path / "run_results.json"
    path.write_text(json.dumps(RUN_RESULTS))
    result = CliRunner().invoke(main, ["classify", str(path), "--output", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [(r["source"], r["kind"], r["retryable"]) for r in rows] == [
        ("model.p.events", "missing_files_to_delete", True),
        ("model.p.broken", "not_iceberg_conflict", False),
    ]
    assert rows[0]["files"] == ["file:/wh/events/data/a.parquet"]
    assert rows[0]["exception_class"] == "org.apache.iceberg.exceptions.ValidationException"


def test_classifies_raw_text_from_stdin_as_a_table() -> None:
    result = CliRunner().invoke(main, ["classify", "-"], input=CONFLICT)
    assert result.exit_code == 0, result.output
    [row] = [line for line in result.output.splitlines() if "missing_files_to_delete" in line]
    assert row.split("│")[3].strip() == "yes"  # source | kind | retryable | ...


def test_classifies_a_log_file(tmp_path: Path) -> None:
    log = tmp_path / "dbt.log"
    log.write_text(
        "07:31:22.1 [debug] [Thread-1 (]: "
        + CONFLICT.replace(
            "ValidationException: Missing required files to delete",
            "CommitStateUnknownException: Service failed: 503: x",
        )
    )
    result = CliRunner().invoke(main, ["classify", str(log), "--output", "json"])
    assert json.loads(result.output)[0]["kind"] == "commit_state_unknown"


def test_a_log_with_two_failed_models_gives_a_row_per_model(tmp_path: Path) -> None:
    log = tmp_path / "dbt.log"
    log.write_text(
        "07:31:23  Failure in model broken (models/broken.sql)\n"
        "07:31:23    Runtime Error in model broken (models/broken.sql)\n"
        "  [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column or function parameter with name `x` cannot be resolved.\n"
        "07:31:23  \n"
        "07:31:23  Failure in model events (models/events.sql)\n"
        f"07:31:23    {CONFLICT}\n"
        "07:31:23  Done. PASS=0 WARN=0 ERROR=2 SKIP=0 NO-OP=0 TOTAL=2\n"
    )
    result = CliRunner().invoke(main, ["classify", str(log), "--output", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [(r["source"], r["status"], r["kind"], r["retryable"]) for r in rows] == [
        ("broken", "error", "not_iceberg_conflict", False),
        ("events", "error", "missing_files_to_delete", True),
    ]
    assert rows[1]["files"] == ["file:/wh/events/data/a.parquet"]
    # The table shows the same rows.
    table = CliRunner().invoke(main, ["classify", str(log)]).output
    cells = [
        [cell.strip() for cell in line.split("│")[1:4]]
        for line in table.splitlines()
        if line.startswith("│ ") and not line.startswith("│  ")
    ]
    assert cells == [["broken", "not_iceberg_conflict", "no"], ["events", "missing_files_to_delete", "yes"]]


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["classify", str(tmp_path / "nope.json")])
    assert result.exit_code == 2
    assert "nope.json" in result.output


def test_run_rejects_bad_options_with_exit_2() -> None:
    for args in (["run", "--max-attempts", "0"], ["run", "--command", "test"], ["run", "--output", "xml"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (args, result.output)


def test_run_options_after_the_dbt_arguments_are_a_clear_usage_error() -> None:
    # Everything from the first dbt argument on goes to dbt (click's allow_interspersed_args=False).
    result = CliRunner().invoke(main, ["run", "--select", "tag:nightly", "--max-attempts", "5", "--report=r.json"])
    assert result.exit_code == 2
    assert result.output.startswith(
        "error: --max-attempts, --report after the dbt arguments would go to dbt; give dbt-iceberg-maint's own "
        "options first: dbt-iceberg-maint run [OPTIONS] [DBT_ARGS]..."
    )


def test_maintain_rejects_bad_and_misplaced_options_with_exit_2() -> None:
    result = CliRunner().invoke(main, ["maintain", "--operation", "vacuum"])
    assert result.exit_code == 2 and "'vacuum' is not one of" in result.output
    result = CliRunner().invoke(main, ["maintain", "--target", "prod", "--dry-run"])
    assert result.exit_code == 2
    assert result.output.startswith(
        "error: --dry-run after the dbt arguments would go to dbt; give dbt-iceberg-maint's own "
        "options first: dbt-iceberg-maint maintain [OPTIONS] [DBT_ARGS]..."
    )


def test_classifies_a_recorded_real_run_results() -> None:
    recorded = Path(__file__).parent / "recorded" / "conflict_run_results.json"
    result = CliRunner().invoke(main, ["classify", str(recorded), "--output", "json"])
    assert result.exit_code == 0, result.output
    kinds = {row["source"].rsplit(".", 1)[-1]: row["kind"] for row in json.loads(result.output)}
    assert kinds == {
        "conflict_merge": "missing_files_to_delete",
        "conflict_merge_unsafe": "missing_files_to_delete",
        "conflict_sql_error": "not_iceberg_conflict",
    }
