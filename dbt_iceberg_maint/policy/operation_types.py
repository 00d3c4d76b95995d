"""What a maintenance operation is as a plan step (operations.py lists them): its policy
section's defaults, checks, due rule and SQL, and the values those pass around."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dbt_iceberg_maint.policy import sql as s


@dataclass(frozen=True)
class Decision:
    due: bool
    reason: str


@dataclass(frozen=True)
class ColdScope:
    """What `_iceberg_maint_cold_scope` returns: the cold predicate (None: nothing is cold), the
    most small files one of those partitions holds and the greatest share of one's rows deletion
    vectors delete (None: not read, the table has no delete file)."""

    where: str | None
    max_small_files: int | None
    max_delete_ratio: float | None = None
    partitioned: bool = True  # False: the table is one partition, cold or not as a whole


@dataclass(frozen=True)
class PlanContext:
    """What a step's SQL depends on besides the policy: the wall clock (the orphan window's
    reference, always), the plan's as_of (expire_snapshots' reference when given), the cold scope
    and the table's location (the orphan scope guard)."""

    now: dt.datetime
    reference: dt.datetime | None = None
    cold_scope: ColdScope | None = None
    table_location: str | None = None
    force: bool = False  # the rewrites' min-input-files is 1: a forced rewrite rewrites what it finds
    table_bytes: int | None = None  # the current snapshot's total-files-size (partial_progress: auto)


@dataclass(frozen=True)
class Planned:
    sql: str | None
    reason: str | None = None


@dataclass(frozen=True)
class Operation:
    name: str
    section: str  # its key in meta.iceberg_maint
    defaults: Mapping[str, Any]
    policy_errors: Callable[[Mapping[str, Any]], list[str]]
    due: Callable[[Mapping[str, Any], Mapping[str, Any]], Decision]
    planned_sql: Callable[[s.TableRef, Mapping[str, Any], PlanContext], Planned]
