"""What an expire_snapshots and a remove_orphan_files run would free, from metadata and a
listing of the table's location (docs/report.md, "Estimates").

Pure functions (which snapshots expire, which files only they reach, which listed files nothing
reaches) and `estimate`, the I/O shell that reads one table's metadata with pyiceberg and lists
its location with pyarrow's file systems.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dbt_iceberg_maint.report.model import Estimates

if TYPE_CHECKING:
    from pyiceberg.table import Table

HOUR_MS = 3_600_000


@dataclass(frozen=True)
class SnapshotNode:
    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int


def retained_snapshots(snapshots: Sequence[SnapshotNode], refs: Iterable[tuple[int, str]], cutoff_ms: int,
                       retain_last: int) -> set[int]:
    """The snapshots expire_snapshots(older_than => cutoff, retain_last) keeps, as Iceberg decides:
    a tag's snapshot; per branch, its ancestors from the head while fewer than retain_last are kept
    or the ancestor is not older than the cutoff (the first one that is both ends the walk); and
    any snapshot on no branch that is not older than the cutoff."""
    by_id = {s.snapshot_id: s for s in snapshots}
    keep: set[int] = set()
    on_branch: set[int] = set()
    for head, kind in refs:
        if kind != "branch":
            keep.add(head)
            continue
        kept = 0
        current = by_id.get(head)
        walking = True
        while current is not None:
            on_branch.add(current.snapshot_id)
            if walking and (kept < max(1, retain_last) or current.timestamp_ms >= cutoff_ms):
                keep.add(current.snapshot_id)
                kept += 1
            else:
                walking = False
            current = by_id.get(current.parent_id) if current.parent_id is not None else None
    keep.update(s.snapshot_id for s in snapshots if s.snapshot_id not in on_branch and s.timestamp_ms >= cutoff_ms)
    return keep


def freed(expiring: Mapping[str, int], retained: Iterable[str]) -> tuple[int, int]:
    """(files, bytes) reachable from expiring snapshots only: what expiring them deletes."""
    kept = set(retained)
    gone = [size for path, size in expiring.items() if path not in kept]
    return len(gone), sum(gone)


def normal_path(location: str) -> str:
    """A location without its file: scheme and with single slashes (metadata writes both spellings)."""
    path = re.sub(r"^file:(//)?", "", location)
    return re.sub(r"/{2,}", "/", path) if "://" not in path else path


def hidden(path: str, root: str) -> bool:
    """A file remove_orphan_files never considers: a name below the table's location that starts
    with `.` or `_` (checksums, markers), as Iceberg's default path filter."""
    relative = path[len(root):].lstrip("/") if path.startswith(root) else path
    return any(part.startswith((".", "_")) for part in relative.split("/"))


def orphans(listed: Mapping[str, tuple[int, int]], referenced: Iterable[str], cutoff_ms: int,
            root: str) -> tuple[int, int]:
    """(files, bytes) of the listed files (path -> size, modified ms) no metadata references,
    older than the cutoff and not hidden: what a remove_orphan_files dry run lists."""
    known = {normal_path(p) for p in referenced}
    found = [size for path, (size, modified) in listed.items()
             if normal_path(path) not in known and modified < cutoff_ms and not hidden(normal_path(path), root)]
    return len(found), sum(found)


def _list_location(location: str) -> dict[str, tuple[int, int]]:
    """Every file under the table's location: path -> (size, modified ms)."""
    from pyarrow import fs  # type: ignore[import-not-found,unused-ignore]

    if "://" in location and not location.startswith("file:"):
        filesystem, root = fs.FileSystem.from_uri(location)
    else:
        filesystem, root = fs.LocalFileSystem(), normal_path(location)
    listed: dict[str, tuple[int, int]] = {}
    for info in filesystem.get_file_info(fs.FileSelector(root, recursive=True, allow_not_found=True)):
        if info.type == fs.FileType.File:
            modified = int(info.mtime.timestamp() * 1000) if info.mtime is not None else 0
            listed[info.path] = (info.size or 0, modified)
    return listed


def estimate(name: str, table: Table, now_ms: int, expire_older_than_hours: float, retain_last: int,
             orphan_older_than_hours: float) -> Estimates:
    """Both estimates for one table (its metadata, then a listing of its location)."""
    metadata = table.metadata
    io = table.io
    nodes = [SnapshotNode(s.snapshot_id, s.parent_snapshot_id, s.timestamp_ms) for s in metadata.snapshots]
    refs = [(ref.snapshot_id, str(getattr(ref.snapshot_ref_type, "value", ref.snapshot_ref_type)))
            for ref in metadata.refs.values()]
    keep = retained_snapshots(nodes, refs, now_ms - int(expire_older_than_hours * HOUR_MS), retain_last)
    manifest_cache: dict[str, dict[str, int]] = {}

    def reachable(snapshot_id: int) -> dict[str, int]:
        """The manifest list, manifests and live content files of a snapshot: path -> bytes."""
        snapshot = metadata.snapshot_by_id(snapshot_id)
        if snapshot is None:
            return {}
        files = {normal_path(snapshot.manifest_list): len(io.new_input(snapshot.manifest_list))}
        for manifest in snapshot.manifests(io):
            path = normal_path(manifest.manifest_path)
            if path not in manifest_cache:
                entries = {path: manifest.manifest_length}
                for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                    entries[normal_path(entry.data_file.file_path)] = entry.data_file.file_size_in_bytes
                manifest_cache[path] = entries
            files.update(manifest_cache[path])
        return files

    kept_files: dict[str, int] = {}
    expiring_files: dict[str, int] = {}
    for node in nodes:
        (kept_files if node.snapshot_id in keep else expiring_files).update(reachable(node.snapshot_id))
    expire_files, expire_bytes = freed(expiring_files, kept_files)

    referenced = set(kept_files) | set(expiring_files)
    referenced.update(entry.metadata_file for entry in metadata.metadata_log)
    if table.metadata_location:
        referenced.add(table.metadata_location)
    referenced.update(s.statistics_path for s in metadata.statistics)
    referenced.update(s.statistics_path for s in metadata.partition_statistics)
    root = normal_path(metadata.location)
    listed = _list_location(metadata.location)
    # The Hadoop catalog's pointer file is metadata too, though no metadata file names it.
    referenced.update(p for p in listed if p.endswith("/metadata/version-hint.text"))
    orphan_files, orphan_bytes = orphans(listed, referenced, now_ms - int(orphan_older_than_hours * HOUR_MS), root)
    expiring = sum(1 for n in nodes if n.snapshot_id not in keep)
    return Estimates(name, expire_older_than_hours, retain_last, expiring, expire_files, expire_bytes,
                     orphan_older_than_hours, orphan_files, orphan_bytes)
