"""The batch ledger: what every writer says it did, and a check of a table against it.

Writers append one JSON line per event to a ledger file (`Ledger.record`): a batch `committed`
(the writer saw its write land exactly once), `failed` (the writer gave up and did not re-run it:
the batch must be absent), `rerun` (a failed attempt was run again; informational) or `unknown`
(nobody knows whether it landed: absent or present once are both acceptable, twice is not). A
batch's last event decides what is expected of it.

The checker (`check`) compares those expectations with what a table holds per batch:
`batch_id, count(*), checksum` (`observed_sql` renders that query for Spark). Every batch's rows
are distinct and derived from the batch id, so a lost, duplicated or altered row shows up in the
count or in the checksum. The core is pure; only `Ledger` touches a file.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.errors import IcebergMaintError

EVENTS = ("committed", "failed", "rerun", "unknown")
# Spark's crc32 and Python's zlib.crc32 agree on UTF-8 bytes: the writer's expected checksum and
# the table's observed one are computed the same way on both sides.
CHECKSUM_SQL = "sum(crc32(concat_ws('|', cast(id as string), payload)))"


class LedgerError(IcebergMaintError):
    """A ledger line that cannot be read or an event that does not exist."""


def row_checksum(row_id: int, payload: str) -> int:
    return zlib.crc32(f"{row_id}|{payload}".encode())


def batch_rows(batch_id: int, rows: int, stride: int = 1_000_000) -> list[tuple[int, str]]:
    """The rows of a batch: ids unique across batches (batch * stride + i), a payload naming both."""
    if not 0 < rows < stride:
        raise LedgerError(f"rows must be between 1 and {stride - 1}, got {rows}")
    return [(batch_id * stride + i, f"b{batch_id}-r{i}") for i in range(rows)]


def batch_rows_sql(batch_id: int, rows: int, stride: int = 1_000_000) -> str:
    """The same rows as `batch_rows`, as a Spark SELECT (id, batch_id, payload)."""
    batch_rows(batch_id, rows, stride)  # validates
    # bigint before multiplying: Spark's int * int wraps around silently (100000 * 1000000).
    return (f"select cast({batch_id} as bigint) * {stride} + id as id, cast({batch_id} as bigint) as batch_id, "
            f"concat('b{batch_id}-r', cast(id as string)) as payload from range({rows})")


def observed_sql(table: str) -> str:
    return f"select batch_id, count(*) as n, {CHECKSUM_SQL} as checksum from {table} group by batch_id"


@dataclass(frozen=True)
class LedgerEntry:
    writer: str
    table: str
    batch_id: int
    event: str
    rows: int
    checksum: int
    detail: str = ""

    def __post_init__(self) -> None:
        if self.event not in EVENTS:
            raise LedgerError(f"event must be one of {', '.join(EVENTS)}, got {self.event!r}")

    @classmethod
    def for_batch(cls, writer: str, table: str, batch_id: int, event: str, rows: int, detail: str = "",
                  stride: int = 1_000_000) -> LedgerEntry:
        checksum = sum(row_checksum(i, p) for i, p in batch_rows(batch_id, rows, stride))
        return cls(writer, table, batch_id, event, rows, checksum, detail)

    def to_json(self) -> str:
        return json.dumps({"writer": self.writer, "table": self.table, "batch_id": self.batch_id,
                           "event": self.event, "rows": self.rows, "checksum": self.checksum,
                           "detail": self.detail}, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> LedgerEntry:
        try:
            data: dict[str, Any] = json.loads(line)
            return cls(str(data["writer"]), str(data["table"]), int(data["batch_id"]), str(data["event"]),
                       int(data["rows"]), int(data["checksum"]), str(data.get("detail", "")))
        except (ValueError, KeyError, TypeError) as exc:
            raise LedgerError(f"unreadable ledger line {line!r}: {exc}") from exc


@dataclass(frozen=True)
class Expected:
    batch_id: int
    rows: int
    checksum: int
    event: str  # the batch's last event other than `rerun`
    reruns: int = 0


@dataclass(frozen=True)
class Observed:
    batch_id: int
    rows: int
    checksum: int


def expectations(entries: Iterable[LedgerEntry], table: str) -> dict[int, Expected]:
    """Per batch of `table`, what its events promise (the last decisive event wins)."""
    result: dict[int, Expected] = {}
    reruns: dict[int, int] = {}
    for entry in entries:
        if entry.table != table:
            continue
        if entry.event == "rerun":
            reruns[entry.batch_id] = reruns.get(entry.batch_id, 0) + 1
            continue
        result[entry.batch_id] = Expected(entry.batch_id, entry.rows, entry.checksum, entry.event)
    return {b: Expected(e.batch_id, e.rows, e.checksum, e.event, reruns.get(b, 0)) for b, e in result.items()}


@dataclass(frozen=True)
class TableCheck:
    table: str
    batches_expected: int
    batches_observed: int
    lost: tuple[int, ...] = ()  # committed batches with fewer rows than written (or none)
    duplicated: tuple[int, ...] = ()  # batches with more rows than written
    unexpected: tuple[int, ...] = ()  # batches present that no writer committed (or reported failed)
    mismatched: tuple[int, ...] = ()  # right row count, different contents
    rows_lost: int = 0
    rows_duplicated: int = 0
    unknown_landed: int = 0  # `unknown` batches found present once (acceptable)
    details: tuple[str, ...] = field(default=(), compare=False)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.unexpected or self.mismatched)

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "ok": self.ok, "batches_expected": self.batches_expected,
                "batches_observed": self.batches_observed, "lost": list(self.lost),
                "duplicated": list(self.duplicated), "unexpected": list(self.unexpected),
                "mismatched": list(self.mismatched), "rows_lost": self.rows_lost,
                "rows_duplicated": self.rows_duplicated, "unknown_landed": self.unknown_landed,
                "details": list(self.details)}


def check(table: str, expected: Mapping[int, Expected], observed: Iterable[Observed]) -> TableCheck:
    seen = {o.batch_id: o for o in observed}
    lost: list[int] = []
    duplicated: list[int] = []
    unexpected: list[int] = []
    mismatched: list[int] = []
    details: list[str] = []
    rows_lost = rows_duplicated = unknown_landed = 0
    for batch_id in sorted(set(expected) | set(seen)):
        want = expected.get(batch_id)
        got = seen.get(batch_id)
        if want is None or want.event == "failed":
            if got is not None:
                unexpected.append(batch_id)
                why = "no writer recorded it" if want is None else "its writer reported it failed"
                details.append(f"batch {batch_id}: {got.rows} row(s) present but {why}")
            continue
        if got is None:
            if want.event == "committed":
                lost.append(batch_id)
                rows_lost += want.rows
                details.append(f"batch {batch_id}: committed with {want.rows} row(s), none present")
            continue
        if got.rows > want.rows:
            duplicated.append(batch_id)
            rows_duplicated += got.rows - want.rows
            details.append(f"batch {batch_id}: {got.rows} row(s) present, {want.rows} written")
        elif got.rows < want.rows:
            lost.append(batch_id)
            rows_lost += want.rows - got.rows
            details.append(f"batch {batch_id}: {got.rows} row(s) present, {want.rows} written")
        elif got.checksum != want.checksum:
            mismatched.append(batch_id)
            details.append(f"batch {batch_id}: checksum {got.checksum} != written {want.checksum}")
        elif want.event == "unknown":
            unknown_landed += 1
    return TableCheck(table, len(expected), len(seen), tuple(lost), tuple(duplicated), tuple(unexpected),
                      tuple(mismatched), rows_lost, rows_duplicated, unknown_landed, tuple(details))


def observed_from_rows(rows: Iterable[Sequence[Any]]) -> list[Observed]:
    """`Observed` from the rows of `observed_sql` (batch_id, n, checksum)."""
    return [Observed(int(r[0]), int(r[1]), int(r[2] or 0)) for r in rows]


@dataclass(frozen=True)
class Ledger:
    """One append-only JSON-lines file; several processes may append to it at once (each line is
    one `write` on an O_APPEND descriptor, far below the size the kernel keeps whole)."""

    path: Path

    def record(self, entry: LedgerEntry) -> None:
        line = (entry.to_json() + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def entries(self) -> list[LedgerEntry]:
        if not self.path.exists():
            return []
        lines = self.path.read_text().splitlines()
        # A writer killed mid-line leaves a torn last line; it recorded nothing decisive.
        if lines and not lines[-1].endswith("}"):
            lines = lines[:-1]
        return [LedgerEntry.from_json(line) for line in lines if line.strip()]
