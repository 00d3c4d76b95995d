"""The torture suite's checks on the catalog itself, without Spark (pyiceberg on the same JDBC
catalog): every file a remaining snapshot references exists, which data files are orphans, and
what each table holds per ledger batch."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from pyiceberg.table import Table

from lab.ledger import Observed, row_checksum


def local_path(location: str) -> Path:
    """A table's or file's location as a local path: `/x`, `file:///x`, and `file:/x` (how the
    Hive catalog writes the locations under a local warehouse)."""
    return Path(urlparse(location).path) if location.startswith("file:") or "://" in location else Path(location)


@dataclass(frozen=True)
class ReferenceAudit:
    table: str
    snapshots: int
    referenced: frozenset[str]  # data, delete, manifest and manifest-list files of every snapshot
    missing: tuple[str, ...]  # referenced but gone: must stay empty


def audit_references(name: str, table: Table) -> ReferenceAudit:
    """A missing manifest list or manifest is a finding like a missing data file (what it would
    have referenced cannot be read, so it is not counted), never a crash of the audit."""
    io = table.io
    referenced: set[str] = set()
    snapshots = table.metadata.snapshots
    for snapshot in snapshots:
        referenced.add(snapshot.manifest_list)
        if not local_path(snapshot.manifest_list).exists():
            continue
        for manifest in snapshot.manifests(io):
            referenced.add(manifest.manifest_path)
            if not local_path(manifest.manifest_path).exists():
                continue
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                referenced.add(entry.data_file.file_path)
    paths = {str(local_path(p)) for p in referenced}
    missing = tuple(sorted(p for p in paths if not os.path.exists(p)))
    return ReferenceAudit(name, len(snapshots), frozenset(paths), missing)


def data_files_on_disk(table: Table) -> dict[str, float]:
    """Every Parquet file under the table's data folder, with its mtime."""
    root = local_path(table.metadata.location) / "data"
    found: dict[str, float] = {}
    for folder, _dirs, files in os.walk(root):
        for file in files:
            if file.endswith(".parquet"):
                path = os.path.join(folder, file)
                try:
                    found[path] = os.stat(path).st_mtime
                except FileNotFoundError:
                    continue  # removed while we walked
    return found


def orphans(table: Table, audit: ReferenceAudit) -> dict[str, float]:
    return {path: mtime for path, mtime in data_files_on_disk(table).items() if path not in audit.referenced}


def age_files(paths: Iterable[str], hours: float) -> int:
    """Set mtimes `hours` in the past (what remove_orphan_files compares with its window)."""
    count = 0
    for path in paths:
        past = os.stat(path).st_mtime - hours * 3600
        os.utime(path, (past, past))
        count += 1
    return count


def observed_batches(table: Table) -> list[Observed]:
    """batch_id, row count and checksum per batch (lab/ledger.py's CHECKSUM_SQL, in Python)."""
    frame = table.scan(selected_fields=("id", "batch_id", "payload")).to_arrow()
    counts: dict[int, int] = {}
    sums: dict[int, int] = {}
    for row_id, batch, payload in zip(frame.column("id").to_pylist(), frame.column("batch_id").to_pylist(),
                                      frame.column("payload").to_pylist(), strict=True):
        counts[batch] = counts.get(batch, 0) + 1
        sums[batch] = sums.get(batch, 0) + row_checksum(row_id, payload)
    return [Observed(batch, counts[batch], sums[batch]) for batch in sorted(counts)]
