"""Cost gating (policy section `cost_gate`): skip due work on tables nobody wrote to.

Pure: decided from the snapshot list alone (tier 1). The macro twin is
`_iceberg_maint_cost_gate_decision` (macros/health/cost_gate.sql), same rules, same texts; the
shared policy case table (tests/policy_cases.yml) runs both.

- The last maintenance is the newest `replace` snapshot: rewrite_data_files,
  rewrite_position_delete_files and rewrite_manifests commit one (expire_snapshots and
  remove_orphan_files commit none). Never maintained (or that snapshot expired): no gate.
- `min_interval_hours`: every operation is skipped for that long after the last maintenance.
- `skip_unchanged` / `min_new_records` / `min_new_bytes` look at the snapshots written since
  (added-records, added-files-size). expire_snapshots is exempt (snapshots become expirable by
  age alone), so are the statistics (a maintenance commit alone leaves them stale), and so is
  cold-scoped compaction when a write turned cold since the last maintenance: its partition
  could not be compacted then and can now, without any new snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class SnapshotLike(Protocol):
    @property
    def snapshot_id(self) -> int: ...
    @property
    def timestamp_ms(self) -> int: ...
    @property
    def operation(self) -> str | None: ...
    @property
    def summary(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class GateSnapshot:
    """One row of the macro's snapshot query: {snapshot_id, ts, operation, added_records, added_bytes}."""

    snapshot_id: int
    timestamp_ms: int
    operation: str | None
    summary: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> GateSnapshot:
        return cls(int(row["snapshot_id"]), int(row["ts"]), row.get("operation"),
                   {"added-records": str(row.get("added_records") or 0),
                    "added-files-size": str(row.get("added_bytes") or 0)})


def _added(snapshots: Sequence[SnapshotLike], key: str) -> int:
    total = 0
    for snap in snapshots:
        try:
            total += int(snap.summary.get(key, "0"))
        except ValueError:
            continue
    return total


def gate_reason(operation: str, gate: Mapping[str, Any], snapshots: Sequence[SnapshotLike], now_ms: int,
                cold_partitions_hours: float | None = None) -> str | None:
    """Why the cost gate skips this due operation, or None."""
    if not gate.get("enabled", True):
        return None
    interval = gate.get("min_interval_hours")
    unchanged = gate.get("skip_unchanged", False)
    min_records = gate.get("min_new_records")
    min_bytes = gate.get("min_new_bytes")
    if interval is None and not unchanged and min_records is None and min_bytes is None:
        return None
    ordered = sorted(snapshots, key=lambda s: (s.timestamp_ms, s.snapshot_id))
    maintained = [s for s in ordered if s.operation == "replace"]
    if not maintained:
        return None
    last = maintained[-1]
    hours_ago = round((now_ms - last.timestamp_ms) / 3600000.0, 1)
    if interval is not None and hours_ago < interval:
        return f"cost gate: last maintained {hours_ago} h ago, less than min_interval_hours {interval}"
    if operation in ("expire_snapshots", "compute_table_stats", "compute_partition_stats"):
        return None
    writes = [s for s in ordered if s.timestamp_ms > last.timestamp_ms and s.operation != "replace"]
    if operation == "rewrite_data_files" and cold_partitions_hours:
        quiet_ms = int(cold_partitions_hours * 3600000)
        turned_cold = [s for s in ordered if s.operation != "replace"
                       and last.timestamp_ms - quiet_ms < s.timestamp_ms <= now_ms - quiet_ms]
        if turned_cold:
            return None
    if unchanged and not writes:
        return f"cost gate: no new snapshot since the last maintenance {hours_ago} h ago (skip_unchanged)"
    records = _added(writes, "added-records")
    if min_records is not None and records < min_records:
        return f"cost gate: {records} records added since the last maintenance, below min_new_records {min_records}"
    size = _added(writes, "added-files-size")
    if min_bytes is not None and size < min_bytes:
        return f"cost gate: {size} bytes added since the last maintenance, below min_new_bytes {min_bytes}"
    return None
