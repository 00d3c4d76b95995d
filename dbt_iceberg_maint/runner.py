"""Run dbt, classify Iceberg commit failures, re-run only what is safe to re-run.

The decision is a pure function, `plan_reruns`: from one attempt's recorded node results and
the manifest nodes to a re-run plan. A failed node is re-run only if its failure is a retryable
Iceberg conflict (`conflicts.classify`) *and* the node is idempotent (`idempotency`); nodes
that dbt skipped because of such a failure are re-run with it. Everything else is reported with
the reason. A failing post-hook (e.g. a compaction hook losing a conflict) follows the same
rule: the model's own write may already have landed, which idempotency makes harmless.

`run_dbt_with_retries` is the thin shell: dbt in-process (`invoke.invoke_dbt`), an injectable
backoff between attempts, and a bounded number of attempts.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.conflicts import Classification, classify
from dbt_iceberg_maint.errors import UsageError
from dbt_iceberg_maint.idempotency import idempotency
from dbt_iceberg_maint.invoke import DbtInvocation, NodeResult, invoke_dbt

FAILED_STATUSES = frozenset({"error", "fail", "runtime error"})
SUCCESS_STATUSES = frozenset({"success", "pass", "warn", "no-op", "partial success"})
SKIPPED_STATUS = "skipped"
COMMANDS = ("run", "build")
# dbt selection flags; a re-run replaces them with its own `--select`.
SELECTION_FLAGS = frozenset({"--select", "-s", "--models", "--model", "-m", "--exclude", "--selector"})


@dataclass(frozen=True)
class NodeOutcome:
    """One node's result in one attempt, as recorded in run_results.json."""

    unique_id: str
    status: str
    message: str | None = None

    @classmethod
    def from_run_result(cls, result: Mapping[str, Any]) -> NodeOutcome:
        return cls(str(result["unique_id"]), str(result["status"]), result.get("message"))


@dataclass(frozen=True)
class RerunDecision:
    """Why a failed or skipped node is (not) re-run."""

    unique_id: str
    rerun: bool
    reason: str
    classification: Classification | None = None


@dataclass(frozen=True)
class RerunPlan:
    """`rerun`: failed nodes to re-run; `rerun_skipped`: their skipped descendants."""

    rerun: tuple[str, ...]
    rerun_skipped: tuple[str, ...]
    decisions: Mapping[str, RerunDecision] = field(default_factory=dict)

    @property
    def selected(self) -> tuple[str, ...]:
        return (*self.rerun, *self.rerun_skipped)


def _parents(node: Mapping[str, Any] | None) -> tuple[str, ...]:
    if not node:
        return ()
    depends_on = node.get("depends_on") or {}
    return tuple(depends_on.get("nodes") or ())


def _failed_ancestors(
    unique_id: str, nodes: Mapping[str, Mapping[str, Any]], failed: set[str]
) -> set[str]:
    """Failed nodes upstream of `unique_id` (through any nodes the manifest knows)."""
    seen: set[str] = set()
    stack = list(_parents(nodes.get(unique_id)))
    causes: set[str] = set()
    while stack:
        parent = stack.pop()
        if parent in seen:
            continue
        seen.add(parent)
        if parent in failed:
            causes.add(parent)
        stack.extend(_parents(nodes.get(parent)))
    return causes


def plan_reruns(
    outcomes: Sequence[NodeOutcome], nodes: Mapping[str, Mapping[str, Any]]
) -> RerunPlan:
    """Decide which nodes of one attempt to re-run (pure; conservative when in doubt)."""
    failed = [o for o in outcomes if o.status in FAILED_STATUSES]
    decisions: dict[str, RerunDecision] = {}
    rerun: list[str] = []
    for outcome in failed:
        verdict = classify(outcome.message or "")
        node = nodes.get(outcome.unique_id)
        if not verdict.retryable:
            reason = f"{verdict.kind}: not a retryable Iceberg conflict; {verdict.summary}"
            decisions[outcome.unique_id] = RerunDecision(outcome.unique_id, False, reason, verdict)
            continue
        if node is None:
            reason = f"{verdict.kind} is retryable, but the node is not in the manifest: cannot judge idempotency"
            decisions[outcome.unique_id] = RerunDecision(outcome.unique_id, False, reason, verdict)
            continue
        safe = idempotency(node)
        if not safe.idempotent:
            reason = f"{verdict.kind} is retryable, but the node is not idempotent ({safe.reason})"
            decisions[outcome.unique_id] = RerunDecision(outcome.unique_id, False, reason, verdict)
            continue
        reason = f"{verdict.kind}: retryable and idempotent ({safe.reason})"
        decisions[outcome.unique_id] = RerunDecision(outcome.unique_id, True, reason, verdict)
        rerun.append(outcome.unique_id)

    failed_ids = {o.unique_id for o in failed}
    rerun_set = set(rerun)
    rerun_skipped: list[str] = []
    for outcome in outcomes:
        if outcome.status != SKIPPED_STATUS:
            continue
        causes = _failed_ancestors(outcome.unique_id, nodes, failed_ids)
        if not causes:
            continue  # skipped for another reason (e.g. --fail-fast, disabled): not ours to re-run
        blocking = sorted(causes - rerun_set)
        if blocking:
            reason = f"skipped because {', '.join(blocking)} failed and is not re-run"
            decisions[outcome.unique_id] = RerunDecision(outcome.unique_id, False, reason)
        else:
            reason = f"skipped because {', '.join(sorted(causes))} failed; re-run with it"
            decisions[outcome.unique_id] = RerunDecision(outcome.unique_id, True, reason)
            rerun_skipped.append(outcome.unique_id)
    return RerunPlan(tuple(rerun), tuple(rerun_skipped), decisions)


def strip_selection(dbt_args: Sequence[str]) -> list[str]:
    """Drop selection flags and their values (dbt's multi-value options run to the next flag)."""
    kept: list[str] = []
    dropping = False
    for arg in dbt_args:
        flag = arg.split("=", 1)[0]
        if flag in SELECTION_FLAGS:
            dropping = "=" not in arg
            continue
        if dropping and not arg.startswith("-"):
            continue
        dropping = False
        kept.append(arg)
    return kept


def selector(node: Mapping[str, Any] | None, unique_id: str) -> str:
    """A `--select` value naming exactly this node: `fqn:` of the node, else its name."""
    fqn = (node or {}).get("fqn")
    if fqn:
        return "fqn:" + ".".join(str(part) for part in fqn)
    return unique_id.split(".")[-1]


def rerun_args(command: str, dbt_args: Sequence[str], plan: RerunPlan, nodes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    selectors = [selector(nodes.get(uid), uid) for uid in plan.selected]
    return [command, *strip_selection(dbt_args), "--select", *selectors]


def exponential_backoff(
    attempt: int, base_seconds: float = 2.0, cap_seconds: float = 60.0, rng: Callable[[], float] = random.random
) -> float:
    """Seconds to wait after failed attempt `attempt` (1-based): doubling, capped, half jittered."""
    delay = min(cap_seconds, base_seconds * 2 ** (attempt - 1))
    return delay / 2 + rng() * delay / 2


# ---------------------------------------------------------------------------------------------
# The report


@dataclass(frozen=True)
class AttemptRecord:
    attempt: int
    status: str
    kind: str | None  # classification kind of a failure, None when the node did not fail
    message: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class NodeReport:
    unique_id: str
    name: str
    resource_type: str
    final_status: str
    attempts: tuple[AttemptRecord, ...]
    not_rerun_reason: str | None

    @property
    def succeeded(self) -> bool:
        return self.final_status in SUCCESS_STATUSES

    def to_dict(self) -> dict[str, Any]:
        return {
            "unique_id": self.unique_id,
            "name": self.name,
            "resource_type": self.resource_type,
            "final_status": self.final_status,
            "attempts": len(self.attempts),
            "kinds": [record.kind for record in self.attempts],
            "history": [
                {"attempt": r.attempt, "status": r.status, "kind": r.kind, "message": r.message}
                for r in self.attempts
            ],
            "not_rerun_reason": self.not_rerun_reason,
        }


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


class _ReportBuilder:
    """Accumulates attempts into per-node histories."""

    def __init__(self) -> None:
        self.history: dict[str, list[AttemptRecord]] = {}
        self.info: dict[str, NodeResult] = {}
        self.reasons: dict[str, str | None] = {}

    def record(self, attempt: int, results: Sequence[NodeResult]) -> None:
        for result in results:
            kind = classify(result.message or "").kind if result.status in FAILED_STATUSES else None
            self.history.setdefault(result.unique_id, []).append(
                AttemptRecord(attempt, result.status, kind, result.message)
            )
            self.info[result.unique_id] = result
            self.reasons[result.unique_id] = None

    def decide(self, plan: RerunPlan) -> None:
        for unique_id, decision in plan.decisions.items():
            if not decision.rerun:
                self.reasons[unique_id] = decision.reason

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
                final_status=records[-1].status,
                attempts=tuple(records),
                not_rerun_reason=self.reasons.get(uid),
            )
            for uid, records in self.history.items()
        )
        return RunReport(command, tuple(dbt_args), attempts, max_attempts, nodes, error, usage_error)


Invoker = Callable[[Sequence[str]], DbtInvocation]


def default_profiles_dir(project_dir: Path, environ: Mapping[str, str]) -> Path:
    """dbt's own order: DBT_PROFILES_DIR, the project directory if it has profiles.yml, ~/.dbt."""
    if environ.get("DBT_PROFILES_DIR"):
        return Path(environ["DBT_PROFILES_DIR"])
    if (project_dir / "profiles.yml").is_file():
        return project_dir
    return Path.home() / ".dbt"


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
) -> RunReport:
    """Run `dbt <command> <dbt_args>` in-process; re-run retryable, idempotent failures.

    The Python API behind `dbt-iceberg-maint run` (for Airflow, Dagster, ...). Returns the
    report; never raises for model failures (see `RunReport.success` / `exit_code`).
    `profiles_dir` defaults as in dbt: DBT_PROFILES_DIR, the project directory if it holds a
    profiles.yml, else ~/.dbt.
    """
    if command not in COMMANDS:
        raise UsageError(f"command {command!r} is not supported; expected one of {', '.join(COMMANDS)}")
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise UsageError(f"max_attempts is {max_attempts!r}; expected an integer >= 1")
    if dbt_args and dbt_args[0] in {"run", "build", "test", "seed", "snapshot", "compile"}:
        raise UsageError(
            f"dbt arguments start with the command {dbt_args[0]!r}; pass the command with "
            "--command (run|build) and only its options as dbt arguments"
        )

    profiles = profiles_dir or default_profiles_dir(Path(project_dir).resolve(), os.environ)

    def default_invoke(args: Sequence[str]) -> DbtInvocation:
        return invoke_dbt(args, project_dir, profiles, env)

    call = invoke or default_invoke
    report = _ReportBuilder()
    args: list[str] = [command, *dbt_args]
    attempt = 0
    nodes: dict[str, Mapping[str, Any]] = {}
    while True:
        attempt += 1
        invocation = call(args)
        if not invocation.nodes and not invocation.success:
            # dbt itself failed (bad arguments, project or profile error): nothing to re-run.
            return report.build(command, dbt_args, attempt, max_attempts,
                                invocation.exception or "dbt failed before running any node",
                                usage_error=invocation.usage_error)
        report.record(attempt, invocation.nodes)
        nodes.update({n.unique_id: n.manifest_node for n in invocation.nodes if n.manifest_node})
        outcomes = [NodeOutcome(n.unique_id, n.status, n.message) for n in invocation.nodes]
        plan = plan_reruns(outcomes, nodes)
        report.decide(plan)
        if not plan.rerun:
            break
        if attempt >= max_attempts:
            report.exhausted(plan, max_attempts)
            break
        sleep(backoff(attempt))
        args = rerun_args(command, dbt_args, plan, nodes)
    return report.build(command, dbt_args, attempt, max_attempts, None)


# ---------------------------------------------------------------------------------------------
# Presentation


def report_table(report: RunReport) -> Any:
    """The report as a rich Table: one row per node that failed, was skipped or was re-run."""
    from rich.table import Table

    table = Table(title=f"dbt {report.command}: {report.attempts} attempt(s) of at most {report.max_attempts}")
    for column in ("node", "final status", "attempts", "kind per attempt", "not re-run because"):
        table.add_column(column, overflow="fold")
    for node in report.nodes:
        if node.succeeded and len(node.attempts) == 1:
            continue  # succeeded at once: nothing to tell
        kinds = " -> ".join(record.kind or record.status for record in node.attempts)
        style = "green" if node.succeeded else "red"
        table.add_row(node.name, f"[{style}]{node.final_status}[/{style}]", str(len(node.attempts)), kinds,
                      node.not_rerun_reason or "")
    ok = sum(1 for node in report.nodes if node.succeeded and len(node.attempts) == 1)
    table.caption = f"{ok} node(s) succeeded at the first attempt and are not listed"
    return table
