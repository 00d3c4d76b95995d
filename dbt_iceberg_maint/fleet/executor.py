"""The fleet engine's shell: plan the selection from metadata, then run each table's due steps
through the `execute_maintenance_steps` run-operation on a pool of workers (scheduler.py decides
what runs next, when the budget closes and what is backlog).

Workers are dbt processes (worker.py): dbtRunner is not safe for concurrent use in one process.
At concurrency 1 without a step timeout the one worker is this process (invoke_dbt in-process),
as `maintain` always was. Every worker runs with the same DBT_ICEBERG_MAINT_RUN_ID, so the
engine re-enters the leases it holds (macros/internal/lease.sql) and no other job can overlap it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any

from dbt_iceberg_maint import processes
from dbt_iceberg_maint.errors import (
    IcebergMaintError,
    PolicyError,
    TableReadError,
    UsageError,
)
from dbt_iceberg_maint.fleet import scheduler
from dbt_iceberg_maint.fleet.scheduler import FleetReport, Step, StepOutcome, TableWork
from dbt_iceberg_maint.fleet.worker import invocation_from_dict
from dbt_iceberg_maint.invoke import DbtInvocation, ParsedManifests, default_profiles_dir, invoke_dbt
from dbt_iceberg_maint.leases import LEASE_KEPT, RUN_ID_ENV, create_logs_args, give_back_args
from dbt_iceberg_maint.maintenance import (
    error_text,
    interrupted_step,
    marker_messages,
    needs_probe,
    probed,
    record_args,
)
from dbt_iceberg_maint.metadata.catalog import CatalogConfig
from dbt_iceberg_maint.policy import engine
from dbt_iceberg_maint.policy.selection import Shard, check_catalog_patterns
from dbt_iceberg_maint.protocol import BACKLOG_REASON_PREFIX
from dbt_iceberg_maint.results import MaintenanceResult, history_problems, history_written, parse_result_lines
from dbt_iceberg_maint.rewrite_probe import probe_args

PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent
POLL_S = 0.05
WORKER_START_TIMEOUT_S = 120.0
# What the progress callback receives after every change: counts and the ETA in seconds.
Progress = Callable[[Mapping[str, Any]], None]


def _utc(epoch_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s, dt.timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def _option_value(args: Sequence[str], name: str) -> str | None:
    """The value of dbt option `name` among DBT_ARGS (`--name value` or `--name=value`)."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


# ---- planning ----

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
    from dbt_iceberg_maint.metadata import planner

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
        return TableWork(name, target.model, steps, figures, record)

    return planner.concurrently(list(targets), one, workers)


# ---- workers ----

@dataclass(frozen=True)
class Ran:
    invocation: DbtInvocation | None
    timed_out: bool = False
    error: str | None = None  # the worker died or could not be reached


class InProcessWorker:
    """The one worker of a run at concurrency 1 without a step timeout: dbt in this process.
    `flags`: the dbt flags every invocation of the run ends with (`--target`, `--vars`): the
    project is parsed once with them and its manifest given to every invocation."""

    mode = "in_process"

    def __init__(self, index: int, env: Mapping[str, str], project_dir: Path, profiles_dir: Path,
                 flags: Sequence[str]) -> None:
        self.index, self.env, self.project_dir, self.profiles_dir = index, dict(env), project_dir, profiles_dir
        self.flags = list(flags)
        self.manifests = ParsedManifests()

    def run(self, args: Sequence[str], timeout_s: float | None) -> Ran:
        manifest = self.manifests.get(self.project_dir, self.profiles_dir, self.flags, self.env)
        return Ran(invoke_dbt(list(args), self.project_dir, self.profiles_dir, self.env, manifest=manifest))

    def start(self) -> None:
        self.manifests.get(self.project_dir, self.profiles_dir, self.flags, self.env)

    def close(self) -> None:
        pass


class SubprocessWorker:
    """A worker process (worker.py) in its own process group, started on first use and again
    after a timeout killed it."""

    mode = "subprocess"

    def __init__(self, index: int, env: Mapping[str, str], project_dir: Path, profiles_dir: Path,
                 flags: Sequence[str], work_dir: Path, parse_state: Path | None = None,
                 parse_once: bool = True) -> None:
        self.index, self.project_dir, self.profiles_dir, self.work_dir = index, project_dir, profiles_dir, work_dir
        self.flags = list(flags)
        # False: every job parses (partially) with its own flags, for jobs whose --vars differ.
        self.parse_once = parse_once
        # Its own dbt target and log folders: concurrent dbt processes must not write one
        # partial_parse.msgpack or manifest.json at once. It starts from a copy of the project's
        # `parse_state` (partial_parse.msgpack) so that its one parse is partial, not full.
        target = work_dir / f"target-{index}"
        if parse_state is not None and parse_state.is_file():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(parse_state, target / parse_state.name)
        self.env = {**os.environ, **env, "DBT_TARGET_PATH": str(target),
                    "DBT_LOG_PATH": str(work_dir / f"logs-{index}"),
                    "PYTHONPATH": os.pathsep.join([str(PACKAGE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
        self.process: subprocess.Popen[str] | None = None
        self.log: IO[str] | None = None
        self.jobs = 0
        self.starts = 0

    def _start(self) -> subprocess.Popen[str]:
        """The worker process, started (and waited for: dbt imported) when there is none."""
        if self.process is None or self.process.poll() is not None:
            if self.log is None:
                self.log = open(self.work_dir / f"worker-{self.index}.log", "a")  # noqa: SIM115 (closed in close())
            self.starts += 1
            ready = self.work_dir / f"ready-{self.index}-{self.starts}"
            preload = {"project_dir": str(self.project_dir), "profiles_dir": str(self.profiles_dir),
                       "flags": self.flags}
            self.process = subprocess.Popen([sys.executable, "-m", "dbt_iceberg_maint.fleet.worker", str(ready),
                                             *([json.dumps(preload)] if self.parse_once else [])],
                                            stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT,
                                            env=self.env, cwd=str(self.project_dir), text=True,
                                            start_new_session=True)
            deadline = time.monotonic() + WORKER_START_TIMEOUT_S
            while not ready.exists() and self.process.poll() is None and time.monotonic() < deadline:
                time.sleep(POLL_S)
        return self.process

    def start(self) -> None:
        self._start()

    def run(self, args: Sequence[str], timeout_s: float | None) -> Ran:
        process = self._start()
        self.jobs += 1
        out = self.work_dir / f"job-{self.index}-{self.jobs}.json"
        job = {"args": list(args), "project_dir": str(self.project_dir), "profiles_dir": str(self.profiles_dir),
               "out": str(out)}
        assert process.stdin is not None
        try:
            process.stdin.write(json.dumps(job) + "\n")
            process.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self._kill()
            return Ran(None, error=f"worker {self.index} could not take the job: {exc}")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not out.exists():
            if process.poll() is not None:
                return Ran(None, error=f"worker {self.index} exited with code {process.returncode}; "
                                       f"its log: {self.work_dir / f'worker-{self.index}.log'}")
            if deadline is not None and time.monotonic() > deadline:
                self._kill()
                return Ran(None, timed_out=True)
            time.sleep(POLL_S)
        return Ran(invocation_from_dict(json.loads(out.read_text())))

    def _kill(self) -> None:
        if self.process is not None:
            processes.stop(self.process, first=signal.SIGKILL)  # type: ignore[arg-type]
            self.process = None

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            assert self.process.stdin is not None
            try:
                self.process.stdin.close()  # the worker ends after its current job
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
            processes.stop(self.process)  # type: ignore[arg-type]
        self.process = None
        if self.log is not None:
            self.log.close()


def is_call(sql: str) -> bool:
    """A procedure CALL, behind dbt's query comment if any."""
    text = sql.lstrip()
    while text.startswith("/*") and "*/" in text:
        text = text.split("*/", 1)[1].lstrip()
    return text[:5].upper() == "CALL "


def _outcome(step: Step, ran: Ran, started: float, finished: float, worker: int,
             timeout_s: float | None) -> StepOutcome:
    """The step's result from its invocation: the macros' RESULT line, else the error that
    stopped it (classified), a timeout, or the worker's death."""
    base = StepOutcome(step.table, step.operation, "failed", sql=step.sql, started_at=_utc(started),
                       finished_at=_utc(finished), duration_s=round(finished - started, 3), worker=worker,
                       eligible_files=step.eligible_files, eligible_bytes=step.eligible_bytes)
    if ran.timed_out:
        return replace(base, kind="timeout", reason=f"stopped after the step timeout of {timeout_s:g} s (its worker "
                                                    "process was killed); the table's later steps are skipped")
    if ran.invocation is None:
        return replace(base, kind="worker_died", reason=ran.error)
    invocation = ran.invocation
    statements = invocation.sql_statements
    calls = tuple((start, end) for sql, start, end in statements if is_call(sql))
    base = replace(base, statements=len(statements), calls=calls)
    reported = [r for r in parse_result_lines(marker_messages(invocation)) if (r.table, r.operation) == step.key]
    if reported:
        result = reported[-1]
        kind = result.metrics.get("kind") if result.status == "failed" else None
        return replace(base, status=result.status, reason=result.reason, metrics=dict(result.metrics),
                       kind=kind if isinstance(kind, str) else None, recorded=True,
                       left_files=scheduler.left_behind(step.eligible_files, result.metrics)
                       if result.status == "success" else None)
    if invocation.usage_error or (invocation.success and not reported):
        return replace(base, kind="invalid_request", reason=f"execute_maintenance_steps reported no result: "
                                                            f"{invocation.exception or 'no RESULT line'}")
    failed = interrupted_step([_plan_step(step)], [], error_text(invocation))
    return replace(base, reason=failed.reason, metrics=dict(failed.metrics), kind=str(failed.metrics.get("kind")))


def _plan_step(step: Step) -> Any:
    from dbt_iceberg_maint.maintenance import PlanStep

    return PlanStep(step.table, step.operation, step.status, step.reason or None, step.sql)


def step_args(step: Step, record: Mapping[str, Any] | None, dbt_args: Sequence[str],
              history_checked: bool = False) -> list[str]:
    """One step through execute_maintenance_steps; with `record`, the check it settles is recorded;
    `history_checked`: an earlier invocation of the run found the history table ready."""
    args: dict[str, Any] = {"steps": [step.plan_step()]}
    if record is not None:
        args["record"] = dict(record)
    if history_checked:
        args["history_checked"] = True
    return ["run-operation", "dbt_iceberg_maint.execute_maintenance_steps", "--args", json.dumps(args), *dbt_args]


def unrecorded_args(outcomes: Sequence[StepOutcome], nodes: Mapping[str, str], dbt_args: Sequence[str],
                    history_checked: bool = False) -> list[str] | None:
    """record_args for the outcomes no macro recorded: the plan's skips, the budget's backlog (a
    skip), timeouts, a step stopped without its result line."""
    args = record_args([(o.table, o.operation, "failed" if o.status == "failed" else "skipped", o.reason, o.sql)
                        for o in outcomes if not o.recorded and o.status in ("skipped", "failed", "backlog")],
                       nodes, history_checked)
    return None if args is None else [*args, *dbt_args]


def _probed_outcome(outcome: StepOutcome, probe: Ran) -> StepOutcome:
    """The failed compaction's outcome once its re-run (`probe`, rewrite_probe.py) decided it; as it was
    when the re-run itself did not finish (its timeout, its worker's death)."""
    if probe.invocation is None:  # its CALL may still run in Spark, as after a step's own timeout
        return replace(outcome, kind="timeout" if probe.timed_out else "worker_died",
                       reason=f"{outcome.reason}; its re-run to decide the failure did not finish: "
                              f"{'stopped after the step timeout' if probe.timed_out else probe.error}")
    failed = MaintenanceResult(outcome.table, outcome.operation, "failed", outcome.reason, outcome.sql,
                               MappingProxyType(dict(outcome.metrics)))
    result = probed(failed, probe.invocation)
    statements = probe.invocation.sql_statements
    kind = result.metrics.get("kind") if result.status == "failed" else None
    return replace(outcome, status=result.status, reason=result.reason, metrics=dict(result.metrics),
                   kind=kind if isinstance(kind, str) else None, statements=outcome.statements + len(statements),
                   calls=outcome.calls + tuple((start, end) for sql, start, end in statements if is_call(sql)))


def _after_failure(worker: InProcessWorker | SubprocessWorker, step: Step, outcome: StepOutcome,
                   record: Mapping[str, Any] | None, run_id: str, dbt_args: Sequence[str],
                   timeout_s: float | None) -> tuple[StepOutcome, int]:
    """After a step Spark stopped (not a timeout or a dead worker: their CALL may still run): an
    undecided compaction is re-run once to decide it, as `maintain` does, and a step still failed
    gives back the table's lease its stopped macro left taken. Returns the outcome and the
    invocations it took."""
    if outcome.status != "failed" or outcome.kind in ("timeout", "worker_died"):
        return outcome, 0
    invocations = 0
    if needs_probe(step.operation, outcome.metrics):
        probe = worker.run([*probe_args(step.table, policy=(record or {}).get("policy")), *dbt_args], timeout_s)
        outcome = replace(_probed_outcome(outcome, probe), finished_at=_utc(time.time()))
        invocations += 1
    if outcome.status == "failed" and outcome.kind not in ("timeout", "worker_died"):
        released = worker.run([*give_back_args(step.table, run_id), *dbt_args], timeout_s).invocation
        invocations += 1
        outcome = replace(outcome, statements=outcome.statements + len(released.sql_statements if released else ()))
        if released is None or not released.success:
            outcome = replace(outcome, reason=f"{outcome.reason} ({LEASE_KEPT})")
    return outcome, invocations


# ---- the run ----

class _Run:
    """The scheduling loop's shared state (guarded by one condition variable)."""

    def __init__(self, tables: Sequence[TableWork], concurrency: int, budget_s: float | None,
                 timeout_s: float | None, started: float, progress: Progress | None) -> None:
        self.order = [t.table for t in tables]
        self.queues = {t.table: list(t.due) for t in tables}
        self.concurrency, self.budget_s, self.timeout_s, self.started = concurrency, budget_s, timeout_s, started
        self.busy: set[str] = set()
        self.outcomes: list[StepOutcome] = []
        self.durations: list[float] = []
        self.cond = threading.Condition()
        self.progress = progress
        self.total = sum(len(q) for q in self.queues.values())

    def take(self) -> Step | None:
        """The next step for a free worker; None when nothing is left to start (or the budget closed)."""
        with self.cond:
            while True:
                if not scheduler.may_start(time.monotonic() - self.started, self.budget_s):
                    return None
                step = scheduler.next_step(self.queues, self.order, self.busy)
                if step is not None:
                    self.queues[step.table].pop(0)
                    self.busy.add(step.table)
                    self._report()
                    return step
                if not any(self.queues.values()):
                    return None
                self.cond.wait(timeout=0.5)

    def settle(self, step: Step, outcome: StepOutcome) -> None:
        with self.cond:
            self.outcomes.append(outcome)
            if outcome.duration_s is not None:
                self.durations.append(outcome.duration_s)
            if outcome.kind == "timeout":  # it may still run in Spark: nothing else on that table
                for later in self.queues.pop(step.table, []):
                    self.outcomes.append(StepOutcome(later.table, later.operation, "skipped", sql=later.sql,
                                                     reason=f"not started: {step.operation} on this table timed out "
                                                            "and may still be running in Spark",
                                                     eligible_files=later.eligible_files,
                                                     eligible_bytes=later.eligible_bytes))
            self.busy.discard(step.table)
            self._report()
            self.cond.notify_all()

    def _report(self) -> None:
        if self.progress is None:
            return
        left = sum(len(q) for q in self.queues.values())
        done = len(self.durations)
        self.progress({"total": self.total, "done": done, "running": len(self.busy), "left": left,
                       "elapsed_s": round(time.monotonic() - self.started, 1),
                       "eta_s": scheduler.eta_s(self.durations, left, len(self.busy), self.concurrency)})


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
    from dbt_iceberg_maint.embedded_profile import prepare_profile_catalog
    from dbt_iceberg_maint.metadata import planner
    from dbt_iceberg_maint.metadata.catalog import config_from_profile, open_catalog

    begun = time.monotonic()
    # Every input is checked before anything runs.
    concurrency = scheduler.check_concurrency(concurrency)
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
    if resume is not None:
        try:
            previous = json.loads(Path(resume).read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"--resume {resume}: cannot read the report: {exc}") from exc
        settled = scheduler.settled_keys(previous)
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

    manifest = planner.load_manifest(project, profiles, target, env=env)
    targets = planner.iceberg_models(manifest, list(select) if select else None, shard_value)
    metadata = open_catalog(config)
    vars_yaml = _option_value(dbt_args, "--vars")
    coverage = None
    if include_catalog:
        extra, found = planner.catalog_targets(metadata, manifest, include_catalog,
                                               planner.project_var(project, vars_yaml, planner.CATALOG_POLICY_VAR),
                                               shard_value)
        targets += extra
        coverage = found.to_dict()
    tables = plan_fleet(metadata, targets, requested, at=at, force=force,
                        project_enabled=planner.project_enabled(project, vars_yaml), max_files_per_table=max_files)
    if previous is not None:
        tables = list(scheduler.without_settled(tables, settled))
    ordered = scheduler.order_tables(tables)
    planning_s = time.monotonic() - begun

    # Steps the plan settled: skipped and failed ones (not due, disabled, no table), reported as planned.
    outcomes = [StepOutcome(s.table, s.operation, s.status, s.reason or None, s.sql)
                for t in ordered for s in t.steps if s.status != "planned"]
    due = [s for t in ordered for s in t.due]
    worker_env = {**(env or {}), RUN_ID_ENV: run_id}
    # Every step gets its history row: the ones no macro ran are recorded at the end (record_args).
    history_on = planner.project_var(project, vars_yaml, "dbt_iceberg_maint_history_enabled") is not False
    nodes = {t.table: t.model for t in ordered if t.model and not t.model.startswith("catalog:")}
    if dry_run or not due:
        outcomes += [StepOutcome(s.table, s.operation, "dry_run", f"dry run: {s.reason}", s.sql,
                                 eligible_files=s.eligible_files, eligible_bytes=s.eligible_bytes) for s in due]
        recording = unrecorded_args(outcomes, nodes, worker_args) if history_on and not dry_run else None
        only = (InProcessWorker(1, worker_env, project, profiles, worker_args).run(recording, None).invocation
                if recording else None)
        return FleetReport(run_id, tuple(outcomes), ordered, concurrency, "none", budget, timeout, planning_s,
                           0.0, int(only is not None), len(only.sql_statements) if only else 0, dry_run=dry_run,
                           resumed_from=None if resume is None else str(resume), catalog=coverage,
                           history_problems=_history_problems(only))

    in_process = concurrency == 1 and timeout is None
    work_dir = Path(tempfile.mkdtemp(prefix="dbt-iceberg-maint-fleet-"))
    workers: list[InProcessWorker | SubprocessWorker] = [
        InProcessWorker(1, worker_env, project, profiles, worker_args) if in_process
        else SubprocessWorker(i + 1, worker_env, project, profiles, worker_args, work_dir,
                              planner.target_dir(project, env) / "partial_parse.msgpack") for i in range(concurrency)]
    state = _Run(ordered, concurrency, budget, timeout, begun, progress)
    records = {t.table: t.record for t in ordered}
    statements = [0]
    invocations = [0]
    errors: list[BaseException] = []
    # Once an invocation of this run wrote history (or created its table), the others skip its
    # three check statements (docs/history.md).
    history_ready = [False]

    def note_history(invocation: DbtInvocation | None) -> None:
        if invocation is not None and not history_ready[0] and history_written(marker_messages(invocation)):
            history_ready[0] = True

    # Steps start once every worker is ready (dbt imported): a worker that is ready first would
    # otherwise take a short queue alone while the others still start.
    ready = threading.Barrier(len(workers))

    # Workers that start together would race to create a namespace's lease log on its first lease.
    namespaces = {t.table.rsplit(".", 1)[0] for t in ordered if t.due}
    prepare = create_logs_args(namespaces) if len(workers) > 1 and namespaces else None

    def work(worker: InProcessWorker | SubprocessWorker) -> None:
        try:
            worker.start()
            if prepare is not None and worker.index == 1:  # a failure here leaves it to the steps
                prepared = worker.run([*prepare, *worker_args], None).invocation
                note_history(prepared)
                with state.cond:
                    invocations[0] += 1
                    statements[0] += len(prepared.sql_statements) if prepared else 0
            ready.wait()
            while (step := state.take()) is not None:
                started = time.time()
                ran = worker.run(step_args(step, records.get(step.table), worker_args, history_ready[0]), timeout)
                note_history(ran.invocation)
                outcome = _outcome(step, ran, started, time.time(), worker.index, timeout)
                outcome, extra = _after_failure(worker, step, outcome, records.get(step.table), run_id, worker_args,
                                                timeout)
                with state.cond:
                    invocations[0] += 1 + extra
                    statements[0] += outcome.statements
                state.settle(step, outcome)
        except BaseException as exc:  # re-raised on the main thread once every worker stopped
            if not isinstance(exc, threading.BrokenBarrierError):  # another worker's failure broke it
                errors.append(exc)
            ready.abort()
            with state.cond:
                state.queues.clear()
                state.cond.notify_all()

    execution_started = time.monotonic()
    recorded: DbtInvocation | None = None
    try:
        if in_process:
            work(workers[0])
        else:
            threads = [threading.Thread(target=work, args=(w,), name=f"fleet-worker-{w.index}") for w in workers]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        if errors:
            raise IcebergMaintError(f"the fleet engine stopped: {errors[0]}") from errors[0]
        left = [s for t in ordered for s in state.queues.get(t.table, [])]
        backlog = [StepOutcome(s.table, s.operation, "backlog",
                               f"{BACKLOG_REASON_PREFIX} not started, the budget of {budget or 0:g} s closed",
                               s.sql, eligible_files=s.eligible_files, eligible_bytes=s.eligible_bytes) for s in left]
        recording = (unrecorded_args([*outcomes, *state.outcomes, *backlog], nodes, worker_args, history_ready[0])
                     if history_on else None)
        if recording:
            recorded = workers[0].run(recording, None).invocation
            invocations[0] += 1
            statements[0] += len(recorded.sql_statements) if recorded else 0
    finally:
        for worker in workers:
            worker.close()
        # The workers' folder (their dbt targets, logs and job files) is kept only when a worker
        # died or the run stopped: a reason then names a log in it.
        if not errors and all(o.kind != "worker_died" for o in state.outcomes):
            shutil.rmtree(work_dir, ignore_errors=True)
    execution_s = time.monotonic() - execution_started
    order = {(s.table, s.operation): i for i, s in enumerate(s for t in ordered for s in t.steps)}
    every = sorted([*outcomes, *state.outcomes, *backlog], key=lambda o: order.get((o.table, o.operation), 0))
    return FleetReport(run_id, tuple(every), ordered, concurrency, workers[0].mode, budget, timeout, planning_s,
                       execution_s, invocations[0], statements[0],
                       resumed_from=None if resume is None else str(resume), catalog=coverage,
                       history_problems=_history_problems(recorded))


def _history_problems(invocation: DbtInvocation | None) -> tuple[str, ...]:
    """What kept the recorded outcomes' history rows from being written: the macros' problems, or
    the recording invocation's own failure."""
    if invocation is None:
        return ()
    problems = history_problems(marker_messages(invocation))
    if not invocation.success:
        problems += (f"the outcomes the engine settled were not recorded: {error_text(invocation)}",)
    return problems
