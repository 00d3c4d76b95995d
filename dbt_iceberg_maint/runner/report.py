"""The runner's report: per node, every attempt, why it was (not) re-run, landed evidence."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dbt_iceberg_maint.conflicts import classify
from dbt_iceberg_maint.runner.landed import LandedVerdict
from dbt_iceberg_maint.runner.plan import SUCCESS_STATUSES, RerunPlan
from dbt_iceberg_maint.runtime.invoke import FAILED_STATUSES, NodeResult


@dataclass(frozen=True)
class AttemptRecord:
    attempt: int
    status: str
    kind: str | None  # classification kind of a failure, None when the node did not fail
    message: str | None = field(default=None, repr=False)
    landed: LandedVerdict | None = None  # landed verification of a failure, when it ran


@dataclass(frozen=True)
class HookRerun:
    """The failed post-hook re-run alone (the model's write had landed)."""

    args: tuple[str, ...]
    success: bool
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"command": "dbt " + " ".join(self.args), "success": self.success, "message": self.message}


@dataclass(frozen=True)
class NodeReport:
    unique_id: str
    name: str
    resource_type: str
    final_status: str
    attempts: tuple[AttemptRecord, ...]
    not_rerun_reason: str | None
    hook_rerun: HookRerun | None = None

    @property
    def succeeded(self) -> bool:
        return self.final_status in SUCCESS_STATUSES

    @property
    def failed_once(self) -> bool:
        return any(record.status in FAILED_STATUSES for record in self.attempts)

    @property
    def landed(self) -> LandedVerdict | None:
        """The verification of the last failed attempt."""
        failed = [record for record in self.attempts if record.status in FAILED_STATUSES]
        return failed[-1].landed if failed else None

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "unique_id": self.unique_id,
            "name": self.name,
            "resource_type": self.resource_type,
            "final_status": self.final_status,
            "attempts": len(self.attempts),
            "kinds": [record.kind for record in self.attempts],
            "history": [
                {"attempt": r.attempt, "status": r.status, "kind": r.kind, "message": r.message,
                 **({"write_landed": r.landed.landed, "landed_evidence": r.landed.to_dict()} if r.landed else {})}
                for r in self.attempts
            ],
            "not_rerun_reason": self.not_rerun_reason,
        }
        if self.failed_once:
            landed = self.landed
            document["write_landed"] = landed.landed if landed else None
            document["landed_evidence"] = landed.to_dict() if landed else {
                "table": None, "recorded_snapshot_id": None, "snapshot_ids": [],
                "why": "not verified: no snapshot record of the node's table (not an Iceberg table or "
                       "incremental model, or its snapshots could not be read)"}
        if self.hook_rerun is not None:
            document["hook_rerun"] = self.hook_rerun.to_dict()
        return document


@dataclass(frozen=True)
class RunReport:
    command: str
    dbt_args: tuple[str, ...]
    attempts: int
    max_attempts: int
    nodes: tuple[NodeReport, ...]
    error: str | None = None  # dbt itself failed to run (no node results)
    usage_error: bool = False  # ... because it rejected its arguments


    @property
    def success(self) -> bool:
        return self.error is None and all(node.succeeded for node in self.nodes)

    @property
    def exit_code(self) -> int:
        if self.usage_error:
            return 2
        return 0 if self.success else 1

    def node(self, name_or_id: str) -> NodeReport:
        for node in self.nodes:
            if name_or_id in {node.unique_id, node.name}:
                return node
        raise KeyError(name_or_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "dbt_args": list(self.dbt_args),
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "success": self.success,
            "error": self.error,
            "usage_error": self.usage_error,
            "nodes": [node.to_dict() for node in self.nodes],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


class ReportBuilder:
    """Accumulates attempts into per-node histories."""

    def __init__(self) -> None:
        self.history: dict[str, list[AttemptRecord]] = {}
        self.info: dict[str, NodeResult] = {}
        self.reasons: dict[str, str | None] = {}
        self.resolved: set[str] = set()
        self.hooks: dict[str, HookRerun] = {}

    def record(self, attempt: int, results: Sequence[NodeResult], selected: Sequence[str] = (),
               landed: Mapping[str, LandedVerdict] | None = None) -> None:
        """`selected`: what this attempt re-runs; dbt not running one of them is reported too."""
        for result in results:
            kind = classify(result.message or "").kind if result.status in FAILED_STATUSES else None
            self.history.setdefault(result.unique_id, []).append(
                AttemptRecord(attempt, result.status, kind, result.message, (landed or {}).get(result.unique_id))
            )
            self.resolved.discard(result.unique_id)
            self.hooks.pop(result.unique_id, None)
            self.info[result.unique_id] = result
            self.reasons[result.unique_id] = None
        ran = {result.unique_id for result in results}
        for unique_id in selected:
            if unique_id not in ran:
                self.reasons[unique_id] = f"selected for attempt {attempt}, but dbt did not run it"

    def decide(self, plan: RerunPlan) -> None:
        for unique_id, decision in plan.decisions.items():
            if not decision.rerun:
                self.reasons[unique_id] = decision.reason
            if decision.resolved:
                self.resolved.add(unique_id)

    def hook(self, unique_id: str, rerun: HookRerun) -> None:
        """The failed post-hook was re-run alone; its success completes the node."""
        self.hooks[unique_id] = rerun
        outcome = "succeeded" if rerun.success else f"failed: {rerun.message}"
        self.reasons[unique_id] = f"{self.reasons.get(unique_id)}; hook re-run alone (dbt {' '.join(rerun.args)}) " \
                                  f"{outcome}"
        if rerun.success:
            self.resolved.add(unique_id)

    def exhausted(self, plan: RerunPlan, max_attempts: int) -> None:
        for unique_id in plan.selected:
            self.reasons[unique_id] = (
                f"still {self.history[unique_id][-1].status} after {max_attempts} attempt(s) "
                f"(--max-attempts {max_attempts}); last: {plan.decisions[unique_id].reason}"
            )

    def build(self, command: str, dbt_args: Sequence[str], attempts: int, max_attempts: int,
              error: str | None, usage_error: bool = False) -> RunReport:
        nodes = tuple(
            NodeReport(
                unique_id=uid,
                name=self.info[uid].name,
                resource_type=self.info[uid].resource_type,
                # A landed commit_state_unknown, or a landed write whose hook re-run alone
                # succeeded, leaves nothing undone.
                final_status="success" if uid in self.resolved else records[-1].status,
                attempts=tuple(records),
                not_rerun_reason=self.reasons.get(uid),
                hook_rerun=self.hooks.get(uid),
            )
            for uid, records in self.history.items()
        )
        return RunReport(command, tuple(dbt_args), attempts, max_attempts, nodes, error, usage_error)



def report_table(report: RunReport) -> Any:
    """The report as a rich Table: one row per node that failed, was skipped or was re-run."""
    from rich.table import Table

    table = Table(title=f"dbt {report.command}: {report.attempts} attempt(s) of at most {report.max_attempts}")
    for column in ("node", "final status", "attempts", "kind per attempt", "write landed", "not re-run because"):
        table.add_column(column, overflow="fold")
    for node in report.nodes:
        if node.succeeded and len(node.attempts) == 1:
            continue  # succeeded at once: nothing to tell
        kinds = " -> ".join(record.kind or record.status for record in node.attempts)
        style = "green" if node.succeeded else "red"
        landed = node.landed
        verdict = "" if landed is None else {True: "yes", False: "no", None: "undecidable"}[landed.landed]
        table.add_row(node.name, f"[{style}]{node.final_status}[/{style}]", str(len(node.attempts)), kinds,
                      verdict, node.not_rerun_reason or "")
    ok = sum(1 for node in report.nodes if node.succeeded and len(node.attempts) == 1)
    table.caption = f"{ok} node(s) succeeded at the first attempt and are not listed"
    return table
