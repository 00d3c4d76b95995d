"""The fleet engine: a whole lake's maintenance planned from metadata and run in parallel across
tables within a time budget (docs/python-cli.md, "The fleet engine")."""

from __future__ import annotations

from dbt_iceberg_maint.fleet.executor import run_fleet
from dbt_iceberg_maint.fleet.scheduler import FleetReport, StepOutcome, parse_duration

__all__ = ["FleetReport", "StepOutcome", "parse_duration", "run_fleet"]
