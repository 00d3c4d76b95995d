"""Health records from metadata: table_health's figures for each table, read with pyiceberg
(every tier: the snapshot summary, the manifest list and every manifest's entries)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dbt_iceberg_maint.errors import TableReadError
from dbt_iceberg_maint.metadata.catalog_tables import MetadataCatalog
from dbt_iceberg_maint.metadata.reader import (
    EntryTier,
    concurrently,
    current_manifests,
    now_ms,
    read_entries,
    read_manifest_tier,
    read_summary,
    small_file_threshold,
    target_file_size,
)
from dbt_iceberg_maint.policy.statistics import STATISTICS

if TYPE_CHECKING:
    from pyiceberg.table import Table

HEALTH_FIELDS = ("table", "data_files", "small_files", "data_bytes", "delete_files", "records", "snapshots",
                 "oldest_snapshot_age_hours", "manifests", "data_manifests", "partitions",
                 "max_small_files_in_partition", "deletion_vectors", "max_partition_delete_ratio",
                 "target_file_size_bytes", "small_file_threshold_bytes")
# Beyond table_health's figures (Spark SQL shows no statistics files): whether the current snapshot
# lacks table / partition statistics (None: the table has no snapshot, or no partitions for the latter).
STATISTICS_FIELDS = ("statistics_stale", "partition_statistics_stale")


@dataclass(frozen=True)
class HealthRecord:
    """table_health's figures for one table, or the error that kept them from being read."""

    table: str
    figures: Mapping[str, Any] | None = None
    error: str | None = None
    # For the report: live data file sizes and small files per partition (largest first).
    file_sizes: tuple[int, ...] = field(default=(), repr=False)
    small_files_by_partition: tuple[tuple[str, int], ...] = field(default=(), repr=False)

    def to_dict(self) -> dict[str, Any]:
        if self.figures is None:
            return {"table": self.table, "error": self.error}
        return {**{key: self.figures[key] for key in HEALTH_FIELDS},
                **{key: self.figures.get(key) for key in STATISTICS_FIELDS}}


def health_figures(name: str, table: Table, target_override: int | None = None,
                   at_ms: int | None = None) -> tuple[dict[str, Any], EntryTier]:
    summary = read_summary(table)
    manifests = current_manifests(table)
    tier2 = read_manifest_tier(manifests)
    target = target_file_size(summary.properties, target_override)
    threshold = small_file_threshold(target)
    entries = read_entries(table, manifests, threshold)
    oldest = summary.oldest_snapshot_ms
    reference = now_ms() if at_ms is None else at_ms
    figures = {
        "table": name, "data_files": entries.data_files, "small_files": entries.small_files,
        "data_bytes": entries.data_bytes, "delete_files": entries.delete_files, "records": entries.records,
        "snapshots": len(summary.snapshots),
        "oldest_snapshot_age_hours": None if oldest is None else round((reference - oldest) / 3600000.0, 3),
        "manifests": tier2.manifests, "data_manifests": tier2.data_manifests, "partitions": entries.partitions,
        "max_small_files_in_partition": entries.max_small_files_in_partition,
        "deletion_vectors": entries.deletion_vectors,
        "max_partition_delete_ratio": round(entries.max_partition_delete_ratio, 4),
        "target_file_size_bytes": target, "small_file_threshold_bytes": threshold,
    }
    for key, operation in zip(STATISTICS_FIELDS, STATISTICS, strict=True):
        current = summary.snapshot_id
        applies = current is not None and (operation == "compute_table_stats" or partitioned(table))
        figures[key] = statistics_snapshot(table, operation, current) != current if applies else None
    return figures, entries


def step_health(table: Table, at_ms: int | None = None) -> dict[str, Any]:
    """The health a history row records after a step, from the table's metadata file: what the
    macros' `_iceberg_maint_summary_figures` reads from Spark's snapshots table (the snapshots,
    the oldest one's age, the current snapshot's id and file counts), in its keys."""
    summary = read_summary(table)
    oldest = summary.oldest_snapshot_ms
    reference = now_ms() if at_ms is None else at_ms
    empty = not summary.snapshots
    return {"snapshots": len(summary.snapshots),
            "oldest_snapshot_age_hours": None if oldest is None else round((reference - oldest) / 3600000.0, 3),
            "snapshot_id": summary.snapshot_id, "data_files": 0 if empty else summary.data_files,
            "delete_files": 0 if empty else summary.delete_files}


def read_health(catalog: MetadataCatalog, names: Sequence[str] | None = None, workers: int = 8,
                target_override: int | None = None) -> list[HealthRecord]:
    chosen = list(names) if names else catalog.list_tables()

    def one(name: str) -> HealthRecord:
        try:
            figures, entries = health_figures(name, catalog.load(name), target_override)
        except TableReadError as exc:
            return HealthRecord(name, error=str(exc))
        except Exception as exc:  # a corrupt manifest: per-table error, the others go on
            return HealthRecord(name, error=f"{name}: {type(exc).__name__}: {exc}")
        return HealthRecord(name, figures, None, entries.file_sizes, entries.small_files_by_partition)

    return concurrently(chosen, one, workers)


def partitioned(table: Table) -> bool:
    """Whether any partition spec of the table has a field (Spark's partitions metadata table then
    has a `partition` column, what the macros read)."""
    return any(spec.fields for spec in table.metadata.partition_specs)


def statistics_snapshot(table: Table, operation: str, current: int | None) -> int | None:
    """The snapshot the table's statistics files of `operation`'s kind are for: the current one
    when one of them is, else the newest listed (None: the table has none). Read from the table
    metadata (`statistics`, `partition-statistics`), exact where the macros know only what the plan
    recorded."""
    files = table.metadata.statistics if operation == "compute_table_stats" else table.metadata.partition_statistics
    ids = [int(f.snapshot_id) for f in files]
    if current is not None and current in ids:
        return current
    return ids[-1] if ids else None

