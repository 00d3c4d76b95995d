"""Which nodes of one attempt to re-run (pure): `plan_reruns`, and exactly how to select them.

From one attempt's recorded node results and the manifest nodes to a re-run plan. A failed node
is re-run only if its failure is a retryable Iceberg conflict (`conflicts.classify`) *and* the
node is idempotent (`idempotency`), or, for a node that may not be re-run blindly and for
`commit_state_unknown`, when landed verification (`landed.verify_landed`) proved that its write
did not land. A verdict that cannot tell a deterministic failure from a conflict (`undecided`) is
never re-run. Nodes that dbt skipped because of such a failure are re-run with it. Every other
node that did not succeed gets the reason it is not re-run.

A re-run selects exactly the planned nodes (`exact_selector`), never a neighbour whose name
happens to extend theirs.

Over 300 lines because the re-run decision and the exact selector it emits must stay together.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dbt_iceberg_maint.conflicts import Classification, classify
from dbt_iceberg_maint.errors import NotSelectable, UsageError
from dbt_iceberg_maint.runner.idempotency import idempotency
from dbt_iceberg_maint.runner.landed import COMMIT_STATE_UNKNOWN, LandedVerdict
from dbt_iceberg_maint.runtime.invoke import FAILED_STATUSES

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
    if verdict.undecided:  # a re-run may fail the same way: never re-run a model on a guess
        return refuse(f"{kind}: undecided, not re-run: {verdict.undecided}")
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
