"""The CLI output layer: one renderer for text and JSON, one error-and-exit path."""

from __future__ import annotations

import io
import json

import click
import pytest
from click.testing import CliRunner
from rich.console import Console

from dbt_iceberg_maint.cli.output import EXIT_FAILURES, EXIT_USAGE, handle_errors, output_option, render
from dbt_iceberg_maint.errors import IcebergMaintError, UsageError
from dbt_iceberg_maint.text_tables import Column, table

ROWS = [{"table": "analytics.events", "files": 12345, "ok": True, "kinds": ["a", "b"], "ratio": 0.5, "none": None}]
COLUMNS = [Column("table"), Column("files", justify="right"), Column("ok"), Column("kinds"), Column("ratio"),
           Column("none", "nothing")]


@click.command()
@click.option("--fail-with", type=click.Choice(["none", "usage", "product"]), default="none")
@output_option
@handle_errors
def command(fail_with: str, output: str) -> None:
    if fail_with == "usage":
        raise UsageError("argument `x` is 3; expected 1 or 2")
    if fail_with == "product":
        raise IcebergMaintError("the table is gone")
    render(output, ROWS, COLUMNS, title="t")


def test_cells_print_values_for_people() -> None:
    assert [c.cell(ROWS[0][c.key]) for c in COLUMNS] == ["analytics.events", "12,345", "yes", "a, b", "0.50", ""]


def test_json_output_is_the_rows_and_nothing_else() -> None:
    result = CliRunner().invoke(command, ["--output", "json"])
    assert result.exit_code == 0
    assert json.loads(result.output) == ROWS


def test_text_output_is_a_table_with_headers() -> None:
    result = CliRunner().invoke(command, [])
    assert result.exit_code == 0
    assert "analytics.events" in result.output and "12,345" in result.output and "nothing" in result.output


def test_empty_rows_print_the_empty_message(capsys: pytest.CaptureFixture[str]) -> None:
    render("text", [], COLUMNS, empty="no failed results")
    assert capsys.readouterr().out.strip() == "no failed results"


@pytest.mark.parametrize(("fail_with", "code", "message"), [
    ("usage", EXIT_USAGE, "error: argument `x` is 3; expected 1 or 2"),
    ("product", EXIT_FAILURES, "error: the table is gone"),
])
def test_errors_exit_with_their_code_and_one_line_on_stderr(fail_with: str, code: int, message: str) -> None:
    result = CliRunner().invoke(command, ["--fail-with", fail_with])
    assert (result.exit_code, result.stderr.strip(), result.stdout) == (code, message, "")


def test_an_unknown_output_format_is_a_usage_error() -> None:
    result = CliRunner().invoke(command, ["--output", "yaml"])
    assert result.exit_code == EXIT_USAGE and "'yaml' is not one of 'text', 'json'" in result.output


@pytest.mark.parametrize(("name", "says"), [("env", "text: `export` lines"), ("lint", "text: the findings by model"),
                                            ("plan", "text: a table")])
def test_output_help_says_what_text_prints(name: str, says: str) -> None:
    """env prints export lines and lint findings: their --help describes no table."""
    from dbt_iceberg_maint.cli import main

    result = CliRunner().invoke(main, [name, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert says in " ".join(result.output.split()), result.output
    assert ("a table" in result.output) == (name == "plan"), result.output


def test_table_names_stay_whole_on_a_narrow_terminal() -> None:
    """A `schema.table` cut across two lines cannot be read or copied: the other columns wrap."""
    from dbt_iceberg_maint.maintenance.results import MaintenanceResult
    from dbt_iceberg_maint.maintenance.run import maintenance_table
    from dbt_iceberg_maint.metadata.report import HEALTH_COLUMNS, PLAN_COLUMNS

    name = "analytics_staging.stg_order_items_enriched"
    plan = [{"status": "skipped", "table": name, "operation": "rewrite_data_files", "reason": "quiet " * 20,
             "sql": f"CALL system.rewrite_data_files(table => '{name}')"}]
    health = [{"table": name, "data_files": 123456, "small_files": 12345, "error": None}]
    results = [MaintenanceResult(f"local.{name}", "rewrite_data_files", "skipped", reason="quiet " * 20)]
    for rendered in (table(plan, PLAN_COLUMNS), table(health, HEALTH_COLUMNS), maintenance_table(results)):
        out = Console(file=io.StringIO(), width=80)
        out.print(rendered)
        assert name in out.file.getvalue(), out.file.getvalue()


# A command that writes to stdout the ways a dbt invocation does: Python's print (dbt's loggers),
# the file descriptor itself (a JVM) and a child process that inherits it.
NOISY_COMMAND = """
import os, subprocess, sys
import click
from dbt_iceberg_maint.cli.output import handle_errors, output_option, render
from dbt_iceberg_maint.text_tables import Column

@click.command()
@output_option
@handle_errors
def noisy(output):
    print("12:00:00  Running with dbt=1.11")
    os.write(1, b"JVM line on fd 1\\n")
    subprocess.run([sys.executable, "-c", "print('a child process')"], check=True)
    render(output, [{"table": "a.b"}], [Column("table")])
    print("a log line after the document")

noisy()
"""


@pytest.mark.parametrize("output", ["json", "text"])
def test_with_json_output_stdout_holds_the_document_and_every_log_line_goes_to_stderr(output: str) -> None:
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run([sys.executable, "-c", NOISY_COMMAND, "--output", output], capture_output=True,
                          text=True, check=True, cwd=Path(__file__).resolve().parents[2])
    logs = ["12:00:00  Running with dbt=1.11", "JVM line on fd 1", "a child process", "a log line after the document"]
    if output == "json":
        assert json.loads(done.stdout) == [{"table": "a.b"}]
        assert done.stderr.splitlines() == logs
    else:  # text output is for people: logs and the table interleave on stdout, as before
        assert all(line in done.stdout for line in logs)
        assert "a.b" in done.stdout
