"""The macro path's Python shell: `dbt-iceberg-maint maintain` and `leases` around dbt's run-operations.

- `run`: `run_maintenance`, the iceberg_maintenance run-operation carried past run-time failures
  (replays the logged plan); `maintenance_table`, its results as a table.
- `results` (pure): `ICEBERG_MAINT_RESULT` lines → `MaintenanceResult` records.
- `rewrite_probe` (pure): a compaction's failed rewrite vs its lost commit: the one re-run's
  arguments and verdict.
- `leases`: the list_leases / break_lease run-operations and their ICEBERG_MAINT_LEASES line.
- `health`: the `table_health` macro from Python (the demo).
"""

from __future__ import annotations

from dbt_iceberg_maint.maintenance.results import MaintenanceResult
from dbt_iceberg_maint.maintenance.run import MaintenanceReport, run_maintenance

__all__ = ["MaintenanceReport", "MaintenanceResult", "run_maintenance"]
