"""Read the `ICEBERG_MAINT_RESULT <json>` lines the maintenance macros log.

Every maintenance operation the dbt macros execute, skip or render as a dry run logs exactly one
line `ICEBERG_MAINT_RESULT {"table": ..., "operation": ..., "status": ..., "reason": ...,
"sql": ..., "metrics": {...}, "duration_ms": ...}`. This module turns those lines (from
`DbtInvocation.log_messages` or from any captured text output) into frozen records. The marker
and status names live in protocol.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dbt_iceberg_maint import protocol
from dbt_iceberg_maint.errors import ResultLineError
from dbt_iceberg_maint.protocol import (
    CHECKED_MARKER,
    HISTORY_MARKER,
    HISTORY_ROWS_MARKER,
    KEPT_MARKER,
    RESULT_MARKER,
    marker_payloads,
)

STATUSES = frozenset(protocol.STATUSES)
OPERATIONS = frozenset(protocol.OPERATIONS)



@dataclass(frozen=True)
class MaintenanceResult:
    """One maintenance operation on one table, as the macros reported it."""

    table: str
    operation: str
    status: str
    reason: str | None = None
    sql: str | None = None
    metrics: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    duration_ms: int | None = None

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    @property
    def executed(self) -> bool:
        """The statement really ran (successfully or not)."""
        return self.status in {"success", "failed"}

    def to_dict(self) -> dict[str, Any]:
        """The result line's JSON object (from_json's inverse)."""
        return {"table": self.table, "operation": self.operation, "status": self.status, "reason": self.reason,
                "sql": self.sql, "metrics": dict(self.metrics), "duration_ms": self.duration_ms}

    @classmethod
    def from_json(cls, payload: str) -> MaintenanceResult:
        try:
            data = json.loads(payload)
        except json.JSONDecodeError as error:
            raise ResultLineError(f"result line payload is not JSON: {payload[:200]!r}") from error
        if not isinstance(data, dict):
            raise ResultLineError(f"result line payload must be a JSON object, got {payload[:200]!r}")
        missing = [key for key in ("table", "operation", "status") if not data.get(key)]
        if missing:
            raise ResultLineError(f"result line lacks {', '.join(missing)}: {payload[:200]!r}")
        status = str(data["status"])
        if status not in STATUSES:
            raise ResultLineError(
                f"result line status {status!r} is not one of {', '.join(sorted(STATUSES))}"
            )
        metrics = data.get("metrics") or {}
        if not isinstance(metrics, dict):
            raise ResultLineError(f"result line metrics must be an object, got {metrics!r}")
        duration = data.get("duration_ms")
        return cls(
            table=str(data["table"]),
            operation=str(data["operation"]),
            status=status,
            reason=None if data.get("reason") in (None, "") else str(data["reason"]),
            sql=None if data.get("sql") in (None, "") else str(data["sql"]),
            metrics=MappingProxyType(dict(metrics)),
            duration_ms=None if duration is None else int(duration),
        )


def parse_result_lines(messages: Iterable[str] | str) -> tuple[MaintenanceResult, ...]:
    """Every result record in `messages` (dbt log messages, or one block of text), in order."""
    return tuple(MaintenanceResult.from_json(payload) for payload in marker_payloads(messages, RESULT_MARKER))


def failed_results(results: Iterable[MaintenanceResult]) -> tuple[MaintenanceResult, ...]:
    return tuple(result for result in results if result.failed)


def history_written(messages: Iterable[str] | str) -> bool:
    """Whether an `ICEBERG_MAINT_HISTORY` line says rows were written (or, from
    create_history_table, that the table is ready): the history table exists with its columns."""
    for payload in marker_payloads(messages, HISTORY_MARKER):
        try:
            data = json.loads(payload)
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("written") is True:
            return True
    return False


# What an ICEBERG_MAINT_CHECKED line lists (execute_maintenance_steps' `checked`).
CHECK_KINDS = ("lease_logs", "catalogs")


def checked_facts(messages: Iterable[str] | str) -> dict[str, frozenset[str]]:
    """What `ICEBERG_MAINT_CHECKED` lines say the macros checked once for an invocation's steps:
    the lease logs that exist and the catalogs that are not Nessie catalogs (names as the macros
    wrote them; '' is the session's current catalog). Anything unreadable is left out: the next
    invocation then checks it again."""
    found: dict[str, set[str]] = {kind: set() for kind in CHECK_KINDS}
    for payload in marker_payloads(messages, CHECKED_MARKER):
        try:
            data = json.loads(payload)
        except ValueError:
            continue
        for kind in CHECK_KINDS:
            names = data.get(kind) if isinstance(data, dict) else None
            if isinstance(names, list):
                found[kind].update(name for name in names if isinstance(name, str))
    return {kind: frozenset(names) for kind, names in found.items()}


def kept_leases(messages: Iterable[str] | str) -> dict[str, dict[str, Any]]:
    """The leases `ICEBERG_MAINT_KEPT` lines say an invocation kept held after its steps, by table
    (the last line's lease of a table wins), as execute_maintenance_steps' `leases` takes them back.
    Anything unreadable is left out: its table's next step then claims the lease again (the same
    run re-enters it)."""
    found: dict[str, dict[str, Any]] = {}
    for payload in marker_payloads(messages, KEPT_MARKER):
        try:
            data = json.loads(payload)
        except ValueError:
            continue
        leases = data.get("leases") if isinstance(data, dict) else None
        for lease in leases if isinstance(leases, list) else ():
            if isinstance(lease, dict) and isinstance(lease.get("table"), str):
                found[lease["table"]] = lease
    return found


def deferred_history_rows(messages: Iterable[str] | str) -> list[dict[str, Any]]:
    """The history rows `ICEBERG_MAINT_HISTORY_ROWS` lines logged instead of writing them
    (execute_maintenance_steps' `defer_history`), in order, as claim_leases' `history_rows` takes
    them. Anything unreadable is left out."""
    found: list[dict[str, Any]] = []
    for payload in marker_payloads(messages, HISTORY_ROWS_MARKER):
        try:
            data = json.loads(payload)
        except ValueError:
            continue
        rows = data.get("rows") if isinstance(data, dict) else None
        found.extend(row for row in (rows if isinstance(rows, list) else ()) if isinstance(row, dict))
    return found


def history_problems(messages: Iterable[str] | str) -> tuple[str, ...]:
    """Why maintenance history was not written, one text per distinct problem, from the
    `ICEBERG_MAINT_HISTORY` lines whose `written` is false (macros/internal/history.sql): the
    maintenance itself went on. An unreadable line is reported as such, never raised."""
    found: dict[str, None] = {}
    for payload in marker_payloads(messages, HISTORY_MARKER):
        try:
            data = json.loads(payload)
        except ValueError:
            found[f"unreadable {HISTORY_MARKER} line: {payload[:200]!r}"] = None
            continue
        if isinstance(data, dict) and data.get("written") is False:
            found[f"{data.get('table')}: {data.get('problem')}"] = None
    return tuple(found)
