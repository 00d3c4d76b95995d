"""Commands about dbt's own runs: `run` (dbt with selective re-runs of lost Iceberg commits) and
`classify` (failure text → the conflict kinds the runner decides on)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING

import click

from dbt_iceberg_maint.cli.app import main
from dbt_iceberg_maint.cli.options import DBT_ARGS_FOLLOW, dbt_wrapper_options, refuse_misplaced_options
from dbt_iceberg_maint.cli.output import handle_errors, output_option, render, render_report
from dbt_iceberg_maint.text_tables import Column

if TYPE_CHECKING:
    from rich.console import Console


@main.command("run", context_settings=DBT_ARGS_FOLLOW)
@click.option("--command", "dbt_command", type=click.Choice(["run", "build"]), default="run",
              show_default=True, help="The dbt command to run.")
@click.option("--max-attempts", type=click.IntRange(min=1), default=3, show_default=True,
              help="Attempts per node in total, the first run included.")
@dbt_wrapper_options
@click.option("--backoff-seconds", type=click.FloatRange(min=0), default=2.0, show_default=True,
              help="Wait before re-run n: a random time between half and all of "
                   "base * 2^(n-1), capped at 60 s (1-2 s, 2-4 s, 4-8 s ... for 2).")
@click.option("--verify-landed/--no-verify-landed", default=True, show_default=True,
              help="Read the snapshot log to decide whether a failed write landed (docs/landed-verification.md).")
@click.argument("dbt_args", nargs=-1, type=click.UNPROCESSED)
@handle_errors
def run_command(
    dbt_command: str,
    max_attempts: int,
    report_path: Path | None,
    output: str,
    project_dir: Path,
    profiles_dir: Path | None,
    backoff_seconds: float,
    verify_landed: bool,
    dbt_args: tuple[str, ...],
) -> None:
    """Run dbt; re-run only the nodes that lost an Iceberg commit conflict and are idempotent.

    DBT_ARGS are passed to dbt (e.g. `--select tag:nightly --vars '{batch: 2}'`). The options
    below come first: everything from the first dbt argument on goes to dbt. Exit 0 when every
    node ended successfully, 1 when failures remain, 2 on usage errors.
    """
    from dbt_iceberg_maint.runner import exponential_backoff, report_table, run_dbt_with_retries

    refuse_misplaced_options(dbt_args)
    report = run_dbt_with_retries(
        list(dbt_args),
        command=dbt_command,
        max_attempts=max_attempts,
        project_dir=project_dir,
        profiles_dir=profiles_dir,
        backoff=lambda attempt: exponential_backoff(attempt, base_seconds=backoff_seconds),
        verify_landed_writes=verify_landed,
    )

    def text(out: Console) -> None:
        if report.error:
            what = "dbt rejected its arguments" if report.usage_error else "dbt failed before running any node"
            out.print(f"[red]{what}:[/red] {report.error}")
        else:
            out.print(report_table(report))
            verdict = "[green]all nodes succeeded[/green]" if report.success else "[red]failures remain[/red]"
            out.print(f"{verdict} after {report.attempts} attempt(s)")

    render_report(output, report.to_json(), text, report_path)
    sys.exit(report.exit_code)



CLASSIFY_COLUMNS = (
    Column("source"),
    Column("kind"),
    Column("retryable"),
    Column("exception_class", "exception"),
    Column("summary"),
)


@main.command("classify")
@click.argument("source", type=click.File("r"))
@output_option
@handle_errors
def classify_command(source: IO[str], output: str) -> None:
    """Classify the failures in a run_results.json, a log file or raw text (`-` reads stdin).

    A run_results.json gives a row per failed result, a dbt log or console output a row per
    failed node; any other text is one failure.
    """
    from dataclasses import asdict

    from dbt_iceberg_maint.conflicts import classify
    from dbt_iceberg_maint.runner.failure_log import failures_in

    rows = [
        {"source": failure.source, "status": failure.status, **asdict(verdict), "files": list(verdict.files)}
        for failure in failures_in(source.read())
        for verdict in (classify(failure.text),)
    ]
    render(output, rows, CLASSIFY_COLUMNS, title="Iceberg failure classification", empty="no failed results")
