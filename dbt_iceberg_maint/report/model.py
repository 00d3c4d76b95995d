"""The report's values: a typed history row (one step of docs/history.md) and what the report
says about it. Pure: no I/O, frozen dataclasses only."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dbt_iceberg_maint.errors import HistoryError

# Skip reasons that count towards a streak, by their first words (as the maintenance paths write
# them; the same prefixes as the iceberg_maintenance_streak test, macros/tests/iceberg_maintenance_streak.sql).
LEASE_PREFIXES = ("lease held by ", "lease lost: ")
COST_GATE_PREFIX = "cost gate: "
# The health figures a history row may carry (health_before / health_after) that the trends plot.
TREND_FIGURES = ("data_files", "small_files", "delete_files", "snapshots", "data_manifests")


def blocked_kind(status: str, reason: str | None) -> str | None:
    """`failed`, `lease` or `cost_gate` for a step that counts towards a streak, else None."""
    if status == "failed":
        return "failed"
    if status == "skipped" and reason:
        if reason.startswith(LEASE_PREFIXES):
            return "lease"
        if reason.startswith(COST_GATE_PREFIX):
            return "cost_gate"
    return None


def _json_object(value: Any, column: str, where: str) -> dict[str, Any] | None:
    if value is None or value == "":
        return None
    if isinstance(value, Mapping):
        return dict(value)
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError) as exc:
        raise HistoryError(f"history row {where}: column {column} is not JSON ({exc}): {str(value)[:80]!r}") from exc
    if parsed is None:
        return None
    if not isinstance(parsed, dict):
        raise HistoryError(f"history row {where}: column {column} is not a JSON object: {str(value)[:80]!r}")
    return parsed


def _utc(value: Any, column: str, where: str) -> dt.datetime:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if not isinstance(value, dt.datetime):
        raise HistoryError(f"history row {where}: column {column} is {value!r}, not a timestamp")
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value.astimezone(dt.timezone.utc)


@dataclass(frozen=True)
class HistoryRow:
    """One row of the history table: one executed or skipped step."""

    run_id: str
    path: str
    table_name: str
    operation: str
    status: str
    reason: str | None
    started_at: dt.datetime
    ended_at: dt.datetime
    duration_ms: int = 0
    output: Mapping[str, Any] | None = None
    health_before: Mapping[str, Any] | None = None
    health_after: Mapping[str, Any] | None = None
    node: str | None = None
    invocation_id: str | None = None
    snapshot_id_before: int | None = None
    snapshot_id_after: int | None = None
    lease_holder: str | None = None

    @property
    def blocked(self) -> str | None:
        return blocked_kind(self.status, self.reason)

    def figure(self, key: str) -> int:
        """An integer of the step's output (0 when absent or not a number)."""
        value = (self.output or {}).get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> HistoryRow:
        """A row as read from the table (JSON columns as text, timestamps naive UTC or aware)."""
        where = f"{record.get('run_id')!r}/{record.get('table_name')!r}/{record.get('operation')!r}"
        for column in ("run_id", "table_name", "operation", "status", "started_at"):
            if record.get(column) is None:
                raise HistoryError(f"history row {where}: column {column} is null")
        started = _utc(record["started_at"], "started_at", where)
        ended = _utc(record["ended_at"], "ended_at", where) if record.get("ended_at") is not None else started
        return cls(
            run_id=str(record["run_id"]), path=str(record.get("path") or ""), table_name=str(record["table_name"]),
            operation=str(record["operation"]), status=str(record["status"]), reason=record.get("reason"),
            started_at=started, ended_at=ended, duration_ms=int(record.get("duration_ms") or 0),
            output=_json_object(record.get("output"), "output", where),
            health_before=_json_object(record.get("health_before"), "health_before", where),
            health_after=_json_object(record.get("health_after"), "health_after", where),
            node=record.get("node"), invocation_id=record.get("invocation_id"),
            snapshot_id_before=record.get("snapshot_id_before"), snapshot_id_after=record.get("snapshot_id_after"),
            lease_holder=record.get("lease_holder"))


@dataclass(frozen=True)
class Estimates:
    """What an expire_snapshots and a remove_orphan_files run would free now (docs/report.md)."""

    table: str
    expire_older_than_hours: float
    expire_retain_last: int
    expiring_snapshots: int = 0
    expire_files: int = 0
    expire_bytes: int = 0
    orphan_older_than_hours: float = 72
    orphan_files: int = 0
    orphan_bytes: int = 0
    error: str | None = None


@dataclass(frozen=True)
class CurrentHealth:
    """A table's figures now (table_health's, from metadata), or why they could not be read."""

    table: str
    figures: Mapping[str, Any] | None = None
    error: str | None = None


@dataclass(frozen=True)
class TrendPoint:
    """A table's figures at one instant: before or after a step, or now."""

    at: dt.datetime
    source: str  # before, after or now
    figures: Mapping[str, int | None]


@dataclass(frozen=True)
class RunFigures:
    """What one run did (to one table, or to all of them): the figures of iceberg_maint_runs."""

    run_id: str
    started_at: dt.datetime
    ended_at: dt.datetime
    tables: int
    steps: int
    succeeded: int
    failed: int
    skipped: int
    skipped_for_lease: int
    skipped_by_cost_gate: int
    procedure_ms: int
    data_files_rewritten: int
    data_files_added: int
    bytes_compacted: int
    data_files_expired: int
    snapshots_expired: int
    orphan_files_removed: int
    manifests_rewritten: int

    @property
    def files_removed(self) -> int:
        """Files a run took out of the table or the storage: compacted away, expired, orphans."""
        return (max(0, self.data_files_rewritten - self.data_files_added) + self.data_files_expired
                + self.orphan_files_removed)


@dataclass(frozen=True)
class Streak:
    """An operation of a table that failed or was skipped (lease, cost gate) N runs in a row."""

    table: str
    operation: str
    runs_in_a_row: int
    kinds: tuple[str, ...]
    last_status: str
    last_reason: str | None
    last_run_id: str
    last_at: dt.datetime


@dataclass(frozen=True)
class BacklogItem:
    """A step the last run touching the table left undone: failed, or skipped for a lease or the cost gate."""

    table: str
    operation: str
    status: str
    kind: str
    reason: str | None
    run_id: str
    at: dt.datetime


@dataclass(frozen=True)
class TableReport:
    table: str
    node: str | None
    score: float
    score_parts: Mapping[str, float]
    current: Mapping[str, Any]  # the latest figures: now when readable, else the last the history saw
    current_source: str  # now, history or none
    health_error: str | None
    trend: tuple[TrendPoint, ...]
    runs: tuple[RunFigures, ...]
    streaks: tuple[Streak, ...]
    failed_steps: int
    blocked_steps: int
    estimates: Estimates | None

    @property
    def longest_streak(self) -> int:
        return max((s.runs_in_a_row for s in self.streaks), default=0)


@dataclass(frozen=True)
class Report:
    generated_at: dt.datetime
    since: dt.datetime
    days: float
    history_table: str
    rows: int
    runs: tuple[RunFigures, ...]  # newest first
    tables: tuple[TableReport, ...]  # worst first
    backlog: tuple[BacklogItem, ...]
    last_run_id: str | None
