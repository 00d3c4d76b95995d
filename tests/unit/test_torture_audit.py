"""The torture audit on a real pyiceberg table (SQLite catalog, no Spark): a referenced metadata
file that is gone is counted as missing, never a crash of the audit; every local location form is
read as a path."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from lab.audit import audit_references, local_path


@pytest.mark.parametrize("location", ["/wh/torture/t", "file:///wh/torture/t", "file:/wh/torture/t"])
def test_local_locations_are_paths(location: str) -> None:
    """`file:/...` is the Hive catalog's form (the torture run on a Hive Metastore met it)."""
    assert local_path(location) == Path("/wh/torture/t")


def test_a_missing_manifest_list_is_counted_not_a_crash(tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("audit", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("torture")
    rows = pa.table({"id": pa.array([1, 2], pa.int64())})
    table = catalog.create_table("torture.t", schema=rows.schema)
    table.append(rows)
    table.append(rows)
    table = catalog.load_table("torture.t")
    clean = audit_references("t", table)
    assert clean.missing == () and clean.snapshots == 2
    first = local_path(table.metadata.snapshots[0].manifest_list)
    os.remove(first)
    audited = audit_references("t", table)
    assert audited.missing == (str(first),)
    assert audited.snapshots == 2
