"""Run dbt, classify Iceberg commit failures, re-run only what is safe to re-run.

- `plan`: the pure re-run decision (`plan_reruns`) and exact selection of the re-run nodes.
- `report`: the report model (JSON contract) and its console table.
- `loop`: `run_dbt_with_retries`, the thin shell: dbt in-process (`runtime.invoke.invoke_dbt`),
  landed verification around each attempt (`landed`, `snapshot_reader`), an injectable backoff and
  a bounded number of attempts.
- `idempotency` (pure): a dbt node → may it be re-run?
- `landed` (pure): did a failed node's write land? decided by lineage from the snapshot log.
- `snapshot_reader`: snapshot logs for landed verification over the user's own dbt connection.
- `failure_log` (pure): a dbt log, console output or run_results.json → one failure text per node
  (`dbt-iceberg-maint classify`).
"""

from __future__ import annotations

from dbt_iceberg_maint.errors import NotSelectable
from dbt_iceberg_maint.runner.loop import exponential_backoff, run_dbt_with_retries
from dbt_iceberg_maint.runner.plan import (
    COMMANDS,
    NOT_RERUN_STATUSES,
    REPEATABLE_HOOKS,
    SELECTION_FLAGS,
    SKIPPED_STATUS,
    SUCCESS_STATUSES,
    NodeOutcome,
    RerunDecision,
    RerunPlan,
    exact_selector,
    hook_rerun_args,
    plan_reruns,
    rerun_args,
    strip_selection,
)
from dbt_iceberg_maint.runner.report import AttemptRecord, HookRerun, NodeReport, RunReport, report_table

__all__ = [
    "COMMANDS", "NOT_RERUN_STATUSES", "REPEATABLE_HOOKS", "SELECTION_FLAGS", "SKIPPED_STATUS", "SUCCESS_STATUSES",
    "AttemptRecord", "HookRerun", "NodeOutcome", "NodeReport", "NotSelectable", "RerunDecision", "RerunPlan",
    "RunReport", "exact_selector", "exponential_backoff", "hook_rerun_args", "plan_reruns", "report_table",
    "rerun_args", "run_dbt_with_retries", "strip_selection",
]
