"""Commands that read Iceberg metadata without Spark: `health`, `plan` and `report`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from dbt_iceberg_maint.cli.app import main
from dbt_iceberg_maint.cli.options import MAINTENANCE_OPERATIONS, catalog_options, open_metadata_catalog
from dbt_iceberg_maint.cli.output import (
    EXIT_FAILURES,
    EXIT_USAGE,
    echo_document,
    fail,
    handle_errors,
    output_option,
    output_option_with_html,
    print_text,
    render,
)
from dbt_iceberg_maint.policy.selection import Shard
from dbt_iceberg_maint.text_tables import TABLE_COLUMN, Column


@main.command("health")
@click.argument("tables", nargs=-1)
@catalog_options
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
    from dbt_iceberg_maint.metadata.health import read_health

    catalog = open_metadata_catalog(warehouse, catalog_properties, catalog_name, project_dir, profiles_dir, target)
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
@catalog_options
@click.option("--project-dir", type=click.Path(file_okay=False, exists=True, path_type=Path), default=Path("."),
              show_default=True)
@click.option("--profiles-dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--target", default=None)
@click.option("--select", "select", multiple=True,
              help="A model name, tag:<tag>, source:<source> or source:<source>.<table> (repeatable).")
@click.option("--shard", default=None, help="'K/N': only the K-th of N disjoint shards of the selection.")
@click.option("--operation", "operations", multiple=True,
              type=click.Choice(MAINTENANCE_OPERATIONS))
@click.option("--parse", "parse", is_flag=True,
              help="Run `dbt parse` even when target/manifest.json exists (always done with --vars).")
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
    from dbt_iceberg_maint.metadata import planner, project, report
    from dbt_iceberg_maint.policy.selection import check_catalog_patterns

    errors = check_catalog_patterns(catalog_patterns)
    if errors:  # before the catalog or dbt is touched
        fail("; ".join(errors), EXIT_USAGE)
    shard_ = Shard.parse(shard) if shard else None
    catalog = open_metadata_catalog(warehouse, catalog_properties, catalog_name, project_dir, profiles_dir, target)
    manifest = project.load_manifest(project_dir, profiles_dir, target, parse, vars_yaml=vars_yaml)
    targets = project.iceberg_models(manifest, list(select) or None, shard_)
    found = None
    if catalog_patterns:
        extra, found = project.catalog_targets(catalog, manifest, catalog_patterns,  # type: ignore[arg-type]
                                               project.project_var(project_dir, vars_yaml, project.CATALOG_POLICY_VAR),
                                               shard_)
        targets += extra
    plan = planner.plan_models(catalog, targets, list(operations) or None,  # type: ignore[arg-type]
                               project_enabled=project.project_enabled(project_dir, vars_yaml),
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
@catalog_options
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

    from dbt_iceberg_maint.report.shell import (
        EstimateSettings,
        history_table_name,
        make_report,
        project_policies,
        write_report,
    )
    from dbt_iceberg_maint.runtime.invoke import default_profiles_dir

    catalog = open_metadata_catalog(warehouse, catalog_properties, catalog_name, project_dir, profiles_dir, target)
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
