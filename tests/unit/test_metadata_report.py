"""Rendering of health records and plans (pure): text, JSON, HTML with before/after."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from dbt_iceberg_maint.cli import main
from dbt_iceberg_maint.errors import UsageError
from dbt_iceberg_maint.metadata.health import HEALTH_FIELDS, STATISTICS_FIELDS, HealthRecord
from dbt_iceberg_maint.metadata.planner import PlannedOperation
from dbt_iceberg_maint.metadata.report import (
    HEALTH_COLUMNS,
    health_html,
    health_rows,
    health_text,
    load_before,
    plan_rows,
    plan_summary,
)
from dbt_iceberg_maint.text_tables import table

FIGURES = {"table": "s.t", "data_files": 6, "small_files": 6, "data_bytes": 4000, "delete_files": 0, "records": 12,
           "snapshots": 6, "oldest_snapshot_age_hours": 1.5, "manifests": 6, "data_manifests": 6, "partitions": 2,
           "max_small_files_in_partition": 3, "deletion_vectors": 0, "max_partition_delete_ratio": 0.0,
           "target_file_size_bytes": 1000, "small_file_threshold_bytes": 750}
RECORDS = [HealthRecord("s.t", FIGURES, None, (600, 700, 650, 1200, 100, 90), (("a", 3), ("b", 2))),
           HealthRecord("s.bad", None, "s.bad: no table directory /w/s/bad")]


def test_json_keeps_the_macro_field_order_and_errors_per_table() -> None:
    document = health_rows(RECORDS)
    assert list(document[0]) == [*HEALTH_FIELDS, *STATISTICS_FIELDS]
    assert document[1] == {"table": "s.bad", "error": "s.bad: no table directory /w/s/bad"}
    read, errors = health_text(RECORDS)
    console = Console(record=True, width=200, color_system=None)
    console.print(table(read, HEALTH_COLUMNS))
    lines = [[c.strip() for c in re.split("[│┃]", line)[1:-1]] for line in console.export_text().splitlines()]
    rows = [cells for cells in lines if cells]
    assert rows == [["table", "data files", "small files", "delete files", "snapshots", "manifests", "partitions",
                     "max small files in partition"], ["s.t", "6", "6", "0", "6", "6", "2", "3"]]
    # A table that could not be read is a message, not a row of empty figures with the error in a cell.
    assert errors == ["s.bad: no table directory /w/s/bad"]
    assert health_text([HealthRecord("s.gone", None, "no table directory /w/s/gone")])[1] == [
        "s.gone: no table directory /w/s/gone"]


def test_health_of_a_missing_table_prints_its_error_whole_on_stderr(tmp_path: Path) -> None:
    """No JVM: the metadata catalog reads the (empty) Hadoop warehouse itself."""
    (tmp_path / "ns").mkdir()
    name = "ns.missing_table_with_a_long_name"
    result = CliRunner().invoke(main, ["health", name, "--warehouse", str(tmp_path)])
    assert result.exit_code == 1, result.output
    directory = tmp_path / "ns" / name[3:]
    assert result.stderr.strip() == f"error: table {name} does not exist (no table directory {directory})"
    assert result.stdout == "1 of 1 table(s) could not be read (errors on stderr)\n", result.stdout


def test_html_shows_distribution_partitions_and_changes(tmp_path: Path) -> None:
    before = tmp_path / "before.json"
    before.write_text(json.dumps([{**FIGURES, "small_files": 9}]))
    page = health_html(RECORDS, load_before(before))
    assert "(before / after)" in page and page.count('class="changed"') == 1
    assert page.count("<rect") >= 2 and "target</text>" in page and "small &lt; 0.75 x target" in page
    assert ">a</td>" in page and "no table directory" in page
    assert "<script" not in page
    before.write_text('{"not": "a list"}')
    with pytest.raises(UsageError, match="expected the JSON list `health --output json` prints"):
        load_before(before)


def test_plan_rows_and_summary_count_due_work() -> None:
    plan = [PlannedOperation("s.t", "rewrite_manifests", True, "dry_run", "6 data manifests, >= threshold of 5",
                             "CALL system.rewrite_manifests(table => 's.t')", "p.t"),
            PlannedOperation("s.t", "expire_snapshots", False, "skipped", "only 6 snapshots", None, "p.t")]
    assert plan_rows(plan)[0] == {"table": "s.t", "operation": "rewrite_manifests", "due": True, "status": "dry_run",
                                  "reason": "6 data manifests, >= threshold of 5",
                                  "sql": "CALL system.rewrite_manifests(table => 's.t')", "model": "p.t"}
    assert plan_summary(plan) == "1 operation(s) due on 1 table(s); 2 decision(s)"
    missing = PlannedOperation("s.gone", "rewrite_manifests", False, "failed", "table s.gone does not exist", None)
    assert plan_summary([*plan, missing]) == (
        "1 operation(s) due on 1 table(s); 3 decision(s); 1 table(s) could not be planned: s.gone")
