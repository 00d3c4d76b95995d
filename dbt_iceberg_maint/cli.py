"""The `dbt-iceberg-maint` command line."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TypeVar

import click

from dbt_iceberg_maint.errors import IcebergMaintError, UsageError
from dbt_iceberg_maint.spark import (
    ICEBERG_JAR_ENV,
    ICEBERG_PACKAGES_ENV,
    WAREHOUSE_ENV,
    check_java,
    resolve_iceberg_runtime,
)

T = TypeVar("T")

EXIT_FAILURES = 1
EXIT_USAGE = 2


@click.group()
@click.version_option(package_name="dbt_iceberg_maint")
def main() -> None:
    """Keep Apache Iceberg tables built by dbt on Spark healthy."""


@main.command()
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".demo"),
    show_default=True,
    help="Where the demo keeps its warehouse (wiped at start).",
)
def demo(workdir: Path) -> None:
    """Build the integration project on local Spark + Iceberg and report table health."""
    from dbt_iceberg_maint.demo import run_demo

    try:
        run_demo(workdir)
    except IcebergMaintError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FAILURES)


@main.command()
@click.option("--warehouse", type=click.Path(file_okay=False, path_type=Path),
              default=Path("iceberg_warehouse"), show_default=True)
def env(warehouse: Path) -> None:
    """Print `export` lines that let plain `dbt` use the embedded runtime's profile."""
    try:
        check_java()
        runtime = resolve_iceberg_runtime()
    except IcebergMaintError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    if runtime.jars:
        click.echo(f"export {ICEBERG_JAR_ENV}={runtime.jars[0]}")
    if runtime.packages:
        click.echo(f"export {ICEBERG_PACKAGES_ENV}={','.join(runtime.packages)}")
    click.echo(f"export {WAREHOUSE_ENV}={warehouse.resolve()}")
    warehouse.mkdir(parents=True, exist_ok=True)


def _dbt_wrapper_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options of the commands that run dbt for the user: report, output and dbt's paths."""
    for option in reversed([
        click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
                     help="Also write the JSON report to this file."),
        click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True),
        click.option("--project-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
                     default=Path("."), show_default=True),
        click.option("--profiles-dir", type=click.Path(file_okay=False, path_type=Path),
                     help="Default: DBT_PROFILES_DIR, the project directory if it has profiles.yml, ~/.dbt."),
    ]):
        command = option(command)
    return command


@main.command(
    "run",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--command", "dbt_command", type=click.Choice(["run", "build"]), default="run",
              show_default=True, help="The dbt command to run.")
@click.option("--max-attempts", type=click.IntRange(min=1), default=3, show_default=True,
              help="Attempts per node in total, the first run included.")
@_dbt_wrapper_options
@click.option("--backoff-seconds", type=click.FloatRange(min=0), default=2.0, show_default=True,
              help="Wait before re-run n: a random time between half and all of "
                   "base * 2^(n-1), capped at 60 s (1-2 s, 2-4 s, 4-8 s ... for 2).")
@click.option("--verify-landed/--no-verify-landed", default=True, show_default=True,
              help="Read the snapshot log to decide whether a failed write landed (docs/landed-verification.md).")
@click.argument("dbt_args", nargs=-1, type=click.UNPROCESSED)
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
    from rich.console import Console

    from dbt_iceberg_maint.runner import exponential_backoff, report_table, run_dbt_with_retries

    _refuse_misplaced_options(dbt_args)
    report = _report_or_exit(lambda: run_dbt_with_retries(
        list(dbt_args),
        command=dbt_command,
        max_attempts=max_attempts,
        project_dir=project_dir,
        profiles_dir=profiles_dir,
        backoff=lambda attempt: exponential_backoff(attempt, base_seconds=backoff_seconds),
        verify_landed_writes=verify_landed,
    ))
    if _emit_json_report(report.to_json(), report_path, output):
        console = Console(width=None if sys.stdout.isatty() else 160)
        if report.error:
            what = "dbt rejected its arguments" if report.usage_error else "dbt failed before running any node"
            console.print(f"[red]{what}:[/red] {report.error}")
        else:
            console.print(report_table(report))
            verdict = "[green]all nodes succeeded[/green]" if report.success else "[red]failures remain[/red]"
            console.print(f"{verdict} after {report.attempts} attempt(s)")
    sys.exit(report.exit_code)


@main.command(
    "maintain",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--select", "select", multiple=True,
              help="A model name or tag:<tag> (repeatable). Default: every Iceberg model.")
@click.option("--operation", "operations", multiple=True,
              type=click.Choice(["compaction", "rewrite_data_files", "rewrite_position_delete_files",
                                 "expire_snapshots", "remove_orphan_files", "rewrite_manifests"]),
              help="Only these operations (repeatable). Default: compaction, expire_snapshots, remove_orphan_files, rewrite_manifests.")
@click.option("--dry-run", is_flag=True, help="Render the SQL, execute nothing.")
@click.option("--force", is_flag=True, help="Ignore the thresholds (never the cold-partition scope).")
@_dbt_wrapper_options
@click.argument("dbt_args", nargs=-1, type=click.UNPROCESSED)
def maintain_command(
    select: tuple[str, ...],
    operations: tuple[str, ...],
    dry_run: bool,
    force: bool,
    report_path: Path | None,
    output: str,
    project_dir: Path,
    profiles_dir: Path | None,
    dbt_args: tuple[str, ...],
) -> None:
    """Run the iceberg_maintenance run-operation; when Spark rejects a statement at run time,
    record that operation as failed and carry on with the rest.

    DBT_ARGS are passed to dbt (e.g. `--target prod --vars '{...}'`), after this command's own
    options. Exit 0 when no operation failed, 1 when one did, 2 on usage errors.
    """
    from rich.console import Console

    from dbt_iceberg_maint.maintenance import maintenance_table, run_maintenance

    _refuse_misplaced_options(dbt_args)
    report = _report_or_exit(lambda: run_maintenance(
        select, operations, dry_run=dry_run, force=force, dbt_args=dbt_args,
        project_dir=project_dir, profiles_dir=profiles_dir))
    if _emit_json_report(report.to_json(), report_path, output):
        console = Console(width=None if sys.stdout.isatty() else 160)
        console.print(maintenance_table(report.results))
        verdict = f"[red]{len(report.failed)} operation(s) failed[/red]" if report.failed else "[green]no operation failed[/green]"
        console.print(f"{verdict}; {len(report.results)} operation(s) in {report.invocations} dbt invocation(s)")
    sys.exit(report.exit_code)


def _refuse_misplaced_options(dbt_args: tuple[str, ...]) -> None:
    """Exit 2 when the command's own options come after DBT_ARGS (they would go to dbt)."""
    context = click.get_current_context()
    misplaced = _own_options_among(context.command, dbt_args)
    if misplaced:
        click.echo(f"error: {', '.join(misplaced)} after the dbt arguments would go to dbt; give "
                   f"dbt-iceberg-maint's own options first: dbt-iceberg-maint {context.info_name} "
                   "[OPTIONS] [DBT_ARGS]...", err=True)
        sys.exit(EXIT_USAGE)


def _report_or_exit(produce: Callable[[], T]) -> T:
    """`produce()`, or exit 2 on a usage error and 1 on any other error of the product."""
    try:
        return produce()
    except UsageError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except IcebergMaintError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FAILURES)


def _emit_json_report(report_json: str, report_path: Path | None, output: str) -> bool:
    """Write `--report`, print the JSON for `--output json`; True when text is still to print."""
    if report_path is not None:
        report_path.write_text(report_json + "\n")
    if output == "json":
        click.echo(report_json)
        return False
    return True


def _own_options_among(command: click.Command, dbt_args: tuple[str, ...]) -> list[str]:
    """`command`'s own options found among DBT_ARGS.

    `run` stops parsing its options at the first argument it does not know
    (allow_interspersed_args=False), so `run --select x --max-attempts 5` hands
    `--max-attempts 5` to dbt.
    """
    own = {name for param in command.params if isinstance(param, click.Option) for name in param.opts}
    return [flag for flag in (arg.split("=", 1)[0] for arg in dbt_args) if flag in own]


@main.command("classify")
@click.argument("source", type=click.File("r"))
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def classify_command(source: IO[str], output: str) -> None:
    """Classify the failures in a run_results.json, a log file or raw text (`-` reads stdin).

    A run_results.json gives a row per failed result, a dbt log or console output a row per
    failed node; any other text is one failure.
    """
    from dataclasses import asdict

    from rich.console import Console
    from rich.table import Table

    from dbt_iceberg_maint.conflicts import classify
    from dbt_iceberg_maint.failure_log import failures_in

    rows = [(failure.source, failure.status, classify(failure.text)) for failure in failures_in(source.read())]
    if output == "json":
        click.echo(json.dumps(
            [{"source": origin, "status": status, **asdict(verdict), "files": list(verdict.files)}
             for origin, status, verdict in rows],
            indent=2,
        ))
        return
    table = Table(title="Iceberg failure classification")
    for column in ("source", "kind", "retryable", "exception", "summary"):
        table.add_column(column, overflow="fold")
    for origin, _status, verdict in rows:
        table.add_row(origin, verdict.kind, "yes" if verdict.retryable else "no",
                      verdict.exception_class or "", verdict.summary)
    Console(width=None if sys.stdout.isatty() else 160).print(table)
    if not rows:
        click.echo("no failed results")
