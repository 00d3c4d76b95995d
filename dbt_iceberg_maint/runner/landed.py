"""Did a failed dbt node's write land? Decided from the table's snapshot log (pure, no I/O).

dbt reports a node as failed whether its write statement failed or a later statement (a
post-hook) failed after the write had committed, and Iceberg's `CommitStateUnknownException`
leaves even Iceberg unsure. The snapshot log knows: every Spark write commits a snapshot whose
summary names the application (`spark.app.id`). The runner reads the table's whole log before an
attempt (`TableLog` from the `table_snapshots` macro: every snapshot with its parent, and the
current one from the `main` ref) and again after a failure; `verify_landed` decides.

"Since the attempt began" is decided by **lineage, never by clocks**: the snapshots on the
current snapshot's parent chain down to the one recorded before the attempt, plus every snapshot
id that was not in the log before. Commit times come from whichever JVM committed (a maintenance
job's, another writer's) and Iceberg accepts a snapshot timestamped up to a minute before the
table's last update, so a writer whose clock runs behind commits "before" the snapshot it
follows: a time filter would drop its append and call it not landed.

- **not landed** (`False`): no data-changing snapshot of this application since the recorded
  one. A write of this node would carry this application's id, so a re-run cannot duplicate.
  Compactions (`replace`: same rows, other files) and other applications' commits do not count.
- **landed** (`True`): exactly the snapshots of this application committed inside statements of
  the node that completed before the failing one — the write committed, a later statement
  (post-hook) failed; or, for `commit_state_unknown`, one snapshot committed while the failing
  statement ran and none other — the unknown commit landed.
- **undecidable** (`None`): anything else, e.g. a snapshot of this application committed outside
  the node's statements (another writer of the same application: a thrift server's other
  client, another session of the same process) or while a statement that raised a conflict was
  running, or the recorded snapshot is gone (expired, table dropped). The runner then refuses.

Clocks only attribute a snapshot that lineage already put in "since" to one of the node's
statements (landed) or to none (undecidable); neither outcome re-runs a write, so clock skew can
never cause a duplicating re-run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbt_iceberg_maint.errors import SnapshotLogError
from dbt_iceberg_maint.protocol import SNAPSHOTS_MARKER, marker_payloads

# Snapshot operations that change no rows: compaction and manifest rewrites.
NO_DATA_CHANGE = frozenset({"replace"})
COMMIT_STATE_UNKNOWN = "commit_state_unknown"



@dataclass(frozen=True)
class Snapshot:
    """One row of an Iceberg table's `snapshots` metadata table (what the decision needs)."""

    snapshot_id: int
    committed_at_ms: int  # the committing JVM's clock: orders snapshots for display, never selects them
    operation: str
    app_id: str | None = None  # summary `spark.app.id` (or `app-id`)
    added_records: int | None = None
    deleted_records: int | None = None
    parent_id: int | None = None

    @property
    def changes_data(self) -> bool:
        return self.operation not in NO_DATA_CHANGE

    def describe(self) -> str:
        added = "" if self.added_records is None else f", +{self.added_records} rows"
        return f"{self.snapshot_id} ({self.operation}{added}, app {self.app_id})"


@dataclass(frozen=True)
class TableLog:
    """A table's snapshot log as read by one `table_snapshots` call: every snapshot the table's
    metadata holds, and `current_id`, the snapshot the `main` ref points at (None: no snapshot)."""

    table: str
    exists: bool
    snapshots: tuple[Snapshot, ...] = ()
    current_id: int | None = None

    @property
    def current(self) -> Snapshot | None:
        return None if self.current_id is None else self.find(self.current_id)

    @property
    def snapshot_ids(self) -> frozenset[int]:
        return frozenset(s.snapshot_id for s in self.snapshots)

    def find(self, snapshot_id: int) -> Snapshot | None:
        return next((s for s in self.snapshots if s.snapshot_id == snapshot_id), None)

    def since(self, before: TableLog) -> list[Snapshot]:
        """The snapshots committed after `before` was read, by lineage: the current snapshot's
        parent chain down to `before`'s current one, plus every snapshot `before` did not hold."""
        known = before.snapshot_ids
        by_id = {s.snapshot_id: s for s in self.snapshots}
        chain: set[int] = set()
        stop = before.current_id
        cursor = self.current_id
        while cursor is not None and cursor != stop and cursor not in chain and cursor in by_id:
            chain.add(cursor)
            cursor = by_id[cursor].parent_id
        return [s for s in self.snapshots if s.snapshot_id in chain or s.snapshot_id not in known]


@dataclass(frozen=True)
class Statement:
    """One SQL statement dbt ran for the node (from dbt's SQLQuery/SQLQueryStatus events), epoch ms.

    `ended_ms` is None for the statement that raised (dbt fired no status for it)."""

    started_ms: int
    ended_ms: int | None

    def contains(self, ms: int, slack_ms: int = 0) -> bool:
        end = self.ended_ms if self.ended_ms is not None else None
        return self.started_ms - slack_ms <= ms and (end is None or ms <= end + slack_ms)


@dataclass(frozen=True)
class LandedVerdict:
    """`landed`: True, False or None (undecidable); the evidence as the report shows it."""

    table: str
    landed: bool | None
    reason: str
    recorded_snapshot_id: int | None = None
    snapshot_ids: tuple[int, ...] = ()  # the snapshots the verdict rests on
    failed_in: str | None = None  # "post-hook" or "commit" when landed

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "recorded_snapshot_id": self.recorded_snapshot_id,
            "snapshot_ids": list(self.snapshot_ids),
            "why": self.reason,
        }


def _int_or_none(value: Any) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def snapshot_from_row(row: Mapping[str, Any]) -> Snapshot:
    try:
        return Snapshot(
            snapshot_id=int(row["snapshot_id"]),
            committed_at_ms=int(row["committed_at_ms"]),
            operation=str(row.get("operation") or ""),
            app_id=row.get("app_id") or None,
            added_records=_int_or_none(row.get("added_records")),
            deleted_records=_int_or_none(row.get("deleted_records")),
            parent_id=_int_or_none(row.get("parent_id")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotLogError(
            f"snapshot row {dict(row)!r} lacks {exc}; expected snapshot_id, committed_at_ms") from exc


def parse_snapshot_lines(messages: Sequence[str]) -> tuple[str | None, dict[str, TableLog]]:
    """The application id and the table logs from `table_snapshots`' log lines."""
    app_id: str | None = None
    tables: dict[str, TableLog] = {}
    for payload in marker_payloads(messages, SNAPSHOTS_MARKER):
        try:
            document = json.loads(payload)
        except ValueError as exc:
            raise SnapshotLogError(f"unreadable {SNAPSHOTS_MARKER} line {payload!r}: {exc}") from exc
        app_id = document.get("app_id") or app_id
        for entry in document.get("tables") or ():
            table = str(entry["table"])
            tables[table] = TableLog(
                table, bool(entry.get("exists")), tuple(snapshot_from_row(r) for r in entry.get("snapshots") or ()),
                _int_or_none(entry.get("current_snapshot_id")),
            )
    return app_id, tables


def _ids(snapshots: Sequence[Snapshot]) -> tuple[int, ...]:
    return tuple(s.snapshot_id for s in snapshots)


def _list(snapshots: Sequence[Snapshot]) -> str:
    return ", ".join(s.describe() for s in snapshots)


def verify_landed(
    before: TableLog,
    after: TableLog,
    *,
    kind: str,
    app_id: str | None,
    statements: Sequence[Statement] = (),
    slack_ms: int = 0,
) -> LandedVerdict:
    """Decide whether the failed node's write to `after.table` landed (see the module doc).

    `before`: the log read before the attempt; `after`: read after the failure (both whole logs;
    which snapshots are new is decided by lineage, `TableLog.since`). `kind`: the failure's classification kind.
    `app_id`: the Spark application dbt's connection writes with. `statements`: the node's SQL
    statements in this attempt, in order; the last one without an end is the one that raised.
    """
    table = after.table
    recorded = before.current
    recorded_id = recorded.snapshot_id if recorded else None

    def verdict(landed: bool | None, reason: str, ids: Sequence[Snapshot] = (), failed_in: str | None = None
                ) -> LandedVerdict:
        return LandedVerdict(table, landed, reason, recorded_id, _ids(ids), failed_in)

    if not after.exists:
        if before.exists:
            return verdict(None, f"{table} existed before the attempt and is gone now")
        return verdict(False, f"{table} did not exist before the attempt and still does not: nothing landed")
    if recorded is not None and after.find(recorded.snapshot_id) is None:
        return verdict(None, f"snapshot {recorded.snapshot_id}, current before the attempt, is no longer in "
                             f"{table}'s log (expired or table replaced)")
    since = after.since(before)
    since.sort(key=lambda s: (s.committed_at_ms, s.snapshot_id))
    writes = [s for s in since if s.changes_data]
    ignored = [s for s in since if not s.changes_data]
    ignored_note = f"; {len(ignored)} rewrite snapshot(s) ignored ({_list(ignored)})" if ignored else ""
    start = f"since snapshot {recorded_id}" if recorded_id is not None else "since the attempt began"
    if app_id is None:
        if not writes:
            return verdict(False, f"no data-changing snapshot in {table} {start}{ignored_note}")
        return verdict(None, f"the writing application's id is unknown and {table} has data-changing snapshots "
                             f"{start}: {_list(writes)}", writes)
    ours = [s for s in writes if s.app_id == app_id]
    others = [s for s in writes if s.app_id != app_id]
    others_note = f"; {len(others)} from other applications ({_list(others)})" if others else ""
    if not ours:
        return verdict(False, f"no data-changing snapshot of this application ({app_id}) in {table} {start}"
                              f"{others_note}{ignored_note}", others)
    if not statements:
        return verdict(None, f"{table} has data-changing snapshots of this application {start} ({_list(ours)}) "
                             "and dbt reported no statement times to attribute them", ours)
    failing = statements[-1] if statements[-1].ended_ms is None else None
    completed = [st for st in statements if st.ended_ms is not None]
    in_completed = [s for s in ours if any(st.contains(s.committed_at_ms, slack_ms) for st in completed)]
    in_failing = [s for s in ours if failing is not None and failing.contains(s.committed_at_ms, slack_ms)
                  and s not in in_completed]
    outside = [s for s in ours if s not in in_completed and s not in in_failing]
    if outside:
        return verdict(None, f"another writer of this application ({app_id}) committed {_list(outside)} to {table} "
                             "outside this node's statements: which write is whose cannot be told", outside)
    if kind == COMMIT_STATE_UNKNOWN:
        if len(in_failing) == 1 and not in_completed:
            return verdict(True, f"the commit whose state was unknown landed: snapshot {_list(in_failing)} was "
                                 "committed while the failing statement ran", in_failing, "commit")
        return verdict(None, f"commit state unknown and {table} has snapshots of this application {start} that do "
                             f"not identify one commit: {_list(ours)}", ours)
    if in_failing:
        return verdict(None, f"snapshot {_list(in_failing)} of this application was committed to {table} while the "
                             f"statement that failed with {kind} ran: another writer's or this one's", in_failing)
    return verdict(True, f"the write committed snapshot {_list(in_completed)} in a statement that completed; a "
                         f"later statement (post-hook) failed with {kind}", in_completed, "post-hook")
