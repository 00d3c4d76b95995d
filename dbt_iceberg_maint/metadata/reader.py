"""Tiered reading of one table's Iceberg metadata (pyiceberg, no JVM).

Tier 1, the table metadata file (already loaded with the table): snapshot list and the current
snapshot's summary (files, delete files, records, bytes). Tier 2, the manifest list: manifest
counts, data vs delete. Tier 3, manifest entries of the data manifests that hold live files:
file sizes per partition. Each tier is read only when a question needs it.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from dbt_iceberg_maint.metadata.cold import DEFAULT_TARGET_FILE_SIZE_BYTES, PartitionField, PartitionState
from dbt_iceberg_maint.policy.engine import first_metadata_age_hours

if TYPE_CHECKING:
    from pyiceberg.manifest import ManifestFile
    from pyiceberg.table import Table

T = TypeVar("T")
R = TypeVar("R")

# Spark's DESCRIBE type names, for cold-partition predicates.
_SPARK_TYPES = {
    "StringType": "string", "IntegerType": "int", "LongType": "bigint", "DateType": "date",
    "TimestamptzType": "timestamp", "TimestampType": "timestamp_ntz", "BooleanType": "boolean",
}
_TRANSFORMS = {"DayTransform": "days", "HourTransform": "hours", "MonthTransform": "months",
               "YearTransform": "years", "IdentityTransform": "identity"}


@dataclass(frozen=True)
class SnapshotInfo:
    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    operation: str | None
    summary: Mapping[str, str]


@dataclass(frozen=True)
class SummaryTier:
    """Tier 1: what the table metadata file answers."""

    snapshot_id: int | None
    data_files: int | None
    delete_files: int | None
    records: int | None
    total_bytes: int | None
    snapshots: tuple[SnapshotInfo, ...]
    properties: Mapping[str, str]

    @property
    def oldest_snapshot_ms(self) -> int | None:
        return min((s.timestamp_ms for s in self.snapshots), default=None)

    def current_lineage(self) -> list[SnapshotInfo]:
        """Current snapshot and its ancestors, newest first."""
        by_id = {s.snapshot_id: s for s in self.snapshots}
        lineage = []
        current = by_id.get(self.snapshot_id) if self.snapshot_id is not None else None
        while current is not None:
            lineage.append(current)
            current = by_id.get(current.parent_id) if current.parent_id is not None else None
        return lineage


@dataclass(frozen=True)
class ManifestTier:
    manifests: int
    data_manifests: int


@dataclass(frozen=True)
class EntryTier:
    """Tier 3: live data and delete files of the current snapshot."""

    data_files: int
    small_files: int
    data_bytes: int
    records: int
    delete_files: int
    partitions: int
    max_small_files_in_partition: int
    partition_states: tuple[PartitionState, ...]
    file_sizes: tuple[int, ...]
    small_files_by_partition: tuple[tuple[str, int], ...]
    small_bytes: int = 0  # the small files' bytes (what a compaction of the whole table rewrites)
    deletion_vectors: int = 0  # format v3: Puffin delete files
    # The greatest (deletion vectors' deleted rows) / (data files' rows) of a (spec, partition).
    max_partition_delete_ratio: float = 0.0


def _int(summary: Mapping[str, str], key: str) -> int | None:
    value = summary.get(key)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def read_summary(table: Table) -> SummaryTier:
    metadata = table.metadata
    snapshots = []
    for snap in metadata.snapshots:
        summary = dict(snap.summary.additional_properties) if snap.summary is not None else {}
        operation = snap.summary.operation.value if snap.summary is not None else None
        snapshots.append(SnapshotInfo(snap.snapshot_id, snap.parent_snapshot_id, snap.timestamp_ms, operation,
                                      summary))
    current = metadata.current_snapshot()
    if current is None:
        return SummaryTier(None, 0, 0, 0, 0, tuple(snapshots), dict(metadata.properties))
    summary = dict(current.summary.additional_properties) if current.summary is not None else {}
    return SummaryTier(current.snapshot_id, _int(summary, "total-data-files"), _int(summary, "total-delete-files"),
                       _int(summary, "total-records"), _int(summary, "total-files-size"), tuple(snapshots),
                       dict(metadata.properties))


def table_age_hours(table: Table, now_ms: int) -> float | None:
    """`_iceberg_maint_table_age_hours`: the table's age from its first metadata file, while the
    metadata log (or the current file, on a table never committed to since) still names it."""
    metadata = table.metadata
    log = metadata.metadata_log
    first, at_ms = ((log[0].metadata_file, log[0].timestamp_ms) if log
                    else (table.metadata_location, metadata.last_updated_ms))
    return first_metadata_age_hours(first, at_ms, now_ms)


def current_manifests(table: Table) -> list[ManifestFile]:
    snapshot = table.metadata.current_snapshot()
    return [] if snapshot is None else list(snapshot.manifests(table.io))


def read_manifest_tier(manifests: list[ManifestFile]) -> ManifestTier:
    from pyiceberg.manifest import ManifestContent

    data = sum(1 for m in manifests if m.content == ManifestContent.DATA)
    return ManifestTier(len(manifests), data)


def target_file_size(properties: Mapping[str, str], override: int | None = None) -> int:
    """table_health's target: the argument, else write.target-file-size-bytes, else 512 MiB."""
    if override is not None:
        return override
    value = properties.get("write.target-file-size-bytes")
    return int(value) if value is not None else DEFAULT_TARGET_FILE_SIZE_BYTES


def small_file_threshold(target: int) -> int:
    return int(target * 0.75)


def layout(table: Table) -> tuple[tuple[PartitionField, ...], dict[str, str]]:
    """The current spec's fields (transform, source column) and column -> Spark type name."""
    schema = table.schema()
    columns = {f.name: _SPARK_TYPES.get(type(f.field_type).__name__, str(f.field_type)) for f in schema.fields}
    fields = []
    for pf in table.spec().fields:
        transform = _TRANSFORMS.get(type(pf.transform).__name__, type(pf.transform).__name__.lower())
        try:
            column: str | None = schema.find_column_name(pf.source_id)
        except ValueError:
            column = None
        fields.append(PartitionField(transform, column))
    return tuple(fields), columns


def _json_value(transform_name: str, source_type: str, value: Any) -> Any:
    """A partition value as Spark's to_json prints it (days and dates as 'YYYY-MM-DD')."""
    if value is None:
        return None
    if transform_name == "DayTransform" or (transform_name == "IdentityTransform" and source_type == "DateType"):
        if isinstance(value, int):
            return (dt.date(1970, 1, 1) + dt.timedelta(days=value)).isoformat()
        if isinstance(value, dt.date):
            return value.isoformat()
    return value


def read_entries(table: Table, manifests: list[ManifestFile], threshold: int,
                 data_only: bool = False) -> EntryTier:
    """Tier 3 over the live files. data_only: skip delete manifests (compaction needs data
    files only); partitions then count data files' partitions only."""
    from pyiceberg.manifest import FileFormat, ManifestContent

    metadata = table.metadata
    specs = metadata.specs()
    current_spec = table.spec()
    schema = table.schema()
    # The partitions table's key: every field of every spec, by field id (the union struct).
    union: dict[int, tuple[str, str]] = {}
    for spec in specs.values():
        for pf in spec.fields:
            try:
                source_type = type(schema.find_field(pf.source_id).field_type).__name__
            except ValueError:
                source_type = ""
            union[pf.field_id] = (type(pf.transform).__name__, source_type)
    union_ids = sorted(union)
    snapshot_ms = {s.snapshot_id: s.timestamp_ms for s in metadata.snapshots}

    data_files = small = small_bytes = data_bytes = records = delete_files = 0
    sizes: list[int] = []
    # key -> [last_ms, spec_id, newest_ms, small, rows, deleted rows]
    partitions: dict[tuple[Any, ...], list[Any]] = {}
    # table_health groups small files by (spec_id, partition), the partitions table by partition.
    small_by_spec: dict[tuple[int, tuple[Any, ...]], int] = {}
    # Rows of data files and rows deletion vectors delete, by (spec_id, partition) as table_health groups.
    rows_by_spec: dict[tuple[int, tuple[Any, ...]], int] = {}
    deleted_by_spec: dict[tuple[int, tuple[Any, ...]], int] = {}
    vectors = 0
    for manifest in manifests:
        is_data = manifest.content == ManifestContent.DATA
        if data_only and not is_data:
            continue
        # A manifest with no added or existing files holds no live file.
        if not manifest.has_added_files() and not manifest.has_existing_files():
            continue
        spec = specs[manifest.partition_spec_id]
        positions = {pf.field_id: i for i, pf in enumerate(spec.fields)}
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            file = entry.data_file
            key = tuple(
                _json_value(union[fid][0], union[fid][1], file.partition[positions[fid]])
                if fid in positions else None
                for fid in union_ids)
            state = partitions.setdefault(key, [None, file.spec_id, -1, 0, 0, 0])
            committed = snapshot_ms.get(entry.snapshot_id) if entry.snapshot_id is not None else None
            if committed is not None and (state[0] is None or committed > state[0]):
                state[0] = committed
            if committed is not None and committed >= state[2]:
                state[1], state[2] = manifest.partition_spec_id, committed
            if is_data:
                data_files += 1
                data_bytes += file.file_size_in_bytes
                records += file.record_count
                rows_by_spec[(file.spec_id, key)] = rows_by_spec.get((file.spec_id, key), 0) + file.record_count
                state[4] += file.record_count
                sizes.append(file.file_size_in_bytes)
                if file.file_size_in_bytes < threshold:
                    small += 1
                    small_bytes += file.file_size_in_bytes
                    state[3] += 1
                    spec_key = (file.spec_id, key)
                    small_by_spec[spec_key] = small_by_spec.get(spec_key, 0) + 1
            else:
                delete_files += 1
                if file.file_format == FileFormat.PUFFIN:
                    vectors += 1
                    state[5] += file.record_count
                    deleted_by_spec[(file.spec_id, key)] = (deleted_by_spec.get((file.spec_id, key), 0)
                                                            + file.record_count)
    current_count = len(current_spec.fields)
    position_in_union = [union_ids.index(pf.field_id) if pf.field_id in union else -1
                         for pf in current_spec.fields]
    states = []
    for key, (last_ms, spec_id, _newest, small_count, rows, deleted) in partitions.items():
        # The macro maps the union struct's values onto the current spec's fields (same count
        # required); rows whose spec has another field count are not the current spec's.
        values = key if len(union_ids) == current_count else tuple(key[i] for i in position_in_union if i >= 0)
        same_shape = len(specs[spec_id].fields) == current_count and len(union_ids) == current_count
        states.append(PartitionState(values, same_shape, last_ms, small_count, rows, deleted))
    return EntryTier(
        data_files=data_files, small_files=small, data_bytes=data_bytes, records=records,
        delete_files=delete_files, partitions=len(partitions),
        max_small_files_in_partition=max(small_by_spec.values(), default=0),
        partition_states=tuple(states), file_sizes=tuple(sizes),
        small_files_by_partition=tuple(sorted(((_key_text(k), v[3]) for k, v in partitions.items() if v[3]),
                                              key=lambda kv: -kv[1])),
        small_bytes=small_bytes, deletion_vectors=vectors,
        max_partition_delete_ratio=max((deleted / rows_by_spec[k] for k, deleted in deleted_by_spec.items()
                                        if rows_by_spec.get(k, 0) > 0), default=0.0),
    )


def _key_text(key: tuple[Any, ...]) -> str:
    return "/".join("null" if v is None else str(v) for v in key) or "(unpartitioned)"


def now_ms() -> int:
    return int(time.time() * 1000)


def concurrently(items: Sequence[T], work: Callable[[T], R], workers: int) -> list[R]:
    """Metadata reads are I/O bound: a thread pool overlaps them; order is kept."""
    if workers <= 1 or len(items) <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(work, items))
