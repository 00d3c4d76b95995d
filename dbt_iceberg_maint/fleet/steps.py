"""A fleet step's dbt invocations and what they came to: the arguments of a step and of the
engine's own history records, the step's outcome from its invocation, and what follows a failed
step (a compaction's deciding re-run, the lease given back)."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from dbt_iceberg_maint.fleet import scheduler
from dbt_iceberg_maint.fleet.scheduler import Step, StepOutcome
from dbt_iceberg_maint.fleet.workers import Ran, Worker
from dbt_iceberg_maint.maintenance.leases import LEASE_KEPT, give_back_args
from dbt_iceberg_maint.maintenance.results import MaintenanceResult, history_problems, parse_result_lines
from dbt_iceberg_maint.maintenance.rewrite_probe import probe_args
from dbt_iceberg_maint.maintenance.run import (
    error_text,
    interrupted_step,
    marker_messages,
    needs_probe,
    probed,
    record_args,
)
from dbt_iceberg_maint.runtime.invoke import DbtInvocation


def utc(epoch_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s, dt.timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def is_call(sql: str) -> bool:
    """A procedure CALL, behind dbt's query comment if any."""
    text = sql.lstrip()
    while text.startswith("/*") and "*/" in text:
        text = text.split("*/", 1)[1].lstrip()
    return text[:5].upper() == "CALL "


def step_outcome(step: Step, ran: Ran, started: float, finished: float, worker: int,
                 timeout_s: float | None) -> StepOutcome:
    """The step's result from its invocation: the macros' RESULT line, else the error that
    stopped it (classified), a timeout, or the worker's death."""
    base = StepOutcome(step.table, step.operation, "failed", sql=step.sql, started_at=utc(started),
                       finished_at=utc(finished), duration_s=round(finished - started, 3), worker=worker,
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
    from dbt_iceberg_maint.maintenance.run import PlanStep

    return PlanStep(step.table, step.operation, step.status, step.reason or None, step.sql)


def step_args(step: Step, record: Mapping[str, Any] | None, dbt_args: Sequence[str],
              history_checked: bool = False, checked: Mapping[str, Iterable[str]] | None = None,
              lease: Mapping[str, Any] | None = None, keep_lease: bool = False,
              defer_history: bool = False) -> list[str]:
    """One step through execute_maintenance_steps; with `record`, the check it settles is recorded;
    `history_checked`: an earlier invocation of the run found the history table ready; `checked`:
    what earlier invocations of the run checked once (results.checked_facts), not checked again;
    `lease`: the table's lease the run's previous step on it kept (results.kept_leases), taken up
    instead of claimed; `keep_lease`: the lease stays held after the step (for the table's next step,
    or released with the pool's next batch: pool.py); `defer_history`: the step's history row is
    logged, not written (the pool writes it with its next batch)."""
    args: dict[str, Any] = {"steps": [step.plan_step()]}
    if lease is not None:
        args["leases"] = [dict(lease)]
    if keep_lease:
        args["keep_leases"] = True
    if defer_history:
        args["defer_history"] = True
    if record is not None:
        args["record"] = dict(record)
    if history_checked:
        args["history_checked"] = True
    known = {kind: sorted(names) for kind, names in (checked or {}).items() if names}
    if known:
        args["checked"] = known
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


def after_failure(worker: Worker, step: Step, outcome: StepOutcome, record: Mapping[str, Any] | None, run_id: str,
                  dbt_args: Sequence[str], timeout_s: float | None) -> tuple[StepOutcome, int]:
    """After a step Spark stopped (not a timeout or a dead worker: their CALL may still run): an
    undecided compaction is re-run once to decide it, as `maintain` does, and a step still failed
    gives back the table's lease its stopped macro left taken. Returns the outcome and the
    invocations it took."""
    if outcome.status != "failed" or outcome.kind in ("timeout", "worker_died"):
        return outcome, 0
    invocations = 0
    if needs_probe(step.operation, outcome.metrics):
        probe = worker.run([*probe_args(step.table, policy=(record or {}).get("policy")), *dbt_args], timeout_s)
        outcome = replace(_probed_outcome(outcome, probe), finished_at=utc(time.time()))
        invocations += 1
    if outcome.status == "failed" and outcome.kind not in ("timeout", "worker_died"):
        released = worker.run([*give_back_args(step.table, run_id), *dbt_args], timeout_s).invocation
        invocations += 1
        outcome = replace(outcome, statements=outcome.statements + len(released.sql_statements if released else ()))
        if released is None or not released.success:
            outcome = replace(outcome, reason=f"{outcome.reason} ({LEASE_KEPT})")
    return outcome, invocations



def recording_problems(invocation: DbtInvocation | None) -> tuple[str, ...]:
    """What kept the recorded outcomes' history rows from being written: the macros' problems, or
    the recording invocation's own failure."""
    if invocation is None:
        return ()
    problems = history_problems(marker_messages(invocation))
    if not invocation.success:
        problems += (f"the outcomes the engine settled were not recorded: {error_text(invocation)}",)
    return problems
