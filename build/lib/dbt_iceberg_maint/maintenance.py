"""`dbt-iceberg-maint maintain`: the iceberg_maintenance run-operation, carried past failures.

dbt's Jinja cannot catch an error, so when Spark rejects one maintenance statement at run time
(a compaction losing its commit to a writer, an option Iceberg refuses) the run-operation stops
there and the operations after it are never attempted. Around dbt, Python can do what the
macro cannot: record that operation as failed, with its classified error, and resume with the
rest in the canonical order. Every resumption settles at least one pending operation, so the
number of dbt invocations is bounded by the number of planned operations plus one.

The macro announces its plan in one `ICEBERG_MAINT_PLAN {"tables": [{"model", "table"}],
"operations": [...]}` line; results come back as `ICEBERG_MAINT_RESULT` lines (results.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

from rich.table import Table

from dbt_iceberg_maint.conflicts import classify
from dbt_iceberg_maint.errors import IcebergMaintError, UsageError
from dbt_iceberg_maint.invoke import DbtInvocation, Invoker, default_profiles_dir, invoke_dbt
from dbt_iceberg_maint.results import RESULT_MARKER, MaintenanceResult, parse_result_lines

PLAN_MARKER = "ICEBERG_MAINT_PLAN"
# Logged (debug level) by maintain() as it takes up each operation of a table.
START_MARKER = "ICEBERG_MAINT_START"
ERROR_DETAIL_CHARS = 2000


@dataclass(frozen=True)
class PendingTable:
    """A table of the plan and the operations not yet reported for it, in canonical order."""

    model: str
    table: str
    operations: tuple[str, ...]


@dataclass(frozen=True)
class MaintenancePlan:
    tables: tuple[PendingTable, ...]
    operations: tuple[str, ...]

    @classmethod
    def from_log(cls, messages: Iterable[str]) -> MaintenancePlan | None:
        """The plan the macro logged, or None when it stopped before planning (bad input)."""
        for payload in _payloads(messages, PLAN_MARKER):
            try:
                data = json.loads(payload)
                operations = tuple(data["operations"])
                tables = tuple(PendingTable(t["model"], t["table"], operations) for t in data["tables"])
            except (ValueError, KeyError, TypeError) as exc:
                raise IcebergMaintError(f"unreadable {PLAN_MARKER} line ({exc}): {payload[:200]!r}") from exc
            return cls(tables, operations)
        return None


def _payloads(messages: Iterable[str], marker: str) -> Iterable[str]:
    for message in messages:
        head, _, payload = message.strip().partition(" ")
        if head == marker:
            yield payload


def started_operations(messages: Iterable[str]) -> set[tuple[str, str]]:
    """(table, operation) pairs maintain() took up in an invocation."""
    started = set()
    for payload in _payloads(messages, START_MARKER):
        data = json.loads(payload)
        started.add((data["table"], data["operation"]))
    return started


def settle(pending: Sequence[PendingTable], results: Iterable[MaintenanceResult]) -> tuple[PendingTable, ...]:
    """What is still pending once `results` are reported (pure)."""
    reported = {(r.table, r.operation) for r in results}
    remaining = (replace(p, operations=tuple(op for op in p.operations if (p.table, op) not in reported))
                 for p in pending)
    return tuple(p for p in remaining if p.operations)


def interrupted_results(pending: PendingTable, started: set[tuple[str, str]],
                        error_text: str) -> tuple[MaintenanceResult, ...]:
    """What stopped the invocation inside `pending`'s table, as failed results (Spark's error
    classified): the operation maintain() had taken up, or, when it had taken up none, every
    pending operation of the table (its checks before the first operation failed: existence,
    properties, health), so one broken table costs one invocation, not one per operation."""
    verdict = classify(error_text)
    metrics = MappingProxyType({"error": error_text[:ERROR_DETAIL_CHARS], "kind": verdict.kind,
                                "exception_class": verdict.exception_class})
    in_flight = [op for op in pending.operations if (pending.table, op) in started]
    if in_flight:
        return (MaintenanceResult(pending.table, in_flight[0], "failed", metrics=metrics,
                                  reason=f"stopped the run-operation at run time ({verdict.kind}): {verdict.summary}"),)
    reason = f"the table's checks before its first operation failed at run time ({verdict.kind}): {verdict.summary}"
    return tuple(MaintenanceResult(pending.table, op, "failed", reason=reason, metrics=metrics)
                 for op in pending.operations)


def resume(pending: Sequence[PendingTable], plan: MaintenancePlan, dry_run: bool,
           force: bool) -> tuple[list[str], tuple[PendingTable, ...]]:
    """The run-operation that carries on, and the tables it covers: maintain() for a table left
    half done, else iceberg_maintenance over the tables not started, in the plan's order."""
    head = pending[0]
    covered: tuple[PendingTable, ...]
    if head.operations != plan.operations:
        macro, args, covered = "dbt_iceberg_maint.maintain", {
            "relation": head.table, "operations": list(head.operations)}, (head,)
    else:
        macro, args, covered = "dbt_iceberg_maint.iceberg_maintenance", {
            "select": [p.model for p in pending], "operations": list(plan.operations)}, tuple(pending)
    return ["run-operation", macro, "--args", json.dumps({**args, "dry_run": dry_run, "force": force})], covered


# dbt's message for an exception that ended a run-operation (event RunningOperationUncaughtError).
_OPERATION_ERROR = "Encountered an error while running operation"


def _error_text(invocation: DbtInvocation) -> str:
    """Spark's error for the statement that stopped the invocation: dbt's message for it (what
    came after the last result line when dbt said nothing of the kind)."""
    messages = list(invocation.log_messages)
    start = next((i for i, m in enumerate(messages) if _OPERATION_ERROR in m), None)
    if start is None:
        last_result = max((i for i, m in enumerate(messages) if m.startswith(RESULT_MARKER)), default=-1)
        start = last_result + 1
    return "\n".join([*messages[start:], invocation.exception or ""]).strip() or "dbt stopped without an error message"


@dataclass(frozen=True)
class MaintenanceReport:
    results: tuple[MaintenanceResult, ...]
    invocations: int

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
                           "results": [r.to_dict() for r in self.results]}, indent=2)


def run_maintenance(
    select: Sequence[str] | None = None,
    operations: Sequence[str] | None = None,
    *,
    dry_run: bool = False,
    force: bool = False,
    dbt_args: Sequence[str] = (),
    project_dir: str | os.PathLike[str] = ".",
    profiles_dir: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    invoke: Invoker | None = None,
) -> MaintenanceReport:
    """Run iceberg_maintenance; after a run-time failure, record it and resume with the rest."""
    profiles = profiles_dir or default_profiles_dir(Path(project_dir).resolve(), os.environ)
    run = invoke or (lambda args: invoke_dbt([*args, *dbt_args], project_dir, profiles, env))
    args = {"select": list(select) if select else None, "operations": list(operations) if operations else None,
            "dry_run": dry_run, "force": force}
    invocation = run(["run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args",
                      json.dumps({k: v for k, v in args.items() if v is not None})])
    plan = MaintenancePlan.from_log(invocation.log_messages)
    if plan is None and invocation.success:
        raise IcebergMaintError(f"iceberg_maintenance logged no {PLAN_MARKER} line: is the dbt_iceberg_maint "
                                "package the project installs older than this command?")
    if plan is None:  # refused before anything ran: arguments, policies, selection
        raise UsageError(f"iceberg_maintenance stopped before planning: {_error_text(invocation)}")
    results: list[MaintenanceResult] = []
    pending, covered, invocations = plan.tables, plan.tables, 1
    while True:
        reported = parse_result_lines(invocation.log_messages)
        results.extend(reported)
        pending = settle(pending, reported)
        unfinished = [p for p in pending if p.table in {c.table for c in covered}]
        if unfinished:
            if invocation.success:
                raise IcebergMaintError(f"dbt succeeded but reported no result for {unfinished[0].table} "
                                        f"{unfinished[0].operations[0]}; is the package version current?")
            # The invocation stopped inside this table (tables run in the plan's order).
            failed = interrupted_results(unfinished[0], started_operations(invocation.log_messages),
                                         _error_text(invocation))
            results.extend(failed)
            pending = settle(pending, failed)
        if not pending:
            return MaintenanceReport(tuple(results), invocations)
        resumed, covered = resume(pending, plan, dry_run, force)
        invocation = run(resumed)
        invocations += 1


def maintenance_table(results: Sequence[MaintenanceResult]) -> Table:
    """One row per table and operation: output counts, or why it was skipped or failed."""
    table = Table(title="iceberg_maintenance: one result per table and operation")
    for column in ("table", "operation", "status", "details"):
        table.add_column(column)
    colours = {"success": "green", "skipped": "yellow", "failed": "red", "dry_run": "cyan"}
    for r in results:
        counts = ", ".join(f"{k}={v}" for k, v in r.metrics.items() if isinstance(v, int) and not isinstance(v, bool))
        table.add_row(r.table.split(".", 1)[-1], r.operation, f"[{colours.get(r.status, 'white')}]{r.status}[/]",
                      r.reason if r.status in {"skipped", "failed"} else counts)
    return table
