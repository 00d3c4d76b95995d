"""Table health read from Iceberg metadata tables (files, snapshots, manifests, partitions).

`health_via_dbt` is the product's source of truth: it runs the package's `table_health` macro
(`dbt run-operation`) and reads its ICEBERG_MAINT_RESULT lines. `read_health` queries Spark
directly and remains for callers that hold a SparkSession but no dbt project.
"""

from __future__ import annotations

import re
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dbt_iceberg_maint.errors import IcebergMaintError, UsageError
from dbt_iceberg_maint.invoke import INTEGRATION_PROJECT, invoke_dbt
from dbt_iceberg_maint.results import MaintenanceResult, parse_result_lines

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_TARGET_FILE_SIZE_BYTES = 536_870_912  # Iceberg's write.target-file-size-bytes default
SMALL_FILE_RATIO = 0.75  # rewrite_data_files' default min-file-size-bytes is 0.75 x target

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|`[^`]+`")


@dataclass(frozen=True)
class TableHealth:
    table: str
    data_files: int
    small_files: int
    data_bytes: int
    delete_files: int
    records: int
    snapshots: int
    oldest_snapshot_age_hours: float | None
    manifests: int
    partitions: int
    # Reported by the table_health macro only (None when read by read_health).
    data_manifests: int | None = None
    max_small_files_in_partition: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, Any]) -> TableHealth:
        """From the table_health macro's dict (extra keys such as the thresholds are ignored)."""
        names = {f.name for f in fields(cls)}
        missing = sorted(f.name for f in fields(cls) if f.default is not None and f.name not in metrics)
        if missing:
            raise IcebergMaintError(f"table_health metrics lack {', '.join(missing)}: {dict(metrics)!r}")
        return cls(**{key: value for key, value in metrics.items() if key in names})


def healths_from_results(results: Iterable[MaintenanceResult]) -> tuple[TableHealth, ...]:
    """The TableHealth of every successful `table_health` result line, in order."""
    return tuple(TableHealth.from_metrics(r.metrics) for r in results
                 if r.operation == "table_health" and r.status == "success")


def health_via_dbt(
    tables: Sequence[str],
    project_dir: str | os.PathLike[str] = INTEGRATION_PROJECT,
    env: Mapping[str, str] | None = None,
) -> tuple[TableHealth, ...]:
    """Run `dbt run-operation dbt_iceberg_maint.table_health` for each table (in this process)."""
    healths: list[TableHealth] = []
    for table in tables:
        invocation = invoke_dbt(
            ["run-operation", "dbt_iceberg_maint.table_health", "--args", json.dumps({"relation": table}), "--quiet"],
            Path(project_dir), env=env,
        )
        found = healths_from_results(parse_result_lines(invocation.log_messages))
        if not invocation.success or len(found) != 1:
            raise IcebergMaintError(f"table_health for {table} failed: {invocation.exception or 'no result line'}")
        healths.extend(found)
    return tuple(healths)


def validate_table_name(table: str) -> str:
    """Accept `[catalog.]schema.table` made of identifiers; reject anything else."""
    parts = table.split(".")
    if not 2 <= len(parts) <= 3 or not all(_IDENTIFIER.fullmatch(part) for part in parts):
        raise UsageError(
            f"table {table!r} is not a table name; expected schema.table or catalog.schema.table"
        )
    return table


def health_sql(table: str, target_file_size_bytes: int = DEFAULT_TARGET_FILE_SIZE_BYTES) -> str:
    """One query over the metadata tables, returning a single row of health figures."""
    validate_table_name(table)
    small_below = int(target_file_size_bytes * SMALL_FILE_RATIO)
    return f"""
select
  (select count(*) from {table}.data_files) as data_files,
  (select count(*) from {table}.data_files where file_size_in_bytes < {small_below}) as small_files,
  (select coalesce(sum(file_size_in_bytes), 0) from {table}.data_files) as data_bytes,
  (select count(*) from {table}.delete_files) as delete_files,
  (select coalesce(sum(record_count), 0) from {table}.data_files) as records,
  (select count(*) from {table}.snapshots) as snapshots,
  (select (unix_timestamp(current_timestamp()) - unix_timestamp(min(committed_at))) / 3600.0
     from {table}.snapshots) as oldest_snapshot_age_hours,
  (select count(*) from {table}.manifests) as manifests,
  (select count(*) from {table}.partitions) as partitions
""".strip()


def target_file_size(spark: SparkSession, table: str) -> int:
    rows = spark.sql(f"show tblproperties {validate_table_name(table)}").collect()
    properties = {row["key"]: row["value"] for row in rows}
    return int(properties.get("write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE_BYTES))


def read_health(spark: SparkSession, table: str) -> TableHealth:
    row = spark.sql(health_sql(table, target_file_size(spark, table))).collect()[0]
    age = row["oldest_snapshot_age_hours"]
    return TableHealth(
        table=table,
        data_files=int(row["data_files"]),
        small_files=int(row["small_files"]),
        data_bytes=int(row["data_bytes"]),
        delete_files=int(row["delete_files"]),
        records=int(row["records"]),
        snapshots=int(row["snapshots"]),
        oldest_snapshot_age_hours=None if age is None else round(float(age), 2),
        manifests=int(row["manifests"]),
        partitions=int(row["partitions"]),
    )
