"""The one protocol between the Jinja macros and the Python layer.

The macros log machine-readable lines `<MARKER> <json>` through one logging macro
(`_iceberg_maint_log_marker`, macros/internal/protocol.sql) whose constants come from
`_iceberg_maint_protocol()`. tests/unit/test_protocol.py renders that macro and fails when the
two sides drift, so every name below is written once per side and checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Final

# One executed, skipped, failed or dry-run operation (maintenance/results.py reads it).
RESULT_MARKER: Final = "ICEBERG_MAINT_RESULT"
# iceberg_maintenance's whole plan, logged once before the first step runs (maintenance/run.py).
PLAN_MARKER: Final = "ICEBERG_MAINT_PLAN"
# A step (or a table's planning, operation null) taken up; debug level. What a statement Spark
# rejects at run time belongs to.
START_MARKER: Final = "ICEBERG_MAINT_START"
# The tables iceberg_maintenance selected, logged before planning: what remains when the
# planning of one table fails at run time.
SELECTION_MARKER: Final = "ICEBERG_MAINT_SELECTION"
# The table_snapshots macro's snapshot log of the selected tables (landed verification, runner/landed.py).
SNAPSHOTS_MARKER: Final = "ICEBERG_MAINT_SNAPSHOTS"
# The current leases list_leases found, or the one break_lease ended (maintenance/leases.py).
LEASES_MARKER: Final = "ICEBERG_MAINT_LEASES"
# One flush of maintenance history rows (macros/internal/history.sql): debug level when written,
# info level when the history could not be written (`problem`), docs/history.md.
HISTORY_MARKER: Final = "ICEBERG_MAINT_HISTORY"
# What an invocation that executed steps found once for all of them (debug level): the lease logs
# that exist and the catalogs that are not Nessie catalogs; the fleet engine hands them to the
# run's later invocations (execute_maintenance_steps' `checked`).
CHECKED_MARKER: Final = "ICEBERG_MAINT_CHECKED"
# The leases an invocation asked to keep held after its steps (execute_maintenance_steps'
# `keep_leases`; debug level): the fleet engine hands each to the table's next step (`leases`).
KEPT_MARKER: Final = "ICEBERG_MAINT_KEPT"
# A step's history row its invocation did not write (execute_maintenance_steps' `defer_history`;
# debug level): the fleet engine writes the rows of many steps in one INSERT (claim_leases'
# `history_rows`).
HISTORY_ROWS_MARKER: Final = "ICEBERG_MAINT_HISTORY_ROWS"
MARKERS: Final = (RESULT_MARKER, PLAN_MARKER, START_MARKER, SELECTION_MARKER, SNAPSHOTS_MARKER, LEASES_MARKER,
                  HISTORY_MARKER, CHECKED_MARKER, KEPT_MARKER, HISTORY_ROWS_MARKER)

# Result statuses (the contract's result channel).
SUCCESS: Final = "success"
SKIPPED: Final = "skipped"
FAILED: Final = "failed"
DRY_RUN: Final = "dry_run"
STATUSES: Final = (SUCCESS, SKIPPED, FAILED, DRY_RUN)

# Statuses of a plan's step: planned runs; skipped and failed (known to fail without running,
# e.g. gc.enabled=false) only log their result line.
PLANNED: Final = "planned"
STEP_STATUSES: Final = (PLANNED, SKIPPED, FAILED)
STEP_KEYS: Final = ("table", "operation", "status", "reason", "sql")
# How a skipped step's reason starts when the fleet engine's budget closed before it started (its
# history row; iceberg_healthy's max_backlog_operations counts them).
BACKLOG_REASON_PREFIX: Final = "backlog:"

# Maintenance operations in the canonical order (Iceberg's advice); `compaction` is an alias
# of rewrite_data_files in `operations` arguments and the policy's section name. The statistics
# come last: every rewrite before them commits a snapshot, and statistics are bound to one.
OPERATIONS: Final = (
    "rewrite_data_files",
    "rewrite_position_delete_files",
    "expire_snapshots",
    "remove_orphan_files",
    "rewrite_manifests",
    "compute_table_stats",
    "compute_partition_stats",
)
DEFAULT_OPERATIONS: Final = ("rewrite_data_files", "expire_snapshots", "remove_orphan_files", "rewrite_manifests")
OPERATION_ALIASES: Final = {"compaction": "rewrite_data_files"}
# Keys of meta.iceberg_maint besides `enabled`, the operations' sections and cost_gate: owned by
# the table properties (isolation_level, commit_retry, properties), the runner (idempotent) and
# the lint (lint_ignore); the policy accepts them and does not read them.
POLICY_OTHER_KEYS: Final = ("idempotent", "isolation_level", "commit_retry", "properties", "lint_ignore")

# table_health's fields (macro dict, its result line's metrics, `dbt-iceberg-maint health`).
HEALTH_FIELDS: Final = (
    "table",
    "data_files",
    "small_files",
    "data_bytes",
    "delete_files",
    "records",
    "snapshots",
    "oldest_snapshot_age_hours",
    "manifests",
    "data_manifests",
    "partitions",
    "max_small_files_in_partition",
    "deletion_vectors",  # format v3: Puffin delete files (rewrite_position_delete_files leaves them)
    "max_partition_delete_ratio",  # the greatest share of a partition's rows deletion vectors delete
    "target_file_size_bytes",
    "small_file_threshold_bytes",
)


def canonical_operations(operations: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """The requested operations in canonical order (defaults for None), as the macros resolve them.

    Unknown names are left to the macros, which refuse them with a message naming the value.
    """
    if operations is None:
        return DEFAULT_OPERATIONS
    names = {OPERATION_ALIASES.get(name, name) for name in operations}
    return tuple(name for name in OPERATIONS if name in names)


def as_dict() -> dict[str, object]:
    """Everything the Jinja side must agree on, in the shape `_iceberg_maint_protocol()` returns."""
    return {
        "markers": {"result": RESULT_MARKER, "plan": PLAN_MARKER, "start": START_MARKER,
                    "selection": SELECTION_MARKER, "snapshots": SNAPSHOTS_MARKER, "leases": LEASES_MARKER,
                    "history": HISTORY_MARKER, "checked": CHECKED_MARKER, "kept": KEPT_MARKER,
                    "history_rows": HISTORY_ROWS_MARKER},
        "statuses": list(STATUSES),
        "step_statuses": list(STEP_STATUSES),
        "step_keys": list(STEP_KEYS),
        "backlog_reason_prefix": BACKLOG_REASON_PREFIX,
        "operations": list(OPERATIONS),
        "default_operations": list(DEFAULT_OPERATIONS),
        "operation_aliases": dict(OPERATION_ALIASES),
        "policy_other_keys": list(POLICY_OTHER_KEYS),
        "health_fields": list(HEALTH_FIELDS),
    }


def marker_payloads(messages: Iterable[str] | str, marker: str) -> Iterator[str]:
    """The one reader of marker lines: the JSON payload after each `marker` in `messages` (dbt log
    messages, or one block of text; a message may hold several lines). The marker must be a word
    of its own (a log format may prefix a time stamp) followed by a payload, so a line that merely
    quotes the marker's name is not a marker line; only the first JSON value after it is taken (a
    log format may append decoration)."""
    pattern = re.compile(rf"(?:^|\s){re.escape(marker)}(?=\s+\S)")
    for message in [messages] if isinstance(messages, str) else messages:
        for line in message.splitlines():
            match = pattern.search(line)
            if match is None:
                continue
            payload = line[match.end():].strip()
            try:
                _, end = json.JSONDecoder().raw_decode(payload)
            except json.JSONDecodeError:
                yield payload  # the caller's parser names what is wrong with it
            else:
                yield payload[:end]
