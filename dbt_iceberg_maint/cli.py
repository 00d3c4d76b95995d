"""The `dbt-iceberg-maint` command line: one function per command.

Commands parse options and call the library; everything they print goes through
`dbt_iceberg_maint.output` (one console, `--output text|json`, `error: ...` on stderr, exit 2 for
usage errors and 1 for failures). Heavy modules (dbt, pyspark, a report's rich tables) are
imported inside the command that needs them, so `--help` and `classify` start fast and work
without the `[embedded]` extra.

Over 300 lines because it holds every command's options and help text: each command is one
function that only parses, calls the library and renders.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

import click

from dbt_iceberg_maint import protocol
from dbt_iceberg_maint.output import (
    EXIT_FAILURES,
    EXIT_USAGE,
    TABLE_COLUMN,
    Column,
    echo_document,
    fail,
    handle_errors,
    output_option,
    output_option_for,
    output_option_with_html,
    print_text,
    render,
    render_report,
)
from dbt_iceberg_maint.policy.selection import Shard

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["EXIT_FAILURES", "EXIT_USAGE", "main"]


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
@handle_errors
def demo(workdir: Path) -> None:
    """Build the integration project on local Spark + Iceberg and report table health."""
    from dbt_iceberg_maint.demo import run_demo

    run_demo(workdir)


@main.command()
@click.option("--warehouse", type=click.Path(file_okay=False, path_type=Path),
              default=Path("iceberg_warehouse"), show_default=True)
@output_option_for("`export` lines for a POSIX shell")
def env(warehouse: Path, output: str) -> None:
    """Print `export` lines that let plain `dbt` use the embedded runtime's profile (json: the
    variables as an object): the Iceberg jar, the SQLite JDBC driver, the warehouse, the driver's
    log settings and memory (DBT_ICEBERG_MAINT_DRIVER_MEMORY as set, else a quarter of the
    machine's memory within 1g..8g)."""
    import os
    import shlex

    from dbt_iceberg_maint.driver_memory import DRIVER_MEMORY_ENV, driver_memory
    from dbt_iceberg_maint.embedded_catalog import SQLITE_JDBC_JAR_ENV
    from dbt_iceberg_maint.errors import IcebergMaintError
    from dbt_iceberg_maint.spark import (
        DRIVER_JAVA_OPTIONS_ENV,
        ICEBERG_JAR_ENV,
        ICEBERG_PACKAGES_ENV,
        WAREHOUSE_ENV,
        CatalogSpec,
        catalog_driver_jars,
        check_java,
        log4j2_java_options,
        prepare_warehouse,
        resolve_iceberg_runtime,
    )

    catalog = CatalogSpec(warehouse=str(warehouse.resolve()))
    try:
        check_java()
        runtime = resolve_iceberg_runtime()
        driver_jars = catalog_driver_jars(catalog)
        memory = driver_memory()
        prepare_warehouse(catalog)  # the embedded catalog's tables: Spark expects them (docs/python-cli.md)
    except IcebergMaintError as exc:  # a set-up the user must fix before anything runs
        fail(str(exc), EXIT_USAGE)
    variables = {}
    if runtime.jars:
        variables[ICEBERG_JAR_ENV] = runtime.jars[0]
    if runtime.packages:
        variables[ICEBERG_PACKAGES_ENV] = ",".join(runtime.packages)
    variables[SQLITE_JDBC_JAR_ENV] = driver_jars[0]
    variables[WAREHOUSE_ENV] = str(warehouse.resolve())
    variables[DRIVER_JAVA_OPTIONS_ENV] = log4j2_java_options()
    variables[DRIVER_MEMORY_ENV] = memory.value
    # As start_session does: the local runtime binds to loopback (and Spark does not warn that
    # the host name resolves to it).
    variables["SPARK_LOCAL_IP"] = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")
    lines = "\n".join(f"export {name}={shlex.quote(value)}" for name, value in variables.items())
    render_report(output, json.dumps(variables, indent=2), lines)


def _dbt_wrapper_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options of the commands that run dbt for the user: report, output and dbt's paths."""
    options: list[Callable[[Callable[..., None]], Callable[..., None]]] = [
        click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
                     help="Also write the JSON report to this file."),
        output_option,
        click.option("--project-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
                     default=Path("."), show_default=True),
        click.option("--profiles-dir", type=click.Path(file_okay=False, path_type=Path),
                     help="Default: DBT_PROFILES_DIR, the project directory if it has profiles.yml, ~/.dbt."),
    ]
    for option in reversed(options):
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

    _refuse_misplaced_options(dbt_args)
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


MAINTENANCE_OPERATIONS = ("compaction", *protocol.OPERATIONS)


@main.command(
    "maintain",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--select", "select", multiple=True,
              help="A model name, tag:<tag>, source:<source> or source:<source>.<table> (repeatable). Default: "
                   "every Iceberg model and every source table that declares meta.iceberg_maint.")
@click.option("--shard", default=None,
              help="'K/N': only the K-th of N disjoint shards of the selection (by table name), so N jobs can "
                   "share a lake.")
@click.option("--operation", "operations", multiple=True, type=click.Choice(MAINTENANCE_OPERATIONS),
              help="Only these operations (repeatable). Default: compaction, expire_snapshots, "
                   "remove_orphan_files, rewrite_manifests.")
@click.option("--dry-run", is_flag=True, help="Render the SQL, execute nothing.")
@click.option("--force", is_flag=True, help="Ignore the thresholds (never the cold-partition scope).")
@click.option("--as-of", "as_of", default=None, help="Reference time (UTC 'YYYY-MM-DD HH:MM:SS'). Default: now.")
@click.option("--concurrency", default=None, metavar="N",
              help="Fleet engine: plan from metadata, then run steps on N tables at once (docs/python-cli.md).")
@click.option("--budget", default=None, metavar="DURATION",
              help="Fleet engine: start no step after this long (e.g. 90s, 30m, 2h); the rest is backlog.")
@click.option("--step-timeout", "step_timeout", default=None, metavar="DURATION",
              help="Fleet engine: stop a step running longer than this (reported failed, kind timeout).")
@click.option("--max-files-per-table", "max_files_per_table", default=None, metavar="N",
              help="Fleet engine: a compaction rewrites at most N files (max-files-to-rewrite) unless the "
                   "policy's options set a cap.")
@click.option("--resume", "resume", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Fleet engine: a previous run's JSON report; the steps it settled are not taken up again.")
@click.option("--warehouse", default=None, help="Fleet engine: the catalog to plan from (as for `plan`); default: "
                                                 "the profile's server_side_parameters.")
@click.option("--catalog-property", "catalog_properties", multiple=True, metavar="KEY=VALUE",
              help="Fleet engine: a spark.sql.catalog.<name>.* setting of the catalog to plan from (repeatable).")
@click.option("--catalog-name", default=None, help="Fleet engine: the Spark catalog name (default: local).")
@click.option("--include-catalog", "catalog_patterns", multiple=True, metavar="PATTERN",
              help="Fleet engine: also maintain the catalog's tables matching 'namespace.table' (wildcards, "
                   "repeatable) that no dbt node declares, with the var dbt_iceberg_maint_catalog_policy.")
@_dbt_wrapper_options
@click.argument("dbt_args", nargs=-1, type=click.UNPROCESSED)
@handle_errors
def maintain_command(
    select: tuple[str, ...],
    shard: str | None,
    operations: tuple[str, ...],
    dry_run: bool,
    force: bool,
    as_of: str | None,
    concurrency: str | None,
    budget: str | None,
    step_timeout: str | None,
    max_files_per_table: str | None,
    resume: Path | None,
    warehouse: str | None,
    catalog_properties: tuple[str, ...],
    catalog_name: str | None,
    catalog_patterns: tuple[str, ...],
    report_path: Path | None,
    output: str,
    project_dir: Path,
    profiles_dir: Path | None,
    dbt_args: tuple[str, ...],
) -> None:
    """Run the iceberg_maintenance run-operation; when Spark rejects a statement at run time,
    record that operation as failed and carry on with the rest.

    With --concurrency, --budget, --step-timeout, --max-files-per-table, --resume, --include-catalog
    or a catalog option, the fleet engine runs instead: it plans from metadata, orders tables worst-first and
    runs each table's due steps (execute_maintenance_steps) on N workers.

    DBT_ARGS are passed to dbt (e.g. `--target prod --vars '{...}'`), after this command's own
    options. Exit 0 when no operation failed, 1 when one did, 2 on usage errors.
    """
    from dbt_iceberg_maint.maintenance import maintenance_table, run_maintenance

    _refuse_misplaced_options(dbt_args)
    if shard is not None:
        Shard.parse(shard)  # a usage error before dbt starts
    fleet_options = (concurrency, budget, step_timeout, max_files_per_table, resume, warehouse, catalog_name)
    if any(value is not None for value in fleet_options) or catalog_properties or catalog_patterns:
        _maintain_fleet(select, shard, operations, dry_run, force, as_of, concurrency, budget, step_timeout,
                        max_files_per_table, resume, warehouse, catalog_properties, catalog_name, catalog_patterns,
                        report_path, output, project_dir, profiles_dir, dbt_args)
        return
    report = run_maintenance(select, operations, dry_run=dry_run, force=force, as_of=as_of, shard=shard,
                             dbt_args=dbt_args, project_dir=project_dir, profiles_dir=profiles_dir)

    def text(out: Console) -> None:
        from rich.markup import escape

        out.print(maintenance_table(report.results))
        failed = len(report.failed)
        verdict = f"[red]{failed} operation(s) failed[/red]" if failed else "[green]no operation failed[/green]"
        out.print(f"{verdict}; {len(report.results)} operation(s) in {report.invocations} dbt invocation(s)")
        for problem in report.history_problems:
            out.print(f"[yellow]warning: maintenance history not written: {escape(problem)}[/yellow]")

    render_report(output, report.to_json(), text, report_path)
    sys.exit(report.exit_code)


def _whole_number(option: str, value: str | None) -> int | None:
    from dbt_iceberg_maint.errors import UsageError

    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        raise UsageError(f"{option} is {value!r}; expected a whole number >= 1") from None


def _maintain_fleet(select: tuple[str, ...], shard: str | None, operations: tuple[str, ...], dry_run: bool,
                    force: bool, as_of: str | None, concurrency: str | None, budget: str | None,
                    step_timeout: str | None, max_files_per_table: str | None, resume: Path | None,
                    warehouse: str | None, catalog_properties: tuple[str, ...], catalog_name: str | None,
                    catalog_patterns: tuple[str, ...], report_path: Path | None, output: str, project_dir: Path,
                    profiles_dir: Path | None, dbt_args: tuple[str, ...]) -> None:
    """`maintain` through the fleet engine (dbt_iceberg_maint/fleet/): a progress line on stderr
    while it runs, then the report."""
    from dbt_iceberg_maint.fleet import run_fleet
    from dbt_iceberg_maint.fleet.render import fleet_table, progress_display
    from dbt_iceberg_maint.metadata.catalog import config_from_options

    workers = _whole_number("--concurrency", concurrency)
    cap = _whole_number("--max-files-per-table", max_files_per_table)
    catalog = (config_from_options(warehouse, catalog_properties, catalog_name or "local")
               if warehouse is not None or catalog_properties else None)
    with progress_display(enabled=output != "json") as progress:
        report = run_fleet(select or None, operations or None, concurrency=1 if workers is None else workers,
                           budget_s=budget, step_timeout_s=step_timeout, shard=shard, dry_run=dry_run, force=force,
                           as_of=as_of, project_dir=project_dir, profiles_dir=profiles_dir, dbt_args=dbt_args,
                           catalog=catalog, max_files_per_table=cap, resume=resume, progress=progress,
                           include_catalog=catalog_patterns)
    render_report(output, report.to_json(), fleet_table(report), report_path)
    sys.exit(report.exit_code)


LEASE_COLUMNS = (TABLE_COLUMN, Column("holder"), Column("acquired_at", "acquired at (UTC)"),
                 Column("expires_at", "expires at (UTC)"), Column("path"))


@main.command(
    "leases",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--schema", "schemas", multiple=True,
              help="Read the lease log of this schema ('schema' or 'catalog.schema'; repeatable). "
                   "Default: the schemas of the project's Iceberg models.")
@click.option("--break", "break_table", default=None, metavar="TABLE",
              help="End the current lease of TABLE ('schema.table' or 'catalog.schema.table').")
@output_option
@click.option("--project-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=Path("."), show_default=True)
@click.option("--profiles-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Default: DBT_PROFILES_DIR, the project directory if it has profiles.yml, ~/.dbt.")
@click.argument("dbt_args", nargs=-1, type=click.UNPROCESSED)
@handle_errors
def leases_command(schemas: tuple[str, ...], break_table: str | None, output: str, project_dir: Path,
                   profiles_dir: Path | None, dbt_args: tuple[str, ...]) -> None:
    """List the current per-table maintenance leases (table, holder run id, acquired_at,
    expires_at), or with --break end one: its holder skips its remaining steps.

    Runs the list_leases / break_lease run-operations over the project's dbt connection.
    DBT_ARGS are passed to dbt (e.g. `--target prod`), after this command's own options.
    """
    from dbt_iceberg_maint.leases import break_args, list_args, run_lease_command

    _refuse_misplaced_options(dbt_args)
    if break_table is not None and schemas:
        fail("--break TABLE names its own lease log; give --schema only when listing", EXIT_USAGE)
    args = break_args(break_table) if break_table is not None else list_args(schemas)
    leases = run_lease_command(args, dbt_args=dbt_args, project_dir=project_dir, profiles_dir=profiles_dir)
    if break_table is not None:
        title, empty = "Broken lease", f"{break_table} had no current lease"
    else:
        title, empty = "Current leases", "no current leases"
    render(output, [lease.as_dict() for lease in leases], LEASE_COLUMNS, title=title, empty=empty)


def _catalog_options(command: Callable[..., None]) -> Callable[..., None]:
    """Where the Iceberg catalog is, in Spark's vocabulary (docs/health-and-plans.md)."""
    for option in reversed([
        click.option("--warehouse", help="The embedded catalog's warehouse directory (its SQLite catalog "
                                          "file, or a Hadoop catalog's tables; --catalog-property "
                                          "type=hadoop forces the latter)."),
        click.option("--catalog-property", "catalog_properties", multiple=True, metavar="KEY=VALUE",
                     help="A spark.sql.catalog.<name>.* setting, e.g. type=jdbc, uri=jdbc:postgresql://... "
                          "(repeatable)."),
        click.option("--catalog-name", default=None, help="The Spark catalog name (default: local, or the "
                                                          "profile's)."),
        click.option("--workers", type=click.IntRange(min=1), default=8, show_default=True,
                     help="Tables read concurrently."),
    ]):
        command = option(command)
    return command


def _open_metadata_catalog(warehouse: str | None, properties: tuple[str, ...], name: str | None,
                           project_dir: Path, profiles_dir: Path | None, target: str | None) -> object:
    import os

    from dbt_iceberg_maint.invoke import default_profiles_dir
    from dbt_iceberg_maint.metadata.catalog import config_from_options, config_from_profile, open_catalog

    if warehouse is None and not properties:
        config = config_from_profile(project_dir, profiles_dir or default_profiles_dir(project_dir, os.environ),
                                     target)
    else:
        config = config_from_options(warehouse, properties, name or "local")
    return open_catalog(config)


@main.command("health")
@click.argument("tables", nargs=-1)
@_catalog_options
@click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="With no catalog option: read the catalog from this project's profile.")
@click.option("--profiles-dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--target", default=None, help="The profile target (default: the profile's).")
@output_option_with_html
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report (JSON, or HTML plus a .png beside it) to this file.")
@click.option("--compare", "compare_path", type=click.Path(dir_okay=False, path_type=Path),
              help="A previous `health --output json`: the HTML report shows before/after.")
@handle_errors
def health_command(tables: tuple[str, ...], warehouse: str | None, catalog_properties: tuple[str, ...],
                   catalog_name: str | None, workers: int, project_dir: Path, profiles_dir: Path | None,
                   target: str | None, output: str, report_path: Path | None, compare_path: Path | None) -> None:
    """table_health's figures for TABLES (namespace.table; default: every table), read from
    Iceberg metadata without Spark. Exit 0, 1 when a table could not be read, 2 on usage errors."""
    from dbt_iceberg_maint.metadata import report
    from dbt_iceberg_maint.metadata.planner import read_health

    catalog = _open_metadata_catalog(warehouse, catalog_properties, catalog_name, project_dir, profiles_dir, target)
    before = report.load_before(compare_path) if compare_path else None
    records = read_health(catalog, list(tables) or None, workers)  # type: ignore[arg-type]
    if output == "html":
        if report_path is None:
            fail("--output html needs --report FILE", EXIT_USAGE)
        report_path.write_text(report.health_html(records, before))
        png = report_path.with_suffix(".png")
        print_text(f"wrote {report_path}" + (f" and {png}" if report.health_png(records, png)
                                              else " (no PNG: pip install 'dbt_iceberg_maint[report]' for it)"))
    else:
        rows = report.health_rows(records)
        if report_path is not None:
            report_path.write_text(json.dumps(rows, indent=2) + "\n")
        read, errors = report.health_text(records)
        if output == "json":
            render(output, rows, report.HEALTH_COLUMNS)
        else:
            if read or not errors:
                render(output, read, report.HEALTH_COLUMNS, title="Iceberg table health", empty="no table")
            for error in errors:
                click.echo(f"error: {error}", err=True)
            if errors:
                print_text(f"{len(errors)} of {len(records)} table(s) could not be read (errors on stderr)")
    sys.exit(EXIT_FAILURES if any(r.error for r in records) else 0)


@main.command("plan")
@_catalog_options
@click.option("--project-dir", type=click.Path(file_okay=False, exists=True, path_type=Path), default=Path("."),
              show_default=True)
@click.option("--profiles-dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--target", default=None)
@click.option("--select", "select", multiple=True,
              help="A model name, tag:<tag>, source:<source> or source:<source>.<table> (repeatable).")
@click.option("--shard", default=None, help="'K/N': only the K-th of N disjoint shards of the selection.")
@click.option("--operation", "operations", multiple=True,
              type=click.Choice(MAINTENANCE_OPERATIONS))
@click.option("--parse", "parse", is_flag=True, help="Run `dbt parse` even when target/manifest.json exists.")
@click.option("--vars", "vars_yaml", default=None,
              help="dbt --vars (YAML) the maintenance job would pass: dbt_iceberg_maint_enabled: false "
                   "switches everything off, as it does for maintain().")
@click.option("--as-of", "as_of", default=None, help="Reference time (UTC 'YYYY-MM-DD HH:MM:SS'). Default: now.")
@output_option
@click.option("--emit-args", is_flag=True,
              help="Print only the --args JSON for `dbt run-operation iceberg_maintenance` (tables with due work).")
@click.option("--include-catalog", "catalog_patterns", multiple=True, metavar="PATTERN",
              help="Also plan the catalog's tables matching 'namespace.table' (wildcards * ? [...], repeatable) "
                   "that no dbt model or source declares, with the policy of the var "
                   "dbt_iceberg_maint_catalog_policy (default: the package's defaults).")
@handle_errors
def plan_command(warehouse: str | None, catalog_properties: tuple[str, ...], catalog_name: str | None,
                 workers: int, project_dir: Path, profiles_dir: Path | None, target: str | None,
                 select: tuple[str, ...], shard: str | None, operations: tuple[str, ...], parse: bool,
                 vars_yaml: str | None, as_of: str | None, output: str, emit_args: bool,
                 catalog_patterns: tuple[str, ...]) -> None:
    """What maintain(dry_run=true) would decide for every Iceberg model, from metadata alone.
    Exit 0, 1 when a table could not be planned, 2 on usage errors."""
    from dbt_iceberg_maint.metadata import planner, report
    from dbt_iceberg_maint.policy.selection import check_catalog_patterns

    errors = check_catalog_patterns(catalog_patterns)
    if errors:  # before the catalog or dbt is touched
        fail("; ".join(errors), EXIT_USAGE)
    shard_ = Shard.parse(shard) if shard else None
    catalog = _open_metadata_catalog(warehouse, catalog_properties, catalog_name, project_dir, profiles_dir, target)
    manifest = planner.load_manifest(project_dir, profiles_dir, target, parse)
    targets = planner.iceberg_models(manifest, list(select) or None, shard_)
    found = None
    if catalog_patterns:
        extra, found = planner.catalog_targets(catalog, manifest, catalog_patterns,  # type: ignore[arg-type]
                                               planner.project_var(project_dir, vars_yaml, planner.CATALOG_POLICY_VAR),
                                               shard_)
        targets += extra
    plan = planner.plan_models(catalog, targets, list(operations) or None,  # type: ignore[arg-type]
                               project_enabled=planner.project_enabled(project_dir, vars_yaml),
                               workers=workers, at=planner.parse_as_of(as_of))
    if emit_args:
        args = planner.emit_args(plan, list(operations) or None)
        if args is None:  # stdout stays empty: a script runs no job (docs/health-and-plans.md)
            click.echo(f"no model or source has due work ({report.plan_summary(plan)}): no --args to emit", err=True)
        else:
            echo_document(json.dumps(args))
    else:
        summary = report.plan_summary(plan) + (f"\n{report.catalog_summary(found.to_dict())}" if found else "")
        render(output, report.plan_rows(plan), report.PLAN_COLUMNS, title="Maintenance plan",
               empty="no Iceberg model", footer=summary)
    if found is not None and output == "json":  # the list on stdout stays a list of decisions
        click.echo(report.catalog_summary(found.to_dict()), err=True)
    # A table that could not be planned fails none of its operations' due rules: not due, failed.
    sys.exit(EXIT_FAILURES if any(p.status == "failed" and not p.due for p in plan) else 0)


REPORT_COLUMNS = (Column("rank", justify="right"), TABLE_COLUMN, Column("score", justify="right"),
                  *(Column(key, key.replace("_", " "), justify="right") for key in (
                      "small_files", "data_files", "delete_files", "snapshots", "failed_steps", "streak")),
                  Column("expire_bytes", "expire_snapshots would free (bytes)", justify="right"),
                  Column("orphan_bytes", "remove_orphan_files would free (bytes)", justify="right"))


@main.command("report")
@_catalog_options
@click.option("--project-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="The dbt project: its profile's catalog and schema, its vars.")
@click.option("--profiles-dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--target", default=None, help="The profile target (default: the profile's).")
@click.option("--vars", "vars_yaml", default=None,
              help="dbt --vars (YAML) the maintenance jobs pass, for dbt_iceberg_maint_history_schema/_table.")
@click.option("--history-table", default=None, metavar="SCHEMA.TABLE",
              help="The history table. Default: the vars', else <target schema>.iceberg_maint_history.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("iceberg_maint_report"), show_default=True,
              help="Where report.html, report.json and the PNG charts are written.")
@click.option("--days", type=click.FloatRange(min=0, min_open=True), default=30, show_default=True,
              help="Look back this many days of history.")
@click.option("--estimates/--no-estimates", default=True, show_default=True,
              help="Estimate the bytes expire_snapshots and remove_orphan_files would free (lists each "
                   "table's location).")
@click.option("--expire-older-than-hours", type=click.FloatRange(min=0), default=None,
              help="For every table. Default: each table's policy (expire_snapshots), else 168.")
@click.option("--expire-retain-last", type=click.IntRange(min=1), default=None,
              help="For every table. Default: each table's policy (expire_snapshots), else 5.")
@click.option("--orphan-older-than-hours", type=click.FloatRange(min=0), default=None,
              help="For every table. Default: each table's policy (remove_orphan_files), else 72.")
@output_option
@handle_errors
def report_command(warehouse: str | None, catalog_properties: tuple[str, ...], catalog_name: str | None,
                   workers: int, project_dir: Path, profiles_dir: Path | None, target: str | None,
                   vars_yaml: str | None, history_table: str | None, out_dir: Path, days: float, estimates: bool,
                   expire_older_than_hours: float | None, expire_retain_last: int | None,
                   orphan_older_than_hours: float | None, output: str) -> None:
    """A report over the maintenance history and the tables' current health: trends, what each
    run did, failure and skip streaks, the worst tables first, the last run's backlog, and what
    expire_snapshots and remove_orphan_files would free (docs/report.md). Writes report.html
    (self-contained), report.json and PNG charts to --out; prints the ranking. Exit 0, 1 when the
    history cannot be read, 2 on usage errors."""
    import datetime as dt
    import os

    from dbt_iceberg_maint.invoke import default_profiles_dir
    from dbt_iceberg_maint.report.shell import (
        EstimateSettings,
        history_table_name,
        make_report,
        project_policies,
        write_report,
    )

    catalog = _open_metadata_catalog(warehouse, catalog_properties, catalog_name, project_dir, profiles_dir, target)
    profiles = profiles_dir or (default_profiles_dir(project_dir, os.environ)
                                if (project_dir / "dbt_project.yml").is_file() else None)
    name = history_table_name(history_table, project_dir, profiles, target, vars_yaml)
    # Each table's estimates assume its own policy's arguments unless an option sets them for all.
    all_given = None not in (expire_older_than_hours, expire_retain_last, orphan_older_than_hours)
    policies = project_policies(project_dir, profiles, target) if estimates and not all_given else {}
    settings = EstimateSettings(expire_older_than_hours, expire_retain_last, orphan_older_than_hours, policies)
    report = make_report(catalog, name, days, dt.datetime.now(dt.timezone.utc),  # type: ignore[arg-type]
                         settings if estimates else None, workers)
    written = write_report(report, out_dir)
    rows: list[dict[str, object]] = []
    for table in report.tables:
        estimate = table.estimates if table.estimates is not None and table.estimates.error is None else None
        rows.append({"rank": len(rows) + 1, "table": table.table, "score": int(table.score),
                     **{k: table.current.get(k) for k in ("small_files", "data_files", "delete_files", "snapshots")},
                     "failed_steps": table.failed_steps, "streak": table.longest_streak,
                     "expire_bytes": estimate.expire_bytes if estimate else None,
                     "orphan_bytes": estimate.orphan_bytes if estimate else None})
    if output == "json":
        echo_document(json.dumps(written.document, indent=2))
        return
    render(output, rows, REPORT_COLUMNS, title=f"Worst tables first ({report.rows} step(s) in {days:g} day(s) of "
                                               f"{name})", empty=f"no maintenance step in the last {days:g} day(s)",
           footer=f"wrote {written.html}, {written.json} and {len(written.pngs)} PNG chart(s)")


def _refuse_misplaced_options(dbt_args: tuple[str, ...]) -> None:
    """Exit 2 when the command's own options come after DBT_ARGS (they would go to dbt)."""
    context = click.get_current_context()
    misplaced = _own_options_among(context.command, dbt_args)
    if misplaced:
        fail(f"{', '.join(misplaced)} after the dbt arguments would go to dbt; give dbt-iceberg-maint's own "
             f"options first: dbt-iceberg-maint {context.info_name} [OPTIONS] [DBT_ARGS]...", EXIT_USAGE)


def _own_options_among(command: click.Command, dbt_args: tuple[str, ...]) -> list[str]:
    """`command`'s own options found among DBT_ARGS.

    `run` stops parsing its options at the first argument it does not know
    (allow_interspersed_args=False), so `run --select x --max-attempts 5` hands
    `--max-attempts 5` to dbt.
    """
    own = {name for param in command.params if isinstance(param, click.Option) for name in param.opts}
    return [flag for flag in (arg.split("=", 1)[0] for arg in dbt_args) if flag in own]


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
    from dbt_iceberg_maint.failure_log import failures_in

    rows = [
        {"source": failure.source, "status": failure.status, **asdict(verdict), "files": list(verdict.files)}
        for failure in failures_in(source.read())
        for verdict in (classify(failure.text),)
    ]
    render(output, rows, CLASSIFY_COLUMNS, title="Iceberg failure classification", empty="no failed results")


@main.command("lint")
@click.option("--project-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=Path("."), show_default=True)
@click.option("--profiles-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="Default: DBT_PROFILES_DIR, the project directory if it has profiles.yml, ~/.dbt.")
@click.option("--target", help="The dbt target (profile output); dbt parse connects to nothing.")
@click.option("--vars", "vars_yaml", help="dbt --vars for dbt parse (YAML), e.g. to enable var-gated models.")
@click.option("--run-results", "run_results", multiple=True,
              type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="A run_results.json with observed durations (repeatable), for orphan_window_too_short.")
@output_option_for("the findings by model, each with its fix")
@handle_errors
def lint_command(project_dir: Path, profiles_dir: Path | None, target: str | None, vars_yaml: str | None,
                 run_results: tuple[Path, ...], output: str) -> None:
    """Report models that will collide with Iceberg maintenance or each other (from dbt parse).

    Exit 1 when any error finding remains, else 0; 2 on usage errors (incl. a project dbt
    cannot parse). Rules and silencing: docs/lint.md.
    """
    from dbt_iceberg_maint.lint import render_text, run_lint

    result = run_lint(project_dir, profiles_dir, target, vars_yaml, run_results)
    render_report(output, result.to_json(), render_text(result))
    sys.exit(result.exit_code)
