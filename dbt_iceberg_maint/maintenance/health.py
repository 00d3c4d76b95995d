"""Table health read from Iceberg metadata tables (files, snapshots, manifests, partitions).

The package's `table_health` macro computes it (so dbt Cloud users get the same figures);
`health_via_dbt` runs that macro through `dbt run-operation` and reads its ICEBERG_MAINT_RESULT
lines.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.errors import IcebergMaintError
from dbt_iceberg_maint.maintenance.results import MaintenanceResult, parse_result_lines
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT, invoke_dbt


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
    data_manifests: int
    max_small_files_in_partition: int
    # Format v3 (defaults: a result line logged before these figures existed has none).
    deletion_vectors: int = 0
    max_partition_delete_ratio: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, Any]) -> TableHealth:
        """From the table_health macro's dict (extra keys such as the thresholds are ignored)."""
        names = {f.name for f in fields(cls)}
        missing = sorted({f.name for f in fields(cls) if f.default is MISSING} - metrics.keys())
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
