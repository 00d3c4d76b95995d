"""The demo: build the integration project on the embedded Spark + Iceberg runtime and report.

Structured as a list of steps so that later features (maintenance, conflict handling) add
steps rather than rewrite the flow.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from dbt_iceberg_maint.cli.output import console
from dbt_iceberg_maint.errors import IcebergMaintError
from dbt_iceberg_maint.maintenance.health import TableHealth, health_via_dbt
from dbt_iceberg_maint.maintenance.results import parse_result_lines
from dbt_iceberg_maint.maintenance.run import maintenance_table
from dbt_iceberg_maint.runtime.invoke import DbtInvocation, invoke_dbt
from dbt_iceberg_maint.runtime.project_files import integration_project
from dbt_iceberg_maint.runtime.spark import DEFAULT_CATALOG, WAREHOUSE_ENV, start_session
from dbt_iceberg_maint.text_tables import TABLE_COLUMN, Column
from dbt_iceberg_maint.text_tables import table as rich_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEMO_SCHEMA = "analytics"
DEMO_TABLES = ("events", "event_log", "user_summary", "raw_events")
BATCHES = 6
# The integration project's models read their batch from it when no `batch` var is given
# (integration_tests/dbt_project.yml): a new --vars value would make dbt parse the whole project
# again for each batch, a new environment value only the files that read it.
BATCH_ENV = "DBT_ICEBERG_MAINT_BATCH"


@dataclass(frozen=True)
class DemoContext:
    spark: SparkSession
    console: Console
    project_dir: Path
    env: dict[str, str]
    state: dict[str, Any] = field(default_factory=dict)  # what one step hands to a later one

    def dbt(self, *args: str, batch: int | None = None) -> DbtInvocation:
        env = self.env if batch is None else {**self.env, BATCH_ENV: str(batch)}
        invocation = invoke_dbt([*args, "--quiet"], self.project_dir, env=env)
        if not invocation.success:
            failures = "; ".join(f"{n.name}: {n.message}" for n in invocation.failed_nodes())
            raise IcebergMaintError(
                f"dbt {' '.join(args)} failed: {failures or invocation.exception}"
            )
        return invocation

    def tables(self) -> list[str]:
        return [f"{DEFAULT_CATALOG}.{DEMO_SCHEMA}.{name}" for name in DEMO_TABLES]


HEALTH_COLUMNS = (TABLE_COLUMN, *(Column(key, key.replace("_", " ").replace("data bytes", "bytes"),
                                           justify="right") for key in (
    "data_files", "small_files", "data_bytes", "delete_files", "records", "snapshots", "manifests", "partitions")))
CHANGE_FIELDS = ("data_files", "small_files", "max_small_files_in_partition", "snapshots", "manifests", "records")


def health_table(title: str, healths: Sequence[TableHealth]) -> Table:
    rows = [{**{c.key: getattr(h, c.key) for c in HEALTH_COLUMNS}, "table": h.table.split(".", 1)[-1]}
            for h in healths]
    return rich_table(rows, HEALTH_COLUMNS, title=title)


def step_build(ctx: DemoContext) -> None:
    ctx.console.rule("Build the integration project, one batch at a time")
    ctx.dbt("deps")
    ctx.dbt("build", batch=1)
    ctx.console.print("batch 1: dbt build (seeds, models, tests) [green]ok[/green]")
    for batch in range(2, BATCHES + 1):
        ctx.dbt("run", batch=batch)
        ctx.console.print(f"batch {batch}: dbt run (incremental MERGE / append) [green]ok[/green]")


def step_lint(ctx: DemoContext) -> None:
    """The conflict-risk lint of the demo's own project (dbt parse; no warehouse needed)."""
    from dbt_iceberg_maint.lint import render_text, run_lint

    ctx.console.rule("Conflict-risk lint: dbt-iceberg-maint lint --project-dir integration_tests")
    result = run_lint(ctx.project_dir)
    ctx.console.print(render_text(result), markup=False, highlight=False)
    ctx.console.print(f"lint exit code: {result.exit_code} (1 only when a finding is an error)")


# The models the demo maintains: the two maintained incremental models, and user_summary, whose
# policy switches maintenance off (it is rebuilt in full every run).
MAINTENANCE_SELECT = ("tag:maintained", "user_summary")


def health_change_table(before: Sequence[TableHealth], after: Sequence[TableHealth]) -> Table:
    columns = (TABLE_COLUMN, *(Column(key, key.replace("_", " ").replace("max small files in partition",
                                                                             "max small/partition"), justify="right")
                                  for key in CHANGE_FIELDS))
    rows = []
    for old, new in zip(before, after, strict=True):
        row: dict[str, object] = {"table": new.table.split(".", 1)[-1]}
        for key in CHANGE_FIELDS:
            a, b = getattr(old, key), getattr(new, key)
            row[key] = str(a) if a == b else f"{a} -> [bold]{b}[/bold]"
        rows.append(row)
    return rich_table(rows, columns, title="Iceberg table health before -> after maintenance")


def step_report_health(ctx: DemoContext) -> None:
    """Health from the package's table_health macro (dbt run-operation), the one source of truth."""
    ctx.console.rule("Table health (dbt run-operation dbt_iceberg_maint.table_health)")
    healths = health_via_dbt(ctx.tables(), ctx.project_dir, ctx.env)
    ctx.state["health_before"] = healths
    ctx.console.print(health_table("Iceberg table health (from metadata tables)", healths))


def step_table_properties(ctx: DemoContext) -> None:
    """Reconcile each maintained model's declared table properties (isolation, commit retries)."""
    ctx.console.rule("Table properties: dbt run-operation dbt_iceberg_maint.apply_table_properties")
    for name in ("events", "event_log"):
        relation = f"{DEMO_SCHEMA}.{name}"
        invocation = ctx.dbt("run-operation", "dbt_iceberg_maint.apply_table_properties",
                             "--args", json.dumps({"relation": relation}))
        for result in parse_result_lines(invocation.log_messages):
            changed = result.metrics.get("changed") or {}
            detail = ", ".join(f"{key}: {change['from']} -> {change['to']}" for key, change in changed.items())
            ctx.console.print(f"{name}: {result.status}" + (f" ({detail})" if detail else f" ({result.reason})"))


# The newest event days, still written after the batches (a late-arriving feed): hot partitions.
HOT_DAYS = ("2026-11-09", "2026-11-10")


def step_late_writes(ctx: DemoContext) -> None:
    """A writer keeps appending to the newest days after the batches: those partitions stay hot."""
    ctx.console.rule("Late writes: the newest days keep changing after the batches")
    ctx.state["quiet_since"] = datetime.now(timezone.utc)
    events = f"{DEFAULT_CATALOG}.{DEMO_SCHEMA}.events"
    for offset, day in enumerate(HOT_DAYS):
        row = f"({100001 + offset}, 1, 'view', timestamp '{day} 23:00:00', 1.00, 6)"
        ctx.spark.sql(f"insert into {events} values {row}")
    ctx.console.print(f"events: one late row each for {', '.join(HOT_DAYS)}; every other day is quiet since "
                      f"{ctx.state['quiet_since']:%H:%M:%S} UTC")


def step_maintenance(ctx: DemoContext) -> None:
    """The nightly job: every maintained model per its meta.iceberg_maint policy, judged as of a
    fixed time (`as_of`): as if it ran 6 h after the batches, when the days nobody wrote since
    are cold (events compacts only partitions quiet for cold_partitions_hours 6) and every
    snapshot is older than the policies' 1 h (expiry, which runs after compaction, also expires
    compaction's own commits down to retain_last)."""
    quiet_since: datetime = ctx.state.get("quiet_since") or datetime.now(timezone.utc)
    as_of = (quiet_since + timedelta(hours=6)).strftime("%Y-%m-%d %H:%M:%S")
    args = {"select": list(MAINTENANCE_SELECT), "as_of": as_of}
    ctx.console.rule(f"Maintenance: dbt run-operation iceberg_maintenance --args '{json.dumps(args)}'")
    files_before = _files_by_day(ctx)
    invocation = ctx.dbt("run-operation", "iceberg_maintenance", "--args", json.dumps(args))
    results = parse_result_lines(invocation.log_messages)
    if not results:
        raise IcebergMaintError("iceberg_maintenance reported no result lines")
    ctx.state["maintenance_results"] = results
    ctx.console.print(maintenance_table(results))
    files_after = _files_by_day(ctx)
    hot = {day: (files_before.get(day, 0), files_after.get(day, 0)) for day in HOT_DAYS}
    cold = [sum(files.get(day, 0) for day in files if day not in HOT_DAYS) for files in (files_before, files_after)]
    ctx.console.print(f"events data files: cold days {cold[0]} -> {cold[1]} (compacted); hot days "
                      + ", ".join(f"{day} {a} -> {b}" for day, (a, b) in hot.items())
                      + (" (left alone)" if all(a == b for a, b in hot.values()) else " (TOUCHED)"))


def _files_by_day(ctx: DemoContext) -> dict[str, int]:
    rows = ctx.spark.sql("select cast(partition.event_ts_day as string) as day, count(*) as n "
                         f"from {DEFAULT_CATALOG}.{DEMO_SCHEMA}.events.data_files group by 1").collect()
    return {row["day"]: int(row["n"]) for row in rows}


def step_health_after(ctx: DemoContext) -> None:
    ctx.console.rule("Table health after maintenance")
    before: Sequence[TableHealth] = ctx.state["health_before"]
    after = health_via_dbt([h.table for h in before], ctx.project_dir, ctx.env)
    ctx.console.print(health_change_table(before, after))


HEALTH_TEST = "events_healthy"  # iceberg_healthy on events, max_snapshots 4 (integration_tests/models/schema.yml)


def step_health_test(ctx: DemoContext) -> None:
    """The generic health test as a dbt user runs it: it fails before maintenance and passes after."""
    phase = "after" if "maintenance_results" in ctx.state else "before"
    ctx.console.rule(f"Health as a dbt test {phase} maintenance: dbt test --select {HEALTH_TEST}")
    invocation = invoke_dbt(["test", "--select", HEALTH_TEST, "--vars", "{demo_health_tests: true}",
                             "--store-failures", "--log-level", "none"], ctx.project_dir, env=ctx.env)
    [node] = [n for n in invocation.nodes if n.name == HEALTH_TEST]
    expected = "pass" if phase == "after" else "fail"
    if node.status != expected:
        raise IcebergMaintError(f"{HEALTH_TEST} should {expected} {phase} maintenance: {node.status} {node.message}")
    # The failing rows, as --store-failures keeps them: one per violated threshold.
    rows = ctx.spark.sql(f"select message from {DEFAULT_CATALOG}.{DEMO_SCHEMA}_dbt_test__audit.{HEALTH_TEST}"
                         ).collect() if expected == "fail" else []
    colour = "green" if expected == "pass" else "red"
    ctx.console.print(f"{HEALTH_TEST}: [{colour}]{node.status.upper()}[/{colour}]"
                      + "".join(f"\n  {row['message']}" for row in rows))


HISTORY_COLUMNS = (TABLE_COLUMN, Column("operation"), Column("status"), Column("duration_ms", "ms", justify="right"),
                   Column("files", "data files before -> after", justify="right"),
                   Column("snapshots", "snapshots before -> after", justify="right"),
                   Column("rewritten", "bytes rewritten", justify="right"))


def step_history(ctx: DemoContext) -> None:
    """What the nightly job wrote to the maintenance history table (docs/history.md)."""
    relation = f"{DEFAULT_CATALOG}.{DEMO_SCHEMA}.iceberg_maint_history"
    ctx.console.rule(f"Maintenance history: select ... from {DEMO_SCHEMA}.iceberg_maint_history")
    rows = ctx.spark.sql(
        "select table_name, operation, status, duration_ms, "
        "get_json_object(health_before, '$.data_files') as files_before, "
        "get_json_object(health_after, '$.data_files') as files_after, "
        "get_json_object(health_before, '$.snapshots') as snapshots_before, "
        "get_json_object(health_after, '$.snapshots') as snapshots_after, "
        "get_json_object(output, '$.rewritten_bytes_count') as rewritten "
        f"from {relation} where path = 'iceberg_maintenance' and status != 'skipped' "
        "order by started_at").collect()
    if not rows:
        raise IcebergMaintError(f"iceberg_maintenance wrote no executed step to {relation}")
    table = rich_table([{"table": row["table_name"].split(".", 1)[-1], "operation": row["operation"],
                         "status": row["status"], "duration_ms": row["duration_ms"],
                         "files": f"{row['files_before'] or '-'} -> {row['files_after'] or '-'}",
                         "snapshots": f"{row['snapshots_before'] or '-'} -> {row['snapshots_after'] or '-'}",
                         "rewritten": f"{int(row['rewritten']):,}" if row["rewritten"] else ""} for row in rows],
                       HISTORY_COLUMNS, title="iceberg_maint_history: the executed steps of the nightly run")
    ctx.console.print(table)
    skipped = ctx.spark.sql(f"select count(*) from {relation} where status = 'skipped'").collect()[0][0]
    ctx.console.print(f"plus {skipped} skipped step(s) with their reasons; one row per step, written by SQL alone")


def step_report(ctx: DemoContext) -> None:
    """`dbt-iceberg-maint report` over the history and the tables' metadata (docs/report.md)."""
    from dbt_iceberg_maint.metadata.catalog import config_from_options, open_catalog
    from dbt_iceberg_maint.report.shell import EstimateSettings, make_report, write_report

    out = Path(ctx.env[WAREHOUSE_ENV]).parent / "report"
    ctx.console.rule(f"Report: dbt-iceberg-maint report --out {out}")
    catalog = open_catalog(config_from_options(ctx.env[WAREHOUSE_ENV], (), DEFAULT_CATALOG))
    report = make_report(catalog, f"{DEMO_SCHEMA}.iceberg_maint_history", 1, datetime.now(timezone.utc),
                         EstimateSettings())
    written = write_report(report, out)
    for rank, table in enumerate(report.tables, 1):
        ctx.console.print(f"{rank}. {table.table}: score {table.score:g}, {table.failed_steps} failed step(s), "
                          f"longest streak {table.longest_streak}")
    ctx.console.print(f"wrote {written.html} (self-contained: open it in a browser), {written.json} and "
                      f"{len(written.pngs)} PNG chart(s)")


def step_conflict_recovery(ctx: DemoContext) -> None:
    """MERGE models lose to a compaction run by another job; only safe re-runs happen: the
    idempotent one by its idempotency, the `idempotent: false` one because landed verification
    proves from its snapshot log that its MERGE did not land."""
    from dbt_iceberg_maint.runner import exponential_backoff, report_table, run_dbt_with_retries
    from dbt_iceberg_maint.runtime._conflict_gate import SCENARIO_MODELS, ConflictGate, add_small_files, compaction_sql
    from dbt_iceberg_maint.runtime.spark import CatalogSpec, register_catalog

    ctx.console.rule("Commit conflicts: classify, re-run only what is safe (dbt-iceberg-maint run)")
    warehouse = Path(ctx.env[WAREHOUSE_ENV])
    gate = ConflictGate(warehouse.parent / "conflict_gate")
    gate.register(ctx.spark)
    scenario = "{conflict_scenario: true, batch: %d}"
    ctx.dbt("build", "--select", "raw_events", *SCENARIO_MODELS, "--vars", scenario % 1)
    tables = {model: f"{DEFAULT_CATALOG}.{DEMO_SCHEMA}.{model}" for model in SCENARIO_MODELS}
    maintenance = ctx.spark.newSession()  # the nightly compaction: another job, its own session
    register_catalog(maintenance, CatalogSpec(warehouse=str(warehouse)))
    commits = []
    for model, table in tables.items():
        add_small_files(ctx.spark, table)
        gate.arm(model)
        commits.append(gate.commit_when_reached(model, maintenance, compaction_sql(table)))
    ctx.console.print("conflict_merge (merge on event_id, idempotent) and conflict_merge_unsafe (meta "
                      "idempotent: false) each MERGE batch 2 while rewrite_data_files compacts their table. "
                      "Spark logs each losing MERGE's aborted write as two ERROR lines on stderr (ReplaceDataExec: "
                      "Data source write support ... is aborting / aborted): they are these staged conflicts, "
                      "expected; the table below reports them.")
    report = run_dbt_with_retries(
        ["--select", "path:models/conflicts", "--vars", scenario % 2, "--log-level", "none"],
        project_dir=ctx.project_dir, env=ctx.env,
        backoff=lambda attempt: exponential_backoff(attempt, base_seconds=0.5),
    )
    for commit in commits:
        commit.join(timeout=120)
    for model in SCENARIO_MODELS:
        gate.disarm(model)
    ctx.console.print(report_table(report))
    merged, verified = (ctx.spark.sql(
        f"select count(*) as n, count(distinct event_id) as ids from {tables[model]}").collect()[0]
        for model in SCENARIO_MODELS)
    recovered = report.node("conflict_merge")
    unsafe = report.node("conflict_merge_unsafe")
    sql_error = report.node("conflict_sql_error")
    landed = unsafe.landed
    if not (recovered.succeeded and len(recovered.attempts) == 2 and merged["n"] == merged["ids"]
            and unsafe.succeeded and len(unsafe.attempts) == 2 and landed is not None
            and landed.landed is False and verified["n"] == verified["ids"]
            and not sql_error.succeeded and len(sql_error.attempts) == 1):
        raise IcebergMaintError(f"the conflict scenario did not go as expected: {report.to_json()}")
    ctx.console.print(
        f"conflict_merge: {recovered.attempts[0].kind} -> re-run -> [green]success[/green]; "
        f"{merged['n']} rows, {merged['ids']} distinct event_ids (no duplicates)\n"
        f"conflict_merge_unsafe: {unsafe.attempts[0].kind} -> write verified not landed -> re-run -> "
        f"[green]success[/green]; {verified['n']} rows, {verified['ids']} distinct event_ids; snapshot log: "
        f"{landed.reason}\n"
        f"conflict_sql_error: {sql_error.attempts[0].kind} -> [yellow]not re-run[/yellow]: {sql_error.not_rerun_reason}"
    )


DEFAULT_STEPS: tuple[Callable[[DemoContext], None], ...] = (
    step_build,
    step_lint,
    step_report_health,
    step_table_properties,
    step_late_writes,
    step_health_test,
    step_maintenance,
    step_history,
    step_health_after,
    step_health_test,
    step_report,
    step_conflict_recovery,
)


def run_demo(
    workdir: Path,
    out: Console | None = None,
    steps: Sequence[Callable[[DemoContext], None]] = DEFAULT_STEPS,
) -> None:
    out = out or console()
    warehouse = workdir / "warehouse"
    shutil.rmtree(warehouse, ignore_errors=True)  # every demo starts from an empty warehouse
    out.print(f"Starting local Spark with an Iceberg catalog in {warehouse}")
    spark = start_session(warehouse)
    spark.sparkContext.setLogLevel("ERROR")
    ctx = DemoContext(
        spark=spark,
        console=out,
        project_dir=integration_project(workdir),
        env={WAREHOUSE_ENV: str(warehouse.resolve()), "DBT_ICEBERG_MAINT_SCHEMA": DEMO_SCHEMA},
    )
    for step in steps:
        step(ctx)
