"""The policy engine's table facts from metadata (`TableFacts`, policy/engine.py): each tier
of one table read once, on first use, so a plan reads only what its due rules need."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from dbt_iceberg_maint.metadata.cold import cold_scope
from dbt_iceberg_maint.metadata.health import partitioned, statistics_snapshot
from dbt_iceberg_maint.metadata.reader import (
    EntryTier,
    SummaryTier,
    current_manifests,
    layout,
    read_entries,
    read_manifest_tier,
    read_summary,
    small_file_threshold,
    table_age_hours,
    target_file_size,
)
from dbt_iceberg_maint.policy import engine
from dbt_iceberg_maint.policy.gate import SnapshotLike
from dbt_iceberg_maint.policy.operation_types import ColdScope
from dbt_iceberg_maint.policy.statistics import STATISTICS

if TYPE_CHECKING:
    from pyiceberg.table import Table


class LazyTable:
    """The policy engine's TableFacts of one table: each tier read once, on first use (tier 1,
    the snapshot summary, always; manifests and their entries only when a due rule needs them)."""

    def __init__(self, table: Table, reference_ms: int, target_override: int | None,
                 now: dt.datetime | None = None) -> None:
        self.table = table
        self.summary: SummaryTier = read_summary(table)
        self.reference_ms = reference_ms
        wall_clock = now or dt.datetime.now(dt.timezone.utc)
        self.now_ms = int(wall_clock.timestamp() * 1000)  # the orphan window's clock, never as_of
        self.checked = engine.checked_hours_ago(self.summary.properties, wall_clock)
        self.threshold = small_file_threshold(target_file_size(self.summary.properties, target_override))
        self._manifests: list[Any] | None = None
        self._entries: dict[tuple[int, bool], EntryTier] = {}
        self.tiers = {"summary"}

    def manifests(self) -> list[Any]:
        if self._manifests is None:
            self._manifests = current_manifests(self.table)
            self.tiers.add("manifest_list")
        return self._manifests

    def entries(self, data_only: bool) -> EntryTier:
        key = (self.threshold, data_only)
        if key not in self._entries:
            self._entries[key] = read_entries(self.table, self.manifests(), self.threshold, data_only=data_only)
            self.tiers.add("manifest_entries")
        return self._entries[key]

    def gc_enabled(self) -> bool:
        return str(self.summary.properties.get("gc.enabled", "true")).lower() != "false"

    def data_files(self) -> int | None:
        return self.summary.data_files

    def delete_files(self) -> int | None:
        return self.summary.delete_files

    def table_bytes(self) -> int | None:
        return self.summary.total_bytes

    def snapshots(self) -> list[SnapshotLike]:
        return list(self.summary.snapshots)

    def snapshots_now_ms(self) -> int:
        return self.reference_ms

    def location(self) -> str | None:
        return str(self.table.location())

    def checked_hours_ago(self, operation: str) -> float | None:
        return self.checked.get(operation)

    def unchanged_since_check(self, operation: str) -> int | None:
        text = self.summary.properties.get(engine.checked_snapshot_property(operation))
        if text is None or not text.isdigit():
            return None  # never checked, or an unreadable record: decide
        lineage = {s.snapshot_id: (s.parent_id, s.operation) for s in self.summary.snapshots}
        return int(text) if engine.unchanged_since(int(text), self.summary.snapshot_id, lineage) else None

    def health(self, operation: str) -> dict[str, Any]:
        """The health figures `operation`'s due rule reads (table_health's names)."""
        oldest = self.summary.oldest_snapshot_ms
        figures: dict[str, Any] = {
            "snapshots": len(self.summary.snapshots),
            "oldest_snapshot_age_hours": None if oldest is None else round((self.reference_ms - oldest) / 3600000.0, 3),
        }
        # Deletion vectors only when the summary counts delete files (or has no count), as the macros.
        deletes = self.summary.delete_files != 0
        if operation == "rewrite_data_files":
            # A cold scope read every entry already (the engine asks for it first): reuse that read.
            entries = self._entries.get((self.threshold, False)) or self.entries(data_only=not deletes)
            figures["max_small_files_in_partition"] = entries.max_small_files_in_partition
            if deletes:
                figures["max_partition_delete_ratio"] = entries.max_partition_delete_ratio
        elif operation == "rewrite_position_delete_files":
            count = self.summary.delete_files
            figures["delete_files"] = count if count is not None else self.entries(data_only=False).delete_files
            if deletes:
                figures["deletion_vectors"] = self.entries(data_only=False).deletion_vectors
        elif operation == "rewrite_manifests":
            figures["data_manifests"] = read_manifest_tier(self.manifests()).data_manifests
        elif operation == "remove_orphan_files" and self.checked.get(operation) is None:
            figures["table_age_hours"] = table_age_hours(self.table, self.now_ms)
        elif operation in STATISTICS:
            figures["snapshot_id"] = self.summary.snapshot_id
            figures[STATISTICS[operation][0]] = statistics_snapshot(self.table, operation, self.summary.snapshot_id)
            if operation == "compute_partition_stats":
                figures["partitioned"] = partitioned(self.table)
        return figures

    def figures(self, compacting: bool) -> dict[str, Any]:
        """What was read (None: that tier was not), plus the eligible files of a compaction."""
        summary = self.summary
        oldest = summary.oldest_snapshot_ms
        entries = self._entries.get((self.threshold, False)) or self._entries.get((self.threshold, True))
        if entries is None and compacting:
            entries = self.entries(data_only=True)
        deletes = self._entries.get((self.threshold, False))  # the delete figures need the delete manifests
        manifests = read_manifest_tier(self._manifests) if self._manifests is not None else None
        return {
            "snapshot_id": summary.snapshot_id,  # the snapshot the plan read (the fixed point's record)
            "snapshots": len(summary.snapshots),
            "oldest_snapshot_age_hours": None if oldest is None
            else round((self.reference_ms - oldest) / 3600000.0, 3),
            "data_files": summary.data_files, "delete_files": summary.delete_files,
            "data_bytes": summary.total_bytes,
            "small_files": None if entries is None else entries.small_files,
            "small_bytes": None if entries is None else entries.small_bytes,
            "max_small_files_in_partition": None if entries is None else entries.max_small_files_in_partition,
            "deletion_vectors": None if deletes is None else deletes.deletion_vectors,
            "max_partition_delete_ratio": None if deletes is None else round(deletes.max_partition_delete_ratio, 4),
            "manifests": None if manifests is None else manifests.manifests,
            "data_manifests": None if manifests is None else manifests.data_manifests,
            "eligible_files": entries.small_files if compacting and entries is not None else None,
            "eligible_bytes": entries.small_bytes if compacting and entries is not None else None,
            "tiers": sorted(self.tiers),
        }

    def cold_scope(self, hours: float) -> ColdScope:
        entries = self.entries(data_only=False)
        fields, columns = layout(self.table)
        return cold_scope(fields, columns, entries.partition_states, hours, self.reference_ms,
                          self.summary.oldest_snapshot_ms, entries.small_files,
                          delete_ratio=self.summary.delete_files != 0)
