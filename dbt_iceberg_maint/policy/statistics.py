"""compute_table_stats and compute_partition_stats as plan steps: due when the current snapshot
has no statistics of their kind (or a rewrite planned first commits a new one). Macros:
macros/procedures/compute_table_stats.sql, compute_partition_stats.sql."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dbt_iceberg_maint.policy import sql as s
from dbt_iceberg_maint.policy.operation_types import Decision, PlanContext, Planned

# macros' only way to know it without reading the metadata file; the Python planner reads the
# metadata's statistics files). Macros: _iceberg_maint_statistics_snapshot_property.
STATISTICS_SNAPSHOT_PREFIX = "dbt-iceberg-maint.statistics-snapshot."
# The key of the due rule's health figure per operation, and what its statistics are called.
STATISTICS = {"compute_table_stats": ("statistics_snapshot_id", "table statistics"),
              "compute_partition_stats": ("partition_statistics_snapshot_id", "partition statistics")}


def statistics_due(health: Mapping[str, Any], key: str, what: str) -> Decision:
    """`_iceberg_maint_statistics_due`: due when a rewrite planned before it in this plan commits a
    new snapshot, or the current snapshot (`snapshot_id`) is not the one the newest known
    statistics are for (`health[key]`); a table without snapshots has nothing to compute."""
    planned = health.get("rewrites_planned") or []
    current = health.get("snapshot_id")
    recorded = health.get(key)
    if planned:
        return Decision(True, f"the {' and '.join(planned)} commits planned first leave the table without {what} "
                              "for its new snapshot")
    if current is None:
        return Decision(False, f"the table has no snapshot: no {what} to compute")
    if recorded is not None and str(recorded) == str(current):
        return Decision(False, f"{what} exist for the current snapshot {current}")
    last = f" (the last computed are for snapshot {recorded})" if recorded is not None else ""
    return Decision(True, f"no {what} for the current snapshot {current}{last}")


def table_stats_due(section: Mapping[str, Any], health: Mapping[str, Any]) -> Decision:
    return statistics_due(health, *STATISTICS["compute_table_stats"])


def table_stats_sql(table: s.TableRef, section: Mapping[str, Any], context: PlanContext) -> Planned:
    return Planned(s.compute_table_stats_sql(table, None, section["columns"]))


def partition_stats_due(section: Mapping[str, Any], health: Mapping[str, Any]) -> Decision:
    """Iceberg refuses an unpartitioned table ("Table must be partitioned")."""
    if health.get("partitioned") is False:
        return Decision(False, "the table is unpartitioned: Iceberg computes partition statistics only for a "
                               "partitioned table")
    return statistics_due(health, *STATISTICS["compute_partition_stats"])


def partition_stats_sql(table: s.TableRef, section: Mapping[str, Any], context: PlanContext) -> Planned:
    return Planned(s.compute_partition_stats_sql(table))
