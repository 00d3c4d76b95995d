"""Maintenance commands: `maintain` (the run-operation, or the fleet engine) and `leases`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dbt_iceberg_maint.cli.app import main
from dbt_iceberg_maint.cli.options import (
    DBT_ARGS_FOLLOW,
    MAINTENANCE_OPERATIONS,
    dbt_wrapper_options,
    refuse_misplaced_options,
    whole_number,
)
from dbt_iceberg_maint.cli.output import (
    EXIT_USAGE,
    console,
    fail,
    handle_errors,
    output_option,
    render,
    render_report,
)
from dbt_iceberg_maint.policy.selection import Shard
from dbt_iceberg_maint.text_tables import TABLE_COLUMN, Column

if TYPE_CHECKING:
    from rich.console import Console


@main.command("maintain", context_settings=DBT_ARGS_FOLLOW)
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
@dbt_wrapper_options
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
    from dbt_iceberg_maint.maintenance.run import maintenance_table, run_maintenance

    refuse_misplaced_options(dbt_args)
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

    workers = whole_number("--concurrency", concurrency)
    cap = whole_number("--max-files-per-table", max_files_per_table)
    catalog = (config_from_options(warehouse, catalog_properties, catalog_name or "local")
               if warehouse is not None or catalog_properties else None)
    with progress_display(None if output == "json" else console(stderr=True)) as progress:
        report = run_fleet(select or None, operations or None, concurrency=1 if workers is None else workers,
                           budget_s=budget, step_timeout_s=step_timeout, shard=shard, dry_run=dry_run, force=force,
                           as_of=as_of, project_dir=project_dir, profiles_dir=profiles_dir, dbt_args=dbt_args,
                           catalog=catalog, max_files_per_table=cap, resume=resume, progress=progress,
                           include_catalog=catalog_patterns)
    render_report(output, report.to_json(), fleet_table(report), report_path)
    sys.exit(report.exit_code)



LEASE_COLUMNS = (TABLE_COLUMN, Column("holder"), Column("acquired_at", "acquired at (UTC)"),
                 Column("expires_at", "expires at (UTC)"), Column("path"))


@main.command("leases", context_settings=DBT_ARGS_FOLLOW)
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
    from dbt_iceberg_maint.maintenance.leases import break_args, list_args, run_lease_command

    refuse_misplaced_options(dbt_args)
    if break_table is not None and schemas:
        fail("--break TABLE names its own lease log; give --schema only when listing", EXIT_USAGE)
    args = break_args(break_table) if break_table is not None else list_args(schemas)
    leases = run_lease_command(args, dbt_args=dbt_args, project_dir=project_dir, profiles_dir=profiles_dir)
    if break_table is not None:
        title, empty = "Broken lease", f"{break_table} had no current lease"
    else:
        title, empty = "Current leases", "no current leases"
    render(output, [lease.as_dict() for lease in leases], LEASE_COLUMNS, title=title, empty=empty)
