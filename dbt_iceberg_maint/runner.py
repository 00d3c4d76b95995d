"""Run dbt, classify Iceberg commit failures, re-run only what is safe to re-run.

The decision is a pure function, `plan_reruns`: from one attempt's recorded node results and
the manifest nodes to a re-run plan. A failed node is re-run only if its failure is a retryable
Iceberg conflict (`conflicts.classify`) *and* the node is idempotent (`idempotency`); nodes
that dbt skipped because of such a failure are re-run with it. Every other node that did not
succeed gets the reason it is not re-run. A failing post-hook (e.g. a compaction hook losing a
conflict) follows the same rule: the model's own write may already have landed, which
idempotency makes harmless.

A re-run selects exactly the planned nodes (`exact_selector`), never a neighbour whose name
happens to extend theirs.

`run_dbt_with_retries` is the thin shell: dbt in-process (`invoke.invoke_dbt`), an injectable
backoff between attempts, and a bounded number of attempts.
"""

from __future__ import annotations

import glob
import json
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.conflicts import Classification, classify
from dbt_iceberg_maint.errors import IcebergMaintError, UsageError
from dbt_iceberg_maint.idempotency import idempotency
from dbt_iceberg_maint.invoke import (
    FAILED_STATUSES,
    DbtInvocation,
    Invoker,
    NodeResult,
    default_profiles_dir,
    invoke_dbt,
)
from dbt_iceberg_maint.landed import COMMIT_STATE_UNKNOWN, LandedVerdict, Statement, TableLog, verify_landed
from dbt_iceberg_maint.snapshot_reader import (
    CONTEXT_FLAGS,
    DbtSnapshotReader,
    SnapshotReader,
    keep_flags,
    verified_table,
)

# Only these end a node successfully. `partial success` (a microbatch model with failed
# batches) does not: exit 0 must mean that everything succeeded.
SUCCESS_STATUSES = frozenset({"success", "pass", "warn", "no-op"})
SKIPPED_STATUS = "skipped"
NOT_RERUN_STATUSES = {
    "partial success": "partial success: some batches of this microbatch model failed; not re-run "
                       "(`dbt retry` re-runs only the failed batches)",
}
COMMANDS = ("run", "build")
# dbt selection flags; a re-run replaces them with its own exact selection.
SELECTION_FLAGS = frozenset({"--select", "-s", "--models", "--model", "-m", "--exclude", "--selector",
                             "--indirect-selection"})


class NotSelectable(IcebergMaintError):
    """dbt's selection syntax cannot name exactly this node."""


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
    """Why a node that did not succeed is (not) re-run; `selector` names it when it is."""

    unique_id: str
    rerun: bool
    reason: str
    classification: Classification | None = None
    selector: str | None = None
    landed: LandedVerdict | None = None
    # The write landed and the failure left nothing undone (commit_state_unknown that landed).
    resolved: bool = False
    # dbt arguments that re-run the failed post-hook alone (the write landed, the hook is safe).
    hook_rerun: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RerunPlan:
    """`rerun`: failed nodes to re-run; `rerun_skipped`: their skipped descendants."""

    rerun: tuple[str, ...]
    rerun_skipped: tuple[str, ...]
    decisions: Mapping[str, RerunDecision] = field(default_factory=dict)

    @property
    def selected(self) -> tuple[str, ...]:
        return (*self.rerun, *self.rerun_skipped)


Nodes = Mapping[str, Mapping[str, Any]]


def _parents(node: Mapping[str, Any] | None) -> tuple[str, ...]:
    if not node:
        return ()
    depends_on = node.get("depends_on") or {}
    return tuple(depends_on.get("nodes") or ())


def _ancestors(unique_id: str, nodes: Nodes) -> set[str]:
    """Everything upstream of `unique_id`, through nodes that never show in run results
    (ephemeral models): hence the whole manifest, not only the nodes that ran."""
    seen: set[str] = set()
    stack = list(_parents(nodes.get(unique_id)))
    while stack:
        parent = stack.pop()
        if parent not in seen:
            seen.add(parent)
            stack.extend(_parents(nodes.get(parent)))
    return seen


def _skip_causes(unique_id: str, nodes: Nodes, unsuccessful: set[str]) -> set[str]:
    """The nodes that did not succeed and made dbt skip `unique_id`."""
    upstream = _ancestors(unique_id, nodes)
    causes = upstream & unsuccessful
    # `dbt build` also waits on tests: a failed data test skips every node downstream of all the
    # nodes it tests (dbt's test edges), a failed unit test also skips the model it tests.
    for test in unsuccessful - upstream:
        node = nodes.get(test) or {}
        tested = set(_parents(node))
        if node.get("resource_type") == "test" and tested and tested <= upstream:
            causes.add(test)
        elif node.get("resource_type") == "unit_test" and tested and tested <= upstream | {unique_id}:
            causes.add(test)
    return causes


def _flat_fqn(fqn: Sequence[str]) -> list[str]:
    return [part for segment in fqn for part in str(segment).split(".")]


def _fqn_selects(selector: Sequence[str], fqn: Sequence[str]) -> bool:
    """dbt's `fqn:` match: the selector's parts start the node's fqn, with or without its package."""
    flat = _flat_fqn(fqn)
    return flat[: len(selector)] == list(selector) or flat[1 : len(selector) + 1] == list(selector)


def exact_selector(unique_id: str, nodes: Nodes, root_project: str | None = None) -> str:
    """A dbt `--select` value that resolves to exactly this node (raises `NotSelectable`).

    dbt's `fqn:` selects every node whose fqn *starts* with the given parts: `fqn:proj.events`
    (models/events.sql) also selects models/events/events_log.sql ([proj, events, events_log]),
    and a model's unit tests sit under the model's fqn. So the fqn is intersected (dbt's `,`)
    with the resource type and the node's file. `path:` resolves against the root project and
    cannot name a file of an installed package: such a node is narrowed by `package:` instead,
    which is exact only when no other node of that package and type extends its fqn.
    """
    node = nodes.get(unique_id)
    if not node:
        raise NotSelectable("the node is not in the manifest")
    fqn = _flat_fqn(node.get("fqn") or ())
    resource_type = node.get("resource_type")
    package = node.get("package_name")
    path = node.get("original_file_path")
    if not fqn or not resource_type:
        raise NotSelectable("the manifest gives no fqn or resource type for it")
    parts = [f"fqn:{'.'.join(fqn)}", f"resource_type:{resource_type}"]
    # Root project unknown (dbt wrote no manifest.json): `path:` throughout. It may miss a
    # package's node (the report then says dbt did not run it) but never selects another node.
    if root_project is None or package == root_project:
        if not path:
            raise NotSelectable("the manifest gives no file for it")
        parts.append(f"path:{glob.escape(str(path))}")  # dbt globs the path
    else:
        extended = sorted(
            uid for uid, other in nodes.items()
            if uid != unique_id and other.get("package_name") == package
            and other.get("resource_type") == resource_type and _fqn_selects(fqn, other.get("fqn") or ())
        )
        if extended:
            raise NotSelectable(f"in package {package!r}, fqn:{'.'.join(fqn)} also selects {', '.join(extended)}")
        parts.append(f"package:{package}")
    spec = ",".join(parts)
    if any(char.isspace() for char in spec) or any("," in part for part in parts):
        raise NotSelectable(f"{spec!r} has a space or comma, which dbt's selector syntax splits on")
    return spec


# A post-hook the runner may repeat alone when the model's write landed: this package's
# maintain(), which `iceberg_maintenance` runs for the same model with the same policy.
REPEATABLE_HOOKS = frozenset({"{{dbt_iceberg_maint.maintain()}}"})


def hook_rerun_args(node: Mapping[str, Any] | None) -> tuple[str, ...] | None:
    """`dbt run-operation` arguments that repeat the node's post-hooks alone, or None when they
    are not all known to be safe to repeat (see `REPEATABLE_HOOKS`)."""
    if not node:
        return None
    config = node.get("config") or {}
    hooks = config.get("post-hook") or config.get("post_hook") or []
    sqls = ["".join(str(h.get("sql", "") if isinstance(h, Mapping) else h).split()) for h in hooks]
    if not sqls or any(sql not in REPEATABLE_HOOKS for sql in sqls):
        return None
    name = f"{node.get('package_name')}.{node.get('name')}" if node.get("package_name") else str(node.get("name"))
    return ("run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args", json.dumps({"select": [name]}))


def _decide_failure(
    outcome: NodeOutcome, nodes: Nodes, root_project: str | None, landed: LandedVerdict | None = None
) -> RerunDecision:
    uid = outcome.unique_id
    verdict = classify(outcome.message or "")
    kind = verdict.kind

    def refuse(reason: str) -> RerunDecision:
        return RerunDecision(uid, False, reason, verdict, landed=landed)

    def rerun(reason: str) -> RerunDecision:
        try:
            spec = exact_selector(uid, nodes, root_project)
        except NotSelectable as exc:
            return refuse(f"{reason}, but the node cannot be selected exactly: {exc}")
        return RerunDecision(uid, True, reason, verdict, spec, landed=landed)

    undecided = f"whether its write landed cannot be decided: {landed.reason}" if landed else (
        "its write was not verified (no snapshot record of its table)")
    if kind == COMMIT_STATE_UNKNOWN:
        if landed is None:  # today's answer
            return refuse(f"{kind}: not a retryable Iceberg conflict; {verdict.summary}; {undecided}")
        if landed.landed is None:
            return refuse(f"{kind}: not re-run, {undecided}")
        if landed.landed:
            return RerunDecision(uid, False, f"write landed; commit failed: {kind}; counts as success "
                                             f"({landed.reason})", verdict, landed=landed, resolved=True)
        return rerun(f"{kind}: the write verifiably did not land ({landed.reason}); re-run")
    if not verdict.retryable:
        return refuse(f"{kind}: not a retryable Iceberg conflict; {verdict.summary}")
    node = nodes.get(uid)
    if node is None:
        return refuse(f"{kind} is retryable, but the node is not in the manifest: cannot judge idempotency")
    try:
        safe = idempotency(node)
    except UsageError as exc:  # a bad `meta.iceberg_maint.idempotent`: this node's problem, not the run's
        return refuse(f"{kind} is retryable, but not re-run: {exc}")
    if safe.idempotent:  # today's rule, whatever the snapshots say: a re-run cannot duplicate
        return rerun(f"{kind}: retryable and idempotent ({safe.reason})")
    if landed is None or landed.landed is None:
        return refuse(f"{kind} is retryable, but the node is not idempotent ({safe.reason}) and {undecided}")
    if not landed.landed:
        return rerun(f"{kind}: retryable; the node is not idempotent ({safe.reason}) but its write verifiably "
                     f"did not land ({landed.reason}); re-run")
    hook = hook_rerun_args(node)
    repeat = ("its post-hook (maintain()) is re-run alone" if hook else
              "its post-hook is not re-run (only this package's maintain() hook is known to be safe to repeat)")
    decision = refuse(f"write landed; post-hook failed: {kind}; the model is not re-run: the node is not "
                      f"idempotent ({safe.reason}); {repeat} ({landed.reason})")
    return RerunDecision(uid, False, decision.reason, verdict, landed=landed, hook_rerun=hook)


def _decide_skipped(
    uid: str, nodes: Nodes, root_project: str | None, unsuccessful: set[str], rerun: set[str]
) -> RerunDecision:
    causes = _skip_causes(uid, nodes, unsuccessful)
    if not causes:
        reason = "skipped by dbt, not because of a failed ancestor (e.g. --fail-fast); not re-run"
        return RerunDecision(uid, False, reason)
    blocking = sorted(causes - rerun)
    if blocking:
        return RerunDecision(uid, False, f"skipped because {', '.join(blocking)} failed and is not re-run")
    because = f"skipped because {', '.join(sorted(causes))} failed"
    try:
        spec = exact_selector(uid, nodes, root_project)
    except NotSelectable as exc:
        return RerunDecision(uid, False, f"{because}; cannot be selected exactly: {exc}")
    return RerunDecision(uid, True, f"{because}; re-run with it", selector=spec)


def plan_reruns(
    outcomes: Sequence[NodeOutcome],
    nodes: Nodes,
    *,
    root_project: str | None = None,
    landed: Mapping[str, LandedVerdict] | None = None,
) -> RerunPlan:
    """Decide which nodes of one attempt to re-run (pure; conservative when in doubt).

    `nodes`: manifest nodes by unique_id (manifest.json `nodes` and `unit_tests`), ideally the
    whole project so that ancestry runs through ephemeral models. `root_project`: the manifest's
    `metadata.project_name` (see `exact_selector`). Every node that did not succeed gets a
    decision; successful nodes get none. `landed`: landed verification per failed node
    (`landed.verify_landed`): a node that is not idempotent, or failed with
    `commit_state_unknown`, is re-run only when its write verifiably did not land.
    """
    decisions: dict[str, RerunDecision] = {}
    for outcome in outcomes:
        uid, status = outcome.unique_id, outcome.status
        if status in FAILED_STATUSES:
            decisions[uid] = _decide_failure(outcome, nodes, root_project, (landed or {}).get(uid))
        elif status not in SUCCESS_STATUSES and status != SKIPPED_STATUS:
            reason = NOT_RERUN_STATUSES.get(status, f"status {status!r}: not a failure the runner re-runs")
            decisions[uid] = RerunDecision(uid, False, reason)
    rerun = tuple(uid for uid, decision in decisions.items() if decision.rerun)
    unsuccessful = set(decisions)
    # A commit_state_unknown that landed is a success: its skipped children run again.
    unblocked = set(rerun) | {uid for uid, decision in decisions.items() if decision.resolved}
    skipped = [o.unique_id for o in outcomes if o.status == SKIPPED_STATUS]
    for uid in skipped:
        decisions[uid] = _decide_skipped(uid, nodes, root_project, unsuccessful, unblocked)
    return RerunPlan(rerun, tuple(uid for uid in skipped if decisions[uid].rerun), decisions)


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


def rerun_args(command: str, dbt_args: Sequence[str], plan: RerunPlan) -> list[str]:
    """The next attempt's dbt arguments: the user's, with the selection replaced by the plan's.

    `--indirect-selection empty`: otherwise dbt adds the tests of every selected model, e.g. a
    model's unit tests that already passed.
    """
    selectors = [str(plan.decisions[uid].selector) for uid in plan.selected]
    return [command, *strip_selection(dbt_args), "--select", *selectors, "--indirect-selection", "empty"]


def exponential_backoff(
    attempt: int, base_seconds: float = 2.0, cap_seconds: float = 60.0, rng: Callable[[], float] = random.random
) -> float:
    """Seconds to wait after failed attempt `attempt` (1-based): a random time between half and
    all of min(cap, base * 2**(attempt - 1)), e.g. 1-2 s, 2-4 s, 4-8 s for a base of 2 s."""
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


class _ReportBuilder:
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
        return invoke_dbt(args, project_dir, profiles, env, read_manifest=True)

    call = invoke or default_invoke
    reader = snapshots if snapshots is not None else (DbtSnapshotReader(call, dbt_args) if invoke is None else None)
    if not verify_landed_writes:
        reader = None
    report = _ReportBuilder()
    args: list[str] = [command, *dbt_args]
    attempt = 0
    nodes: dict[str, Mapping[str, Any]] = {}
    root_project: str | None = None
    selected: tuple[str, ...] = ()
    while True:
        attempt += 1
        watch = _SnapshotWatch(reader, reader.selected_nodes(dbt_args) if attempt == 1 else
                               {uid: nodes[uid] for uid in selected if uid in nodes}) if reader else None
        invocation = call(args)
        if not invocation.nodes and not invocation.success:
            # dbt itself failed (bad arguments, project or profile error): nothing to re-run.
            return report.build(command, dbt_args, attempt, max_attempts,
                                invocation.exception or "dbt failed before running any node",
                                usage_error=invocation.usage_error)
        landed = watch.verify(invocation) if watch else {}
        report.record(attempt, invocation.nodes, selected, landed)
        nodes.update({n.unique_id: n.manifest_node for n in invocation.nodes if n.manifest_node})
        if invocation.manifest is not None:
            nodes.update(invocation.manifest.nodes)
            root_project = invocation.manifest.project_name
        outcomes = [NodeOutcome(n.unique_id, n.status, n.message) for n in invocation.nodes]
        plan = plan_reruns(outcomes, nodes, root_project=root_project, landed=landed)
        report.decide(plan)
        for uid, decision in plan.decisions.items():
            if decision.hook_rerun:
                hook_args = [*decision.hook_rerun, *keep_flags(dbt_args, CONTEXT_FLAGS)]
                hook = call(hook_args)
                report.hook(uid, HookRerun(tuple(hook_args), hook.success, hook.exception))
        if not plan.selected:
            break
        if attempt >= max_attempts:
            report.exhausted(plan, max_attempts)
            break
        sleep(backoff(attempt))
        args = rerun_args(command, dbt_args, plan)
        selected = plan.selected
    return report.build(command, dbt_args, attempt, max_attempts, None)


class _SnapshotWatch:
    """One attempt's landed verification: the tables' current snapshots before, the verdicts after."""

    def __init__(self, reader: SnapshotReader, candidates: Mapping[str, Mapping[str, Any]]) -> None:
        self.reader = reader
        self.tables = {uid: table for uid, node in candidates.items() if (table := verified_table(node))}
        read = reader.read(sorted(set(self.tables.values())), {})
        self.app_id = read.app_id
        self.before: Mapping[str, TableLog] = read.tables

    def verify(self, invocation: DbtInvocation) -> dict[str, LandedVerdict]:
        failed = [n for n in invocation.nodes
                  if n.status in FAILED_STATUSES and self.tables.get(n.unique_id) in self.before]
        if not failed:
            return {}
        tables = sorted({self.tables[n.unique_id] for n in failed})
        after = {t: current.snapshot_id for t in tables if (current := self.before[t].current) is not None}
        read = self.reader.read(tables, after)
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


# ---------------------------------------------------------------------------------------------
# Presentation


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
