"""Cold partitions from partition metadata (pure): the Python side of
`get_partition_range_sql` (macros/health/get_partition_range_sql.sql), `get_partitions_where_sql`
and `_iceberg_maint_cold_scope` (macros/health/cold_partitions_where.sql). The planner hands the
result to the policy engine (dbt_iceberg_maint/policy/) as a table fact.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbt_iceberg_maint import guards
from dbt_iceberg_maint.policy.operation_types import ColdScope

DEFAULT_TARGET_FILE_SIZE_BYTES = 536870912

# ---- cold partitions (macros/health/get_partition_range_sql.sql) ----

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def partition_range_sql(transform: str, column: str | None, column_type: str | None, value: Any) -> str | None:
    """`get_partition_range_sql`: a predicate selecting one partition value, or None."""
    if column is None or column_type is None:
        return None
    col = column if guards.IDENTIFIER.fullmatch(column) else "`" + column.replace("`", "``") + "`"
    kind_type = column_type.lower()
    if transform not in ("identity", "years", "months", "days", "hours", "year", "month", "day", "hour"):
        return None
    if value is None:
        return f"{col} is null"
    if transform == "identity":
        return _identity_sql(col, kind_type, value)
    kind = transform.rstrip("s")
    if kind == "day":
        if not isinstance(value, str) or not _DAY.fullmatch(value):
            return None
        lo = dt.datetime.strptime(value, "%Y-%m-%d")
        hi = lo + dt.timedelta(days=1)
    elif isinstance(value, bool) or not isinstance(value, int):
        return None
    elif kind == "hour":
        lo = dt.datetime(1970, 1, 1) + dt.timedelta(hours=value)
        hi = lo + dt.timedelta(hours=1)
    elif kind == "month":
        lo = dt.datetime(1970 + value // 12, value % 12 + 1, 1)
        hi = dt.datetime(1970 + (value + 1) // 12, (value + 1) % 12 + 1, 1)
    else:
        lo = dt.datetime(1970 + value, 1, 1)
        hi = dt.datetime(1971 + value, 1, 1)
    if kind_type == "date" and kind != "hour":
        fmt, prefix, suffix = "%Y-%m-%d", "date", ""
    elif kind_type == "timestamp":
        fmt, prefix, suffix = "%Y-%m-%d %H:%M:%S", "timestamp", "+00:00"
    elif kind_type == "timestamp_ntz":
        fmt, prefix, suffix = "%Y-%m-%d %H:%M:%S", "timestamp_ntz", ""
    else:
        return None
    return (f"({col} >= {prefix} '{lo.strftime(fmt)}{suffix}' and "
            f"{col} < {prefix} '{hi.strftime(fmt)}{suffix}')")


def _identity_sql(col: str, kind_type: str, value: Any) -> str | None:
    if kind_type == "string" or kind_type.startswith(("varchar", "char")):
        if not isinstance(value, str) or any(marker in value for marker in guards.FRAGMENT_MARKERS):
            return None
        return f"{col} = '" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if kind_type == "boolean":
        return f"{col} = {'true' if value else 'false'}" if isinstance(value, bool) else None
    if kind_type in ("tinyint", "smallint", "int", "integer", "bigint"):
        return f"{col} = {value}" if isinstance(value, int) and not isinstance(value, bool) else None
    if kind_type == "date":
        return f"{col} = date '{value}'" if isinstance(value, str) and _DAY.fullmatch(value) else None
    return None


@dataclass(frozen=True)
class PartitionField:
    transform: str
    column: str | None


@dataclass(frozen=True)
class PartitionState:
    """One row of the `partitions` metadata table, as cold scoping uses it."""

    values: tuple[Any, ...]  # in the current spec's field order, JSON-like (days as 'YYYY-MM-DD')
    current_spec: bool
    last_updated_ms: int | None
    small_files: int
    rows: int = 0  # the data files' record_count
    deleted_rows: int = 0  # the deletion vectors' record_count


def partitions_where_sql(fields: Sequence[PartitionField], columns: Mapping[str, str],
                         partitions: Sequence[tuple[Any, ...]]) -> str | None:
    """`get_partitions_where_sql`: OR of one conjunction per expressible partition.

    The macro keeps the partitions table's row order; here terms are sorted so the text is
    stable (the predicate is the same set of terms)."""
    terms: list[str] = []
    for values in partitions:
        if len(values) != len(fields):
            continue
        parts = []
        for field, value in zip(fields, values, strict=True):
            part = partition_range_sql(field.transform, field.column,
                                       columns.get(field.column) if field.column else None, value)
            if part is not None:
                parts.append(part)
        if len(parts) == len(fields):
            term = " and ".join(parts)
            terms.append(f"({term})" if len(parts) > 1 else term)
    unique = sorted(set(terms))
    return " or ".join(unique) if unique else None


def cold_scope(fields: Sequence[PartitionField], columns: Mapping[str, str], partitions: Sequence[PartitionState],
               quiet_hours: float, now_ms: int, oldest_snapshot_ms: int | None, total_small_files: int,
               delete_ratio: bool = False) -> ColdScope:
    """`_iceberg_maint_cold_scope` with a small-file threshold, from partition metadata; with
    `delete_ratio` also the cold partitions' greatest share of rows deletion vectors delete (per
    partition; an unpartitioned table's whole share)."""
    limit_ms = now_ms - int(quiet_hours * 3600000)

    def is_cold(p: PartitionState) -> bool:
        updated = p.last_updated_ms if p.last_updated_ms is not None else oldest_snapshot_ms
        return updated is not None and updated < limit_ms

    if not fields:
        cold = len(partitions) > 0 and all(is_cold(p) for p in partitions)
        rows = sum(p.rows for p in partitions)
        ratio = (sum(p.deleted_rows for p in partitions) / rows if cold and rows > 0 else 0.0) if delete_ratio \
            else None
        return ColdScope("true" if cold else None, total_small_files if cold else 0, ratio, partitioned=False)
    chosen: list[tuple[Any, ...]] = []
    largest = 0
    highest = 0.0
    for p in partitions:
        if not is_cold(p) or not p.current_spec:
            continue
        if partitions_where_sql(fields, columns, [p.values]) is not None:
            chosen.append(p.values)
            largest = max(largest, p.small_files)
            if p.rows > 0:
                highest = max(highest, p.deleted_rows / p.rows)
    return ColdScope(partitions_where_sql(fields, columns, chosen), largest, highest if delete_ratio else None)
