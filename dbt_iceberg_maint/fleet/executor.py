"""The fleet engine's shell: plan the selection from metadata, then run each table's due steps
through the `execute_maintenance_steps` run-operation on a pool of workers (pool.py; scheduler.py
decides what runs next, when the budget closes and what is backlog), record what no macro
recorded, and summarise the run in a FleetReport.

Every worker runs with the same DBT_ICEBERG_MAINT_RUN_ID, so the engine re-enters the leases it
holds (macros/internal/lease.sql) and no other job can overlap it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.errors import PolicyError, TableReadError, UsageError
from dbt_iceberg_maint.fleet import scheduler
from dbt_iceberg_maint.fleet.pool import Pool, Progress, Schedule
from dbt_iceberg_maint.fleet.scheduler import FleetReport, Step, StepOutcome, TableWork
from dbt_iceberg_maint.fleet.steps import recording_problems, unrecorded_args
from dbt_iceberg_maint.fleet.workers import InProcessWorker, SubprocessWorker, Worker
from dbt_iceberg_maint.maintenance.leases import RUN_ID_ENV, create_logs_args
from dbt_iceberg_maint.metadata.catalog import CatalogConfig
from dbt_iceberg_maint.policy import engine
from dbt_iceberg_maint.policy.selection import Shard, check_catalog_patterns
from dbt_iceberg_maint.protocol import BACKLOG_REASON_PREFIX
from dbt_iceberg_maint.runtime.invoke import DbtInvocation, default_profiles_dir


def _option_value(args: Sequence[str], name: str) -> str | None:
    """The value of dbt option `name` among DBT_ARGS (`--name value` or `--name=value`)."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _capped_overrides(raw_policy: Any, max_files: int | None) -> Any:
    """Policy overrides that cap a compaction at `max_files` files (rewrite_data_files'
    `max-files-to-rewrite`), unless the policy's own options set a cap already."""
    if max_files is None:
        return None
    section = raw_policy.get("compaction") if isinstance(raw_policy, Mapping) else None
    options = section.get("options") if isinstance(section, Mapping) else None
    options = dict(options) if isinstance(options, Mapping) else {}
    if "max-files-to-rewrite" in options:
        return None
    return {"compaction": {"options": {**options, "max-files-to-rewrite": str(max_files)}}}


def plan_fleet(catalog: Any, targets: Sequence[Any], operations: Sequence[str] | None, *, project_enabled: bool,
               at: dt.datetime | None, force: bool, max_files_per_table: int | None,
               workers: int = 8) -> list[TableWork]:
    from dbt_iceberg_maint.metadata import planner, reader

    def one(target: Any) -> TableWork:
        name = target.ref.qualified
        figures: dict[str, Any] = {}
        try:
            table, table_format = planner.load_for_planning(catalog, target.ref.name)
            plan, figures = planner.plan_table_figures(
                target, table, operations, project_enabled, _capped_overrides(target.raw_policy, max_files_per_table),
                at, force, table_format)
        except (TableReadError, PolicyError) as exc:
            plan = planner.failed_plan(target, operations, str(exc))
        except Exception as exc:  # unreadable manifests: a per-table error
            plan = planner.failed_plan(target, operations, f"{type(exc).__name__}: {exc}")
        steps = tuple(Step(p.table, p.operation, "planned" if p.status == "dry_run" else p.status, p.reason, p.sql,
                           p.model, *((figures.get("eligible_files"), figures.get("eligible_bytes"))
                                      if p.operation == "rewrite_data_files" and p.status == "dry_run"
                                      else (None, None)))
                      for p in plan)
        snapshot_id = figures.get("snapshot_id")
        record = None if force else {"policy": target.raw_policy, "snapshot_id": snapshot_id}
        return TableWork(name, target.model, steps, figures, record, target.ref.name)

    return reader.concurrently(list(targets), one, workers)



@dataclass(frozen=True)
class _Inputs:
    """run_fleet's arguments, checked: every one is checked before anything runs."""

    concurrency: int
    budget_s: float | None
    timeout_s: float | None
    max_files: int | None
    shard: Shard | None
    at: dt.datetime | None
    requested: list[str]
    previous: dict[str, Any] | None  # the resumed report
    settled: frozenset[tuple[str, str]]  # the steps it settled


def _check_inputs(operations: Sequence[str] | None, concurrency: int, budget_s: float | str | None,
                  step_timeout_s: float | str | None, max_files_per_table: int | None,
                  include_catalog: Sequence[str], shard: str | None, as_of: str | None,
                  resume: str | os.PathLike[str] | None) -> _Inputs:
    from dbt_iceberg_maint.metadata import planner

    checked_concurrency = scheduler.check_concurrency(concurrency)
    budget = scheduler.parse_duration("--budget", budget_s)
    timeout = scheduler.parse_duration("--step-timeout", step_timeout_s)
    max_files = scheduler.check_cap("--max-files-per-table", max_files_per_table)
    if pattern_errors := check_catalog_patterns(include_catalog):
        raise UsageError("; ".join(pattern_errors))
    shard_value = Shard.parse(shard) if shard else None
    at = planner.parse_as_of(as_of)
    try:
        requested = engine.requested_operations(list(operations) if operations else None)
    except PolicyError as exc:
        raise UsageError(str(exc)) from exc
    previous: dict[str, Any] | None = None
    settled: frozenset[tuple[str, str]] = frozenset()
    if resume is not None:
        try:
            previous = json.loads(Path(resume).read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"--resume {resume}: cannot read the report: {exc}") from exc
        settled = scheduler.settled_keys(previous)
    return _Inputs(checked_concurrency, budget, timeout, max_files, shard_value, at, requested, previous, settled)


@dataclass(frozen=True)
class _Project:
    """Where the run's dbt invocations run and what they are given."""

    project: Path
    profiles: Path
    target: str | None
    env: Mapping[str, str] | None  # run_fleet's own `env` (without os.environ)
    dbt_args: tuple[str, ...]  # what every worker's invocation ends with (`--target` among them)
    vars_yaml: str | None
    config: CatalogConfig
    run_id: str

    @property
    def worker_env(self) -> dict[str, str]:
        return {**(self.env or {}), RUN_ID_ENV: self.run_id}


def _project(project_dir: str | os.PathLike[str], profiles_dir: str | os.PathLike[str] | None, target: str | None,
             dbt_args: Sequence[str], env: Mapping[str, str] | None, catalog: CatalogConfig | None,
             previous: Mapping[str, Any] | None) -> _Project:
    from dbt_iceberg_maint.metadata.catalog import config_from_profile
    from dbt_iceberg_maint.runtime.embedded_profile import prepare_profile_catalog

    environ = {**os.environ, **(env or {})}
    project = Path(project_dir).resolve()
    profiles = Path(profiles_dir).resolve() if profiles_dir else default_profiles_dir(project, environ).resolve()
    target = target or _option_value(dbt_args, "--target")
    worker_args = [*dbt_args, *(["--target", target] if target and not _option_value(dbt_args, "--target") else [])]
    if catalog is None:  # the profile's catalog, as its dbt invocations will find it (embedded_profile)
        prepare_profile_catalog(project, profiles, target, environ)
    config = catalog or config_from_profile(project, profiles, target, environ)
    run_id = (environ.get(RUN_ID_ENV) or (previous or {}).get("run_id")
              or f"dbt-iceberg-maint-{uuid.uuid4().hex[:16]}")
    return _Project(project, profiles, target, env, tuple(worker_args), _option_value(dbt_args, "--vars"), config,
                    run_id)


@dataclass(frozen=True)
class _Plan:
    """The selection planned from metadata, worst table first, and what the plan settled."""

    ordered: tuple[TableWork, ...]
    coverage: dict[str, Any] | None  # the catalog tables no dbt node declares (`include_catalog`)
    planning_s: float
    # Steps the plan settled: skipped and failed ones (not due, disabled, no table), reported as planned.
    settled: tuple[StepOutcome, ...]
    due: tuple[Step, ...]
    history_on: bool
    nodes: Mapping[str, str]  # table → its dbt node, for the history rows the engine records
    catalog: Any  # the metadata catalog it was planned from (MetadataCatalog)

    @property
    def records(self) -> dict[str, Any]:
        return {t.table: t.record for t in self.ordered}


def _plan(where: _Project, inputs: _Inputs, select: Sequence[str] | None, include_catalog: Sequence[str],
          force: bool, begun: float) -> _Plan:
    from dbt_iceberg_maint.metadata import project
    from dbt_iceberg_maint.metadata.catalog import open_catalog

    manifest = project.load_manifest(where.project, where.profiles, where.target, env=where.env,
                                     vars_yaml=where.vars_yaml)
    targets = project.iceberg_models(manifest, list(select) if select else None, inputs.shard)
    metadata = open_catalog(where.config)
    coverage = None
    if include_catalog:
        extra, found = project.catalog_targets(
            metadata, manifest, include_catalog,
            project.project_var(where.project, where.vars_yaml, project.CATALOG_POLICY_VAR), inputs.shard)
        targets += extra
        coverage = found.to_dict()
    tables = plan_fleet(metadata, targets, inputs.requested, at=inputs.at, force=force,
                        project_enabled=project.project_enabled(where.project, where.vars_yaml),
                        max_files_per_table=inputs.max_files)
    if inputs.previous is not None:
        tables = list(scheduler.without_settled(tables, inputs.settled))
    ordered = scheduler.order_tables(tables)
    planning_s = time.monotonic() - begun
    # Every step gets its history row: the ones no macro ran are recorded at the end (record_args).
    history_on = project.project_var(where.project, where.vars_yaml, "dbt_iceberg_maint_history_enabled") is not False
    return _Plan(ordered, coverage, planning_s,
                 tuple(StepOutcome(s.table, s.operation, s.status, s.reason or None, s.sql)
                       for t in ordered for s in t.steps if s.status != "planned"),
                 tuple(s for t in ordered for s in t.due), history_on,
                 {t.table: t.model for t in ordered if t.model and not t.model.startswith("catalog:")}, metadata)


def _report_unrun(where: _Project, inputs: _Inputs, plan: _Plan, dry_run: bool,
                  resumed_from: str | None) -> FleetReport:
    """A run that starts no step (a dry run, or nothing due): its report, the plan's skips recorded."""
    outcomes = [*plan.settled, *(StepOutcome(s.table, s.operation, "dry_run", f"dry run: {s.reason}", s.sql,
                                             eligible_files=s.eligible_files, eligible_bytes=s.eligible_bytes)
                                  for s in plan.due)]
    recording = unrecorded_args(outcomes, plan.nodes, where.dbt_args) if plan.history_on and not dry_run else None
    only = (InProcessWorker(1, where.worker_env, where.project, where.profiles, where.dbt_args)
            .run(recording, None).invocation if recording else None)
    return FleetReport(where.run_id, tuple(outcomes), plan.ordered, inputs.concurrency, "none", inputs.budget_s,
                       inputs.timeout_s, plan.planning_s, 0.0, int(only is not None),
                       len(only.sql_statements) if only else 0, dry_run=dry_run, resumed_from=resumed_from,
                       catalog=plan.coverage, history_problems=recording_problems(only))


def _start_pool(where: _Project, inputs: _Inputs, plan: _Plan, work_dir: Path, begun: float,
                progress: Progress | None) -> Pool:
    """The workers (dbt in this process at concurrency 1 without a step timeout, else worker
    processes) and the schedule they share."""
    from dbt_iceberg_maint.metadata import project

    workers: list[Worker] = [
        InProcessWorker(1, where.worker_env, where.project, where.profiles, where.dbt_args)
        if inputs.concurrency == 1 and inputs.timeout_s is None
        else SubprocessWorker(i + 1, where.worker_env, where.project, where.profiles, where.dbt_args, work_dir,
                              project.target_dir(where.project, where.env) / project.PARSE_STATE)
        for i in range(inputs.concurrency)]
    schedule = Schedule(plan.ordered, inputs.concurrency, inputs.budget_s, inputs.timeout_s, begun, progress)
    # Workers that start together would race to create a namespace's lease log on its first lease.
    namespaces = {t.table.rsplit(".", 1)[0] for t in plan.ordered if t.due}
    prepare = create_logs_args(namespaces) if len(workers) > 1 and namespaces else None
    return Pool(workers, schedule, plan.records, where.run_id, where.dbt_args, inputs.timeout_s, prepare,
                _health_reader(plan))


def _health_reader(plan: _Plan) -> Callable[[str], dict[str, Any] | None]:
    """The health after a step, read from the table's metadata file (the pool completes the
    deferred history rows with it); None when it cannot be read (the row then has none)."""
    from dbt_iceberg_maint.metadata.health import step_health

    names = {t.table: t.catalog_name or t.table for t in plan.ordered}

    def read(table: str) -> dict[str, Any] | None:
        try:
            return step_health(plan.catalog.load(names.get(table, table)))
        except Exception:  # an unreadable table: its row goes without the health, the step stands
            return None

    return read


def _backlog(plan: _Plan, pool: Pool, budget_s: float | None) -> list[StepOutcome]:
    """The steps the budget left unstarted."""
    left = [s for t in plan.ordered for s in pool.schedule.queues.get(t.table, [])]
    return [StepOutcome(s.table, s.operation, "backlog",
                        f"{BACKLOG_REASON_PREFIX} not started, the budget of {budget_s or 0:g} s closed",
                        s.sql, eligible_files=s.eligible_files, eligible_bytes=s.eligible_bytes) for s in left]


def _record(where: _Project, plan: _Plan, pool: Pool, outcomes: Sequence[StepOutcome]) -> DbtInvocation | None:
    """The history rows of the outcomes no macro recorded, written by the first worker."""
    recording = (unrecorded_args(outcomes, plan.nodes, where.dbt_args, pool.history_ready)
                 if plan.history_on else None)
    if not recording:
        return None
    recorded = pool.workers[0].run(recording, None).invocation
    pool.note_checks(recorded)  # the deferred rows written after it need not check the table again
    pool.invocations += 1
    pool.statements += len(recorded.sql_statements) if recorded else 0
    return recorded


def _close(pool: Pool, work_dir: Path) -> None:
    for worker in pool.workers:
        worker.close()
    # The workers' folder (their dbt targets, logs and job files) is kept only when a worker
    # died or the run stopped: a reason then names a log in it.
    if not pool.errors and all(o.kind != "worker_died" for o in pool.schedule.outcomes):
        shutil.rmtree(work_dir, ignore_errors=True)


def _summarise(where: _Project, inputs: _Inputs, plan: _Plan, pool: Pool, outcomes: Sequence[StepOutcome],
               execution_s: float, recorded: DbtInvocation | None, resumed_from: str | None) -> FleetReport:
    """The report: every outcome in the plan's order (tables worst first, steps canonical)."""
    order = {(s.table, s.operation): i for i, s in enumerate(s for t in plan.ordered for s in t.steps)}
    every = sorted(outcomes, key=lambda o: order.get((o.table, o.operation), 0))
    return FleetReport(where.run_id, tuple(every), plan.ordered, inputs.concurrency, pool.workers[0].mode,
                       inputs.budget_s, inputs.timeout_s, plan.planning_s, execution_s, pool.invocations,
                       pool.statements, resumed_from=resumed_from, catalog=plan.coverage,
                       history_problems=tuple(dict.fromkeys([*pool.history_problems, *recording_problems(recorded)])))


def run_fleet(
    select: Sequence[str] | None = None,
    operations: Sequence[str] | None = None,
    *,
    concurrency: int = 1,
    budget_s: float | str | None = None,
    step_timeout_s: float | str | None = None,
    shard: str | None = None,
    dry_run: bool = False,
    force: bool = False,
    as_of: str | None = None,
    project_dir: str | os.PathLike[str] = ".",
    profiles_dir: str | os.PathLike[str] | None = None,
    target: str | None = None,
    dbt_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    catalog: CatalogConfig | None = None,
    max_files_per_table: int | None = None,
    resume: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    include_catalog: Sequence[str] = (),
) -> FleetReport:
    """Plan the selection from metadata, then maintain it worst table first on `concurrency`
    workers; no step starts `budget_s` after the run began (the rest is backlog); a step running
    past `step_timeout_s` is stopped. `catalog`: the Iceberg catalog to plan from (default: the
    profile's server_side_parameters). `resume`: a previous report; the steps it settled are not
    taken up again, and its run id is re-used (its leases are re-entered). `include_catalog`:
    'namespace.table' patterns of catalog tables no dbt node declares, maintained too (with the
    var dbt_iceberg_maint_catalog_policy)."""
    begun = time.monotonic()
    inputs = _check_inputs(operations, concurrency, budget_s, step_timeout_s, max_files_per_table, include_catalog,
                           shard, as_of, resume)
    where = _project(project_dir, profiles_dir, target, dbt_args, env, catalog, inputs.previous)
    plan = _plan(where, inputs, select, include_catalog, force, begun)
    resumed_from = None if resume is None else str(resume)
    if dry_run or not plan.due:
        return _report_unrun(where, inputs, plan, dry_run, resumed_from)

    work_dir = Path(tempfile.mkdtemp(prefix="dbt-iceberg-maint-fleet-"))
    pool = _start_pool(where, inputs, plan, work_dir, begun, progress)
    execution_started = time.monotonic()
    try:
        pool.run()  # the workers claim and run the due steps until none is left or the budget closed
        outcomes = [*plan.settled, *pool.schedule.outcomes, *_backlog(plan, pool, inputs.budget_s)]
        recorded = _record(where, plan, pool, outcomes)
    finally:
        pool.give_back_kept()
        _close(pool, work_dir)
    return _summarise(where, inputs, plan, pool, outcomes, time.monotonic() - execution_started, recorded,
                      resumed_from)
