"""`dbt-iceberg-maint maintain`: the iceberg_maintenance run-operation, carried past failures.

dbt's Jinja cannot catch an error, so when Spark rejects one maintenance statement at run time
(a compaction losing its commit to a writer, an option Iceberg refuses) the run-operation stops
there and the steps after it are never attempted. Around dbt, Python can do what the macro
cannot: record that step as failed, with its classified error (a compaction whose failure the
text cannot decide is re-run once to decide it: rewrite_probe.py), and replay the rest of the
LOGGED plan exactly as recorded (`execute_maintenance_steps`), without deciding again: what
runs is what the plan said when it was made. Every resumption settles at least one step (or,
when planning a table failed, that table), so the number of dbt invocations is bounded by the
number of steps plus the number of tables plus one.

The macro logs the tables it selected (SELECTION), which table it is planning and which step
it takes up (START, debug level), and its whole plan once (PLAN, with every step's SQL);
results come back as RESULT lines (results.py). The marker names live in protocol.py.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rich.table import Table

from dbt_iceberg_maint import guards, protocol
from dbt_iceberg_maint.conflicts import classify
from dbt_iceberg_maint.errors import IcebergMaintError, UsageError
from dbt_iceberg_maint.maintenance.leases import LEASE_KEPT, RUN_ID_ENV, give_back_args
from dbt_iceberg_maint.maintenance.results import MaintenanceResult, history_problems, parse_result_lines
from dbt_iceberg_maint.maintenance.rewrite_probe import failed_commits, judge_probe, probe_args
from dbt_iceberg_maint.protocol import PLAN_MARKER, RESULT_MARKER, SELECTION_MARKER, START_MARKER, marker_payloads
from dbt_iceberg_maint.runtime.invoke import DbtInvocation, Invoker, default_profiles_dir, environment, invoke_dbt
from dbt_iceberg_maint.text_tables import add_name_column

ERROR_DETAIL_CHARS = 2000


@dataclass(frozen=True)
class SelectedTable:
    model: str
    table: str


@dataclass(frozen=True)
class PlanStep:
    """One step of a logged plan, as get_maintenance_plan returned it."""

    table: str
    operation: str
    status: str  # protocol.STEP_STATUSES
    reason: str | None = None
    sql: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.table, self.operation)

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "operation": self.operation, "status": self.status, "reason": self.reason,
                "sql": self.sql}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlanStep:
        status = str(data["status"])
        if status not in protocol.STEP_STATUSES:
            raise ValueError(f"step status {status!r} is not one of {', '.join(protocol.STEP_STATUSES)}")
        return cls(str(data["table"]), str(data["operation"]), status, data.get("reason"), data.get("sql"))


@dataclass(frozen=True)
class MaintenancePlan:
    """What iceberg_maintenance logged: the selected tables, the operations and every step."""

    tables: tuple[SelectedTable, ...]
    operations: tuple[str, ...]
    steps: tuple[PlanStep, ...] = ()

    @classmethod
    def from_log(cls, messages: Iterable[str], marker: str = PLAN_MARKER) -> MaintenancePlan | None:
        """The plan (or with SELECTION_MARKER the selection) the macro logged, or None when it
        stopped before logging one (bad input, or planning failed)."""
        for payload in marker_payloads(messages, marker):
            try:
                data = json.loads(payload)
                tables = tuple(SelectedTable(t["model"], t["table"]) for t in data["tables"])
                steps = tuple(PlanStep.from_dict(step) for step in data.get("steps") or ())
                return cls(tables, tuple(data["operations"]), steps)
            except (ValueError, KeyError, TypeError) as exc:
                raise IcebergMaintError(f"unreadable {marker} line ({exc}): {payload[:200]!r}") from exc
        return None


def started(messages: Iterable[str]) -> list[tuple[str, str | None]]:
    """(table, operation) the macros took up, in order; operation None: the table's planning."""
    taken = []
    for payload in marker_payloads(messages, START_MARKER):
        data = json.loads(payload)
        taken.append((data["table"], data["operation"]))
    return taken


def settle(pending: Sequence[PlanStep], results: Iterable[MaintenanceResult]) -> tuple[PlanStep, ...]:
    """The steps still without a result once `results` are reported (pure)."""
    reported = {(r.table, r.operation) for r in results}
    return tuple(step for step in pending if step.key not in reported)


def _failure_metrics(error_text: str) -> tuple[str, str, Mapping[str, Any]]:
    verdict = classify(error_text)
    metrics: dict[str, Any] = {"error": error_text[:ERROR_DETAIL_CHARS], "kind": verdict.kind,
                               "exception_class": verdict.exception_class}
    breaker = failed_commits(error_text)
    if breaker is not None:
        metrics["failed_commits"] = breaker
    return verdict.kind, verdict.summary, MappingProxyType(metrics)


def interrupted_step(pending: Sequence[PlanStep], taken: Sequence[tuple[str, str | None]],
                     error_text: str) -> MaintenanceResult:
    """The step that stopped the invocation, as a failed result (Spark's error classified): the
    pending step the macros took up (the first pending one when none was recorded as taken)."""
    kind, summary, metrics = _failure_metrics(error_text)
    keys = set(taken)
    step = next((s for s in pending if s.key in keys), pending[0])
    return MaintenanceResult(step.table, step.operation, "failed", metrics=metrics, sql=step.sql,
                             reason=f"stopped the run-operation at run time ({kind}): {summary}")


def planning_failed(table: str, operations: Sequence[str], error_text: str) -> tuple[MaintenanceResult, ...]:
    """Planning `table` (existence, properties, health) failed at run time: each of its
    operations failed, so one broken table costs one invocation, not one per operation."""
    kind, summary, metrics = _failure_metrics(error_text)
    reason = f"the table's checks before its first operation failed at run time ({kind}): {summary}"
    return tuple(MaintenanceResult(table, op, "failed", reason=reason, metrics=metrics) for op in operations)


def record_args(outcomes: Iterable[tuple[str, str, str, str | None, str | None]],
                nodes: Mapping[str, str] | None = None, history_checked: bool = False) -> list[str] | None:
    """The run-operation that records outcomes no macro recorded, (table, operation, status,
    reason, sql) each, skipped or failed: execute_maintenance_steps with `settled: true` logs
    their result lines and writes their history rows, running nothing (docs/history.md). None
    when there is none."""
    steps = [{"table": table, "operation": operation, "status": status, "reason": reason or status, "sql": sql}
             for table, operation, status, reason, sql in outcomes]
    if not steps:
        return None
    args: dict[str, Any] = {"steps": steps, "settled": True}
    if nodes:
        args["nodes"] = {t: n for t, n in nodes.items() if t in {s["table"] for s in steps}}
    if history_checked:
        args["history_checked"] = True
    return ["run-operation", "dbt_iceberg_maint.execute_maintenance_steps", "--args", json.dumps(args)]


def replay(pending: Sequence[PlanStep]) -> list[str]:
    """The run-operation that executes the logged plan's remaining steps as recorded, once each
    planned step's arguments pass the guards of its procedure (execute_maintenance_steps checks
    them again, and an orphan step's location against the table's)."""
    now = datetime.now(timezone.utc)
    for step in pending:
        if step.status != "planned" or step.sql is None:
            continue
        head = step.sql.split("(", 1)[0] + "("
        values, errors = guards.call_arguments(step.sql, head)
        errors += guards.replayed_step_errors(step.operation, values, now)
        if errors:
            raise UsageError(f"refusing to replay {step.table} {step.operation}: {'; '.join(errors)}")
    return ["run-operation", "dbt_iceberg_maint.execute_maintenance_steps", "--args",
            json.dumps({"steps": [step.to_dict() for step in pending]})]


def maintenance_args(select: Sequence[str] | None, operations: Sequence[str] | None, *, dry_run: bool,
                     force: bool, as_of: str | None, shard: str | None = None) -> list[str]:
    args = {"select": list(select) if select else None, "operations": list(operations) if operations else None,
            "dry_run": dry_run, "force": force, "as_of": as_of, "shard": shard}
    return ["run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args",
            json.dumps({k: v for k, v in args.items() if v is not None})]


# dbt's message for an exception that ended a run-operation, and its structured events.
_OPERATION_ERROR = "Encountered an error while running operation"
_OPERATION_ERROR_EVENTS = frozenset({"RunningOperationUncaughtError", "RunningOperationCaughtError"})
# The events of a macro's log(): the only place a marker line comes from.
_MACRO_LOG_EVENTS = frozenset({"JinjaLogInfo", "JinjaLogDebug"})


def marker_messages(invocation: DbtInvocation) -> tuple[str, ...]:
    """The messages the macros logged, read from dbt's structured events (so an error message
    that quotes a marker line is never taken for one); all messages when the invocation was
    recorded as text only."""
    if not invocation.events:
        return invocation.log_messages
    return tuple(event.msg for event in invocation.events if event.name in _MACRO_LOG_EVENTS)


def error_text(invocation: DbtInvocation) -> str:
    """Spark's error for the statement that stopped the invocation: dbt's message for it (what
    came after the last result line when dbt said nothing of the kind)."""
    messages = list(invocation.log_messages)
    if invocation.events:  # dbt says which event reports the error
        names = [event.name for event in invocation.events]
        start = next((i for i, name in enumerate(names) if name in _OPERATION_ERROR_EVENTS), None)
        messages = [event.msg for event in invocation.events]
    else:
        start = next((i for i, m in enumerate(messages) if _OPERATION_ERROR in m), None)
    if start is None:
        last_result = max((i for i, m in enumerate(messages) if any(marker_payloads(m, RESULT_MARKER))),
                          default=-1)
        start = last_result + 1
    return "\n".join([*messages[start:], invocation.exception or ""]).strip() or "dbt stopped without an error message"


# dbt's framing of a macro's compiler error: its own lines around the macro's message.
_DBT_FRAMING = ("Encountered an error while running operation:", "Compilation Error in ", "> ")


def _refusal_text(invocation: DbtInvocation) -> str:
    """Why the macro refused before planning (arguments, policies, selection): the macro's own
    message on one line, without dbt's framing (`Compilation Error in macro ...`, the `> called by`
    chain), the Python traceback and the housekeeping lines dbt logs after it."""
    refusal = next((event.msg for event in invocation.events if event.name in _OPERATION_ERROR_EVENTS), None)
    if not refusal:
        return error_text(invocation)
    lines = [line.strip() for line in refusal.splitlines()]
    message = [line for line in lines if line and not line.startswith(_DBT_FRAMING)]
    return " ".join(message or [line for line in lines if line])


@dataclass(frozen=True)
class MaintenanceReport:
    results: tuple[MaintenanceResult, ...]
    invocations: int
    # Why maintenance history could not be written (docs/history.md); maintenance went on.
    history_problems: tuple[str, ...] = ()

    @property
    def failed(self) -> tuple[MaintenanceResult, ...]:
        return tuple(r for r in self.results if r.failed)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def to_json(self) -> str:
        counts = {status: sum(r.status == status for r in self.results)
                  for status in ("success", "skipped", "dry_run", "failed")}
        return json.dumps({"invocations": self.invocations, "counts": counts,
                           "results": [r.to_dict() for r in self.results],
                           "history_problems": list(self.history_problems)}, indent=2)


def run_maintenance(
    select: Sequence[str] | None = None,
    operations: Sequence[str] | None = None,
    *,
    dry_run: bool = False,
    force: bool = False,
    as_of: str | None = None,
    shard: str | None = None,
    dbt_args: Sequence[str] = (),
    project_dir: str | os.PathLike[str] = ".",
    profiles_dir: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    invoke: Invoker | None = None,
) -> MaintenanceReport:
    """Run iceberg_maintenance (on `shard` 'K/N' of the selection when given); after a run-time
    failure, record it and replay the rest of the plan."""
    profiles = profiles_dir or default_profiles_dir(Path(project_dir).resolve(), os.environ)
    invoke_one = invoke or (lambda args: invoke_dbt([*args, *dbt_args], project_dir, profiles, env))
    # One run id for every invocation of this run (the probe and the replays too): they take again
    # the table leases an invocation Spark stopped could not release (macros/internal/lease.sql).
    run_id = os.environ.get(RUN_ID_ENV) or f"dbt-iceberg-maint-{uuid.uuid4().hex[:16]}"

    problems: dict[str, None] = {}

    def run(args: Sequence[str]) -> DbtInvocation:
        with environment({RUN_ID_ENV: run_id}):
            done = invoke_one(args)
        problems.update(dict.fromkeys(history_problems(done.log_messages)))
        return done

    invocation = run(maintenance_args(select, operations, dry_run=dry_run, force=force, as_of=as_of, shard=shard))
    results: list[MaintenanceResult] = []
    invocations = 1
    # Failures no macro could record (Spark stopped it mid-step): their history rows at the end.
    unrecorded: list[MaintenanceResult] = []

    def finish() -> MaintenanceReport:
        recording = record_args((r.table, r.operation, r.status, r.reason, r.sql) for r in unrecorded
                                if r.status in ("skipped", "failed"))
        if recording is not None and not dry_run:
            run(recording)
        return MaintenanceReport(tuple(results), invocations + int(recording is not None and not dry_run),
                                 tuple(problems))
    while True:  # until a plan is logged: each round settles one table whose planning failed
        logged = marker_messages(invocation)
        plan = MaintenancePlan.from_log(logged)
        if plan is not None:
            break
        if invocation.success:
            raise IcebergMaintError(f"iceberg_maintenance logged no {PLAN_MARKER} line: is the dbt_iceberg_maint "
                                    "package the project installs older than this command?")
        selection = MaintenancePlan.from_log(logged, SELECTION_MARKER)
        planning = [table for table, operation in started(logged) if operation is None]
        if selection is None or not planning:  # refused before anything ran: arguments, policies, selection
            raise UsageError(f"iceberg_maintenance stopped before planning: {_refusal_text(invocation)}")
        failed_planning = planning_failed(planning[-1], selection.operations, error_text(invocation))
        results.extend(failed_planning)
        unrecorded.extend(failed_planning)
        rest = [t.model for t in selection.tables if t.table != planning[-1]]
        if not rest:
            return finish()
        invocation = run(maintenance_args(rest, selection.operations, dry_run=dry_run, force=force, as_of=as_of))
        invocations += 1
    pending = plan.steps
    while True:
        reported = parse_result_lines(marker_messages(invocation))
        results.extend(reported)
        pending = settle(pending, reported)
        if pending and invocation.success:
            raise IcebergMaintError(f"dbt succeeded but reported no result for {pending[0].table} "
                                    f"{pending[0].operation}; is the package version current?")
        if pending:  # the invocation stopped inside a step
            failed = interrupted_step(pending, started(marker_messages(invocation)), error_text(invocation))
            if needs_probe(failed.operation, failed.metrics):
                failed = probed(failed, run(probe_args(failed.table, as_of)))
                invocations += 1
            pending = settle(pending, [failed])
            if failed.status == "failed" and not any(s.table == failed.table and s.status == "planned"
                                                     for s in pending):
                # No replay re-enters the table's lease, which the stopped invocation left taken.
                released = run(give_back_args(failed.table, run_id))
                invocations += 1
                if not released.success:
                    failed = replace(failed, reason=f"{failed.reason} ({LEASE_KEPT})")
            results.append(failed)
            unrecorded.append(failed)
        if not pending:
            return finish()
        invocation = run(replay(pending))
        invocations += 1


def needs_probe(operation: str, metrics: Mapping[str, Any]) -> bool:
    """A compaction Spark stopped with a failure (`metrics` of interrupted_step) only a re-run can
    decide (rewrite_probe.py)."""
    return operation == "rewrite_data_files" and bool(classify(str(metrics.get("error", ""))).undecided)


def probed(failed: MaintenanceResult, probe: DbtInvocation) -> MaintenanceResult:
    """The failed compaction's result once re-running it (`probe`) decided what its failure was."""
    reported = [r for r in parse_result_lines(marker_messages(probe)) if r.operation == "rewrite_data_files"]
    result = reported[0] if reported else None
    verdict = judge_probe(result.status if result else None, result.metrics if result else {},
                          None if result else error_text(probe))
    metrics = {**failed.metrics, "kind": verdict.kind, "retryable": verdict.retryable,
               "probe": result.to_dict() if result else {"error": error_text(probe)[:ERROR_DETAIL_CHARS]}}
    if result is not None and verdict.status == "success":
        metrics.update({k: v for k, v in result.metrics.items() if k not in metrics})
    reason = f"stopped the run-operation at run time ({failed.metrics['kind']}, undecided): {verdict.reason}"
    return MaintenanceResult(failed.table, failed.operation, verdict.status, metrics=MappingProxyType(metrics),
                             sql=failed.sql, reason=reason)


def maintenance_table(results: Sequence[MaintenanceResult]) -> Table:
    """One row per table and operation: output counts, or why it was skipped or failed."""
    table = Table(title="iceberg_maintenance: one result per table and operation")
    add_name_column(table, "table", (r.table.split(".", 1)[-1] for r in results))
    for column in ("operation", "status", "details"):
        table.add_column(column)
    colours = {"success": "green", "skipped": "yellow", "failed": "red", "dry_run": "cyan"}
    for r in results:
        counts = ", ".join(f"{k}={v}" for k, v in r.metrics.items() if isinstance(v, int) and not isinstance(v, bool))
        table.add_row(r.table.split(".", 1)[-1], r.operation, f"[{colours.get(r.status, 'white')}]{r.status}[/]",
                      r.reason if r.status in {"skipped", "failed"} else counts)
    return table
