"""TableHealth from the table_health macro's result lines (pure)."""

from __future__ import annotations

import json

import pytest

from dbt_iceberg_maint.errors import IcebergMaintError
from dbt_iceberg_maint.maintenance.health import TableHealth, healths_from_results
from dbt_iceberg_maint.maintenance.results import parse_result_lines

METRICS = {
    "table": "local.analytics.events", "data_files": 23, "small_files": 20, "data_bytes": 44720,
    "delete_files": 0, "records": 90, "snapshots": 3, "oldest_snapshot_age_hours": 0.25, "manifests": 3,
    "data_manifests": 3, "partitions": 10, "max_small_files_in_partition": 3,
    "target_file_size_bytes": 536870912, "small_file_threshold_bytes": 402653184,
}


def line(operation: str, status: str, metrics: dict[str, object]) -> str:
    payload = {"table": "local.analytics.events", "operation": operation, "status": status,
               "reason": None, "sql": None, "metrics": metrics, "duration_ms": 5}
    return "ICEBERG_MAINT_RESULT " + json.dumps(payload)


def test_health_comes_from_successful_table_health_lines_only() -> None:
    messages = [
        "Running with dbt=1.11",
        line("apply_table_properties", "skipped", {"changed": {}}),
        line("table_health", "success", METRICS),
        line("rewrite_data_files", "success", {"rewritten_data_files_count": 20}),
    ]
    [health] = healths_from_results(parse_result_lines(messages))
    assert health == TableHealth(
        table="local.analytics.events", data_files=23, small_files=20, data_bytes=44720, delete_files=0,
        records=90, snapshots=3, oldest_snapshot_age_hours=0.25, manifests=3, partitions=10,
        data_manifests=3, max_small_files_in_partition=3,
    )


def test_missing_figures_are_an_error_naming_them() -> None:
    partial = {k: v for k, v in METRICS.items() if k not in {"records", "snapshots"}}
    with pytest.raises(IcebergMaintError, match="table_health metrics lack records, snapshots"):
        TableHealth.from_metrics(partial)
