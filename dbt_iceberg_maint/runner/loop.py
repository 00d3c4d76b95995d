"""The thin I/O shell: dbt in-process, landed verification around each attempt, bounded re-runs."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.conflicts import classify
from dbt_iceberg_maint.errors import UsageError
from dbt_iceberg_maint.runner.landed import LandedVerdict, Statement, TableLog, verify_landed
from dbt_iceberg_maint.runner.plan import COMMANDS, NodeOutcome, RerunPlan, plan_reruns, rerun_args
from dbt_iceberg_maint.runner.report import HookRerun, ReportBuilder, RunReport
from dbt_iceberg_maint.runner.snapshot_reader import (
    CONTEXT_FLAGS,
    DbtSnapshotReader,
    SnapshotReader,
    keep_flags,
    verified_table,
)
from dbt_iceberg_maint.runtime.invoke import (
    FAILED_STATUSES,
    DbtInvocation,
    Invoker,
    default_profiles_dir,
    invoke_dbt,
)


def exponential_backoff(
    attempt: int, base_seconds: float = 2.0, cap_seconds: float = 60.0, rng: Callable[[], float] = random.random
) -> float:
    """Seconds to wait after failed attempt `attempt` (1-based): a random time between half and
    all of min(cap, base * 2**(attempt - 1)), e.g. 1-2 s, 2-4 s, 4-8 s for a base of 2 s."""
    delay = min(cap_seconds, base_seconds * 2.0 ** (attempt - 1))
    return delay / 2 + rng() * delay / 2


def run_dbt_with_retries(
    dbt_args: Sequence[str] = (),
    *,
    command: str = "run",
    max_attempts: int = 3,
    project_dir: str | os.PathLike[str] = ".",
    profiles_dir: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    backoff: Callable[[int], float] = exponential_backoff,
    sleep: Callable[[float], None] = time.sleep,
    invoke: Invoker | None = None,
    snapshots: SnapshotReader | None = None,
    verify_landed_writes: bool = True,
) -> RunReport:
    """Run `dbt <command> <dbt_args>` in-process; re-run retryable, idempotent failures, and
    failures of other nodes whose write verifiably did not land (landed verification).

    The Python API behind `dbt-iceberg-maint run` (for Airflow, Dagster, ...). Returns the
    report; never raises for model failures (see `RunReport.success` / `exit_code`). Plans from
    the manifest.json dbt writes (the whole graph; without it, only the nodes that ran).
    `profiles_dir` defaults as in dbt: DBT_PROFILES_DIR, the project directory if it holds a
    profiles.yml, else ~/.dbt. `snapshots`: how snapshot logs are read (default: through dbt,
    when dbt is not injected via `invoke`); `verify_landed_writes=False` turns verification off.
    """
    _check_arguments(command, max_attempts, dbt_args)
    profiles = profiles_dir or default_profiles_dir(Path(project_dir).resolve(), os.environ)

    def default_invoke(args: Sequence[str]) -> DbtInvocation:
        return invoke_dbt(args, project_dir, profiles, env, read_manifest=True)

    call = invoke or default_invoke
    reader = snapshots if snapshots is not None else (DbtSnapshotReader(call, dbt_args) if invoke is None else None)
    attempts = _Attempts(call, reader if verify_landed_writes else None, dbt_args)
    args: list[str] = [command, *dbt_args]
    attempt = 0
    while True:
        attempt += 1
        invocation = attempts.invoke(args)
        if not invocation.nodes and not invocation.success:
            # dbt itself failed (bad arguments, project or profile error): nothing to re-run.
            return attempts.report.build(command, dbt_args, attempt, max_attempts,
                                         invocation.exception or "dbt failed before running any node",
                                         usage_error=invocation.usage_error)
        plan = attempts.plan(attempt, invocation)
        attempts.rerun_hooks(plan)
        if not plan.selected:
            break
        if attempt >= max_attempts:
            attempts.report.exhausted(plan, max_attempts)
            break
        sleep(backoff(attempt))
        args = rerun_args(command, dbt_args, plan)
        attempts.selected = plan.selected
    return attempts.report.build(command, dbt_args, attempt, max_attempts, None)


def _check_arguments(command: str, max_attempts: int, dbt_args: Sequence[str]) -> None:
    if command not in COMMANDS:
        raise UsageError(f"command {command!r} is not supported; expected one of {', '.join(COMMANDS)}")
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise UsageError(f"max_attempts is {max_attempts!r}; expected an integer >= 1")
    if dbt_args and dbt_args[0] in {"run", "build", "test", "seed", "snapshot", "compile"}:
        raise UsageError(
            f"dbt arguments start with the command {dbt_args[0]!r}; pass the command with "
            "--command (run|build) and only its options as dbt arguments"
        )


class _Attempts:
    """What the attempts of one run carry from one to the next: the project graph as far as it is
    known, the nodes the last re-run selected, the snapshot logs read, and the report."""

    def __init__(self, call: Invoker, reader: SnapshotReader | None, dbt_args: Sequence[str]) -> None:
        self.call, self.reader, self.dbt_args = call, reader, dbt_args
        self.report = ReportBuilder()
        self.nodes: dict[str, Mapping[str, Any]] = {}
        self.root_project: str | None = None
        self.selected: tuple[str, ...] = ()
        self.watch: _SnapshotWatch | None = None

    def invoke(self, args: Sequence[str]) -> DbtInvocation:
        """One attempt, with the snapshot logs of the tables it may write read beforehand."""
        if self.reader is not None:
            if self.watch is None:
                self.watch = _SnapshotWatch(self.reader, self.reader.selected_nodes(self.dbt_args))
            else:
                self.watch = _SnapshotWatch(self.reader, {uid: self.nodes[uid] for uid in self.selected
                                                          if uid in self.nodes}, self.watch.latest, self.watch.app_id)
        return self.call(args)

    def plan(self, attempt: int, invocation: DbtInvocation) -> RerunPlan:
        """Which failed writes landed, what the attempt taught about the graph, and what to re-run."""
        landed = self.watch.verify(invocation) if self.watch is not None else {}
        self.report.record(attempt, invocation.nodes, self.selected, landed)
        self.nodes.update({n.unique_id: n.manifest_node for n in invocation.nodes if n.manifest_node})
        if invocation.manifest is not None:
            self.nodes.update(invocation.manifest.nodes)
            self.root_project = invocation.manifest.project_name
        outcomes = [NodeOutcome(n.unique_id, n.status, n.message) for n in invocation.nodes]
        plan = plan_reruns(outcomes, self.nodes, root_project=self.root_project, landed=landed)
        self.report.decide(plan)
        return plan

    def rerun_hooks(self, plan: RerunPlan) -> None:
        """The post-hooks the plan repeats on their own (of nodes it does not re-run)."""
        for uid, decision in plan.decisions.items():
            if decision.hook_rerun:
                hook_args = [*decision.hook_rerun, *keep_flags(self.dbt_args, CONTEXT_FLAGS)]
                hook = self.call(hook_args)
                self.report.hook(uid, HookRerun(tuple(hook_args), hook.success, hook.exception))


class _SnapshotWatch:
    """One attempt's landed verification: the tables' snapshot logs before, the verdicts after.

    `known`: logs read after the previous attempt; a table found there is not read again (that log
    is as good a starting point: whatever this application committed since falls outside the
    node's statements and makes the verdict undecidable, never "not landed").
    """

    def __init__(self, reader: SnapshotReader, candidates: Mapping[str, Mapping[str, Any]],
                 known: Mapping[str, TableLog] | None = None, app_id: str | None = None) -> None:
        self.reader = reader
        self.tables = {uid: table for uid, node in candidates.items() if (table := verified_table(node))}
        known = known or {}
        missing = sorted(set(self.tables.values()) - set(known))
        read = reader.read(missing) if missing else None
        self.app_id = (read.app_id if read else None) or app_id
        self.before: dict[str, TableLog] = {t: known[t] for t in set(self.tables.values()) & set(known)}
        self.before.update(read.tables if read else {})
        self.latest: dict[str, TableLog] = {}  # each table's log read after the attempt

    def verify(self, invocation: DbtInvocation) -> dict[str, LandedVerdict]:
        """Verdicts for the failed nodes; also reads the skipped nodes' tables, for the next attempt."""
        failed = [n for n in invocation.nodes
                  if n.status in FAILED_STATUSES and self.tables.get(n.unique_id) in self.before]
        if not failed:
            return {}
        skipped = {self.tables[n.unique_id] for n in invocation.nodes
                   if n.status == "skipped" and n.unique_id in self.tables}
        tables = sorted({self.tables[n.unique_id] for n in failed} | skipped)
        read = self.reader.read(tables)
        self.latest = dict(read.tables)
        verdicts: dict[str, LandedVerdict] = {}
        for node in failed:
            table = self.tables[node.unique_id]
            log = read.tables.get(table)
            if log is None:
                why = f"the snapshot log of {table} could not be read after the attempt: {read.error or 'missing'}"
                verdicts[node.unique_id] = LandedVerdict(table, None, why)
                continue
            statements = tuple(Statement(start, end) for start, end in invocation.statements.get(node.unique_id, ()))
            verdicts[node.unique_id] = verify_landed(
                self.before[table], log, kind=classify(node.message or "").kind,
                app_id=read.app_id or self.app_id, statements=statements)
        return verdicts
