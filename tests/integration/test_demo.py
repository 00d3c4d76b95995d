"""The README's main command (`dbt-iceberg-maint demo`), run whole on the suite's Spark session."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from rich.console import Console

from dbt_iceberg_maint.demo import DEMO_TABLES, run_demo
from dbt_iceberg_maint.spark import switch_warehouse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration


def health_rows(output: str, title: str) -> dict[str, list[str]]:
    """The rows of a rich table in the recorded output, by table name."""
    section = output.split(title, 1)[1]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]
        name = cells[0].rsplit(".", 1)[-1] if cells else None
        if name in DEMO_TABLES:
            rows[name] = cells
        elif rows and not cells:
            break
    return rows


def test_the_demo_builds_maintains_and_recovers_a_conflict(spark: SparkSession, tmp_path: Path) -> None:
    switch_warehouse(spark, tmp_path / "warehouse")  # the demo's warehouse, fresh catalog instance
    console = Console(record=True, width=250, color_system=None)

    run_demo(tmp_path, out=console)

    output = console.export_text()
    before = health_rows(output, "Iceberg table health (from metadata tables)")
    assert set(before) == set(DEMO_TABLES)  # health for every built Iceberg table (>= 3)
    # columns: table, data files, small files, bytes, delete files, records, snapshots, manifests, partitions
    assert all(int(cells[1]) > 0 and int(cells[6]) > 0 for cells in before.values())
    assert int(before["events"][8]) > 1  # day-partitioned
    assert "iceberg_maintenance: one result per table and operation" in output
    after = health_rows(output, "Iceberg table health before -> after maintenance")
    assert "->" in after["event_log"][1]  # compaction changed event_log's data files
    # columns: table, data files, small files, max small/partition, snapshots, manifests, records
    for name in ("events", "event_log"):
        counts = [int(n) for n in re.findall(r"\d+", after[name][4])]
        assert counts[-1] <= counts[0], f"{name}: snapshots grew after maintenance: {after[name][4]}"
    # Cold scoping: old days compacted, the days still written to left alone.
    cold = re.search(r"events data files: cold days (\d+) -> (\d+) \(compacted\); hot days (.*)", output)
    assert cold and int(cold[2]) < int(cold[1]), output
    assert cold[3].endswith("(left alone)"), cold[3]
    assert "conflict_merge: missing_files_to_delete -> re-run -> success" in output
    assert re.search(r"conflict_merge_unsafe: \w+ -> write verified not landed -> re-run -> success; "
                     r"(\d+) rows, \1 distinct event_ids; snapshot log: no data-changing snapshot", output)
    assert "no duplicates" in output
    assert "conflict_sql_error: not_iceberg_conflict -> not re-run: " in output
    assert "info    merge_without_partition_predicate: incremental merge into Iceberg table" in output  # lint step
    assert "lint exit code: 0" in output
