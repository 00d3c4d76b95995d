"""The documented path of the result-line reader (docs/macros.md); it lives in maintenance/results.py."""

from __future__ import annotations

from dbt_iceberg_maint.maintenance.results import MaintenanceResult, parse_result_lines

__all__ = ["MaintenanceResult", "parse_result_lines"]
