"""Each maintenance operation as a plan step: its policy section's defaults, its policy checks,
its due rule (with the reason texts) and its SQL from the policy. The Python side of the
"as a maintenance step" part of each macros/procedures/<operation>.sql
(`_iceberg_maint_<operation>_defaults`, `_policy_errors`, `_due`, `_planned_sql`).

Adding an operation: its procedure file with those four macros, its name in the protocol
(macros/internal/protocol.sql, protocol.py), and an `Operation` (operation_types.py) in
`OPERATIONS` here; tests/unit/test_policy_cases.py fails until all of them exist and agree. A long
operation has a module of its own: compaction.py (rewrite_data_files), statistics.py
(compute_table_stats, compute_partition_stats).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from dbt_iceberg_maint.policy import checks
from dbt_iceberg_maint.policy import sql as s
from dbt_iceberg_maint.policy.compaction import (
    PARTIAL_PROGRESS_ABOVE_MB,
    compaction_due,
    compaction_errors,
    compaction_sql,
)
from dbt_iceberg_maint.policy.operation_types import Decision, Operation, PlanContext, Planned
from dbt_iceberg_maint.policy.statistics import (
    partition_stats_due,
    partition_stats_sql,
    table_stats_due,
    table_stats_sql,
)

# Orphan removal lists the whole table location: at most every 12 h by default, so a post-hook pays
# it twice a day per table, and a daily job (whose runs are a little under or over 24 h apart) every run.
ORPHAN_INTERVAL_HOURS = 12


# ---- rewrite_position_delete_files ----

def _position_deletes_errors(section: Mapping[str, Any]) -> list[str]:
    return (checks.positive_number("policy rewrite_position_delete_files", "min_input_files",
                                   section["min_input_files"], integer=True)
            + checks.rewrite_position_delete_files_errors(section["where"], section["options"]))


def _count_due(count: Any, threshold: Any, what: str) -> Decision:
    """Due at `threshold` or more of `what` (delete files, data manifests)."""
    if int(count or 0) >= threshold:
        return Decision(True, f"{int(count or 0)} {what}, >= threshold of {threshold}")
    return Decision(False, f"only {int(count or 0)} {what}, below threshold of {threshold}")


def _position_deletes_due(section: Mapping[str, Any], health: Mapping[str, Any]) -> Decision:
    """Deletion vectors (format v3, Puffin) are not rewritten by rewrite_position_delete_files
    (Iceberg 1.10 returns nothing once every delete is one): only the other delete files count."""
    threshold = section["min_input_files"]
    vectors = int(health.get("deletion_vectors") or 0)
    if vectors == 0:
        return _count_due(health.get("delete_files"), threshold, "delete files")
    count = int(health.get("delete_files") or 0) - vectors
    if count >= threshold:
        return Decision(True, f"{count} delete files besides {vectors} deletion vectors, >= threshold of {threshold}")
    if count <= 0:
        return Decision(False, f"only deletion vectors ({vectors}), which need no rewrite: rewrite_data_files "
                               "applies them")
    return Decision(False, f"only {count} delete files besides {vectors} deletion vectors (which need no rewrite), "
                           f"below threshold of {threshold}")


def _position_deletes_sql(table: s.TableRef, section: Mapping[str, Any], context: PlanContext) -> Planned:
    options = {"min-input-files": "1" if context.force else str(section["min_input_files"]),
               **(section["options"] or {})}
    return Planned(s.rewrite_position_delete_files_sql(table, section["where"], options))


# ---- expire_snapshots ----

def _expire_errors(section: Mapping[str, Any]) -> list[str]:
    """An absolute older_than wins over older_than_hours (which has a default); retain_metadata_files
    is the policy's own (the expiry's recorded checks set it: `_iceberg_maint_metadata_retention`)."""
    return checks.expire_snapshots_errors(
        section["older_than_hours"] if section["older_than"] is None else None, section["retain_last"],
        section["max_concurrent_deletes"], section["stream_results"], None, section["clean_expired_metadata"],
        section["older_than"]) + retain_metadata_files_errors(section["retain_metadata_files"])


# Iceberg reads write.metadata.previous-versions-max as a Java int.
MAX_RETAINED_METADATA_FILES = 2**31 - 1


def retain_metadata_files_errors(value: Any) -> list[str]:
    """`_iceberg_maint_retain_metadata_files_errors`: a larger value would fail the ALTER TABLE
    after the expiry had run."""
    errors = checks.positive_number("expire_snapshots", "retain_metadata_files", value, integer=True)
    if not errors and value is not None and value > MAX_RETAINED_METADATA_FILES:
        errors.append(f"expire_snapshots: argument `retain_metadata_files` is {value}; it must be at most "
                      f"{MAX_RETAINED_METADATA_FILES} (Iceberg reads write.metadata.previous-versions-max as an int)")
    return errors


def _expire_due(section: Mapping[str, Any], health: Mapping[str, Any]) -> Decision:
    keep = section["retain_last"]
    count = int(health.get("snapshots") or 0)
    age = health.get("oldest_snapshot_age_hours")
    if section["older_than"] is not None:
        hours = health.get("hours_since_older_than", 0)
        limit = f"older_than {section['older_than']}"
    else:
        hours = section["older_than_hours"]
        limit = f"{hours} h"
    no_age_limit = section["older_than"] is None and hours == 0
    planned = health.get("rewrites_planned")
    if count <= keep and no_age_limit and planned:
        return Decision(True, f"{count} snapshots plus those {' and '.join(planned)} commits first "
                              f"(older_than_hours 0: only the newest retain_last {keep} stay)")
    if count <= keep:
        return Decision(False, f"only {count} snapshots, not more than retain_last {keep}")
    if no_age_limit:
        return Decision(True, f"{count} snapshots (> retain_last {keep}), older_than_hours 0: no age limit")
    if age is None or age <= hours:
        return Decision(False, f"oldest snapshot is {age if age is not None else 0} h old, not older than {limit}")
    return Decision(True, f"{count} snapshots (> retain_last {keep}), oldest {age} h old (> {limit})")


def _expire_sql(table: s.TableRef, section: Mapping[str, Any], context: PlanContext) -> Planned:
    """The cut-off is fixed in the plan: older_than_hours before its as_of, else before now."""
    hours: Any = section["older_than_hours"]
    older_than = section["older_than"]
    if older_than is not None:
        hours = None
    elif context.reference is not None and hours:
        older_than = (context.reference - dt.timedelta(hours=hours)).strftime("%Y-%m-%d %H:%M:%S")
        hours = None
    return Planned(s.expire_snapshots_sql(table, context.now, hours, section["retain_last"],
                                          section["max_concurrent_deletes"], section["stream_results"],
                                          section["clean_expired_metadata"], older_than))


# ---- remove_orphan_files ----

# The reason an orphan sweep is not due on a young table begins so; such a skip records no check
# (`_iceberg_maint_record_checks`), so the next run asks the table's age again.
YOUNG_TABLE = "the table is only "

def _orphan_errors(section: Mapping[str, Any]) -> list[str]:
    return checks.remove_orphan_files_errors(
        section["older_than_hours"], False, section["location"], section["max_concurrent_deletes"], None,
        section["equal_schemes"], section["equal_authorities"], section["prefix_mismatch_mode"],
        section["prefix_listing"])


def _orphan_due(section: Mapping[str, Any], health: Mapping[str, Any]) -> Decision:
    """Orphans cannot be counted without listing the location, which is the operation itself; but
    a table younger than the window cannot hold a file old enough to remove in its own location
    (`table_age_hours`, read for a table never swept; a policy `location` is always swept)."""
    age, window = health.get("table_age_hours"), section["older_than_hours"]
    if age is not None and age < window and section["location"] is None:
        return Decision(False, f"{YOUNG_TABLE}{age} h old, younger than older_than_hours {window}: "
                               "none of its files can be old enough to remove")
    return Decision(True, f"always due: deletes only unreferenced files older than {section['older_than_hours']} h")


def _orphan_sql(table: s.TableRef, section: Mapping[str, Any], context: PlanContext) -> Planned:
    return Planned(s.remove_orphan_files_sql(
        table, context.now, context.table_location, section["older_than_hours"], section["location"],
        section["max_concurrent_deletes"], section["equal_schemes"], section["equal_authorities"],
        section["prefix_mismatch_mode"], section["prefix_listing"]))


# ---- rewrite_manifests ----

def _manifests_errors(section: Mapping[str, Any]) -> list[str]:
    return (checks.positive_number("policy rewrite_manifests", "min_manifests", section["min_manifests"], integer=True)
            + checks.rewrite_manifests_errors(section["use_caching"]))


def _manifests_due(section: Mapping[str, Any], health: Mapping[str, Any]) -> Decision:
    return _count_due(health.get("data_manifests"), section["min_manifests"], "data manifests")


def _manifests_sql(table: s.TableRef, section: Mapping[str, Any], context: PlanContext) -> Planned:
    return Planned(s.rewrite_manifests_sql(table, section["use_caching"]))


# ---- compute_table_stats, compute_partition_stats ----


OPERATIONS: Mapping[str, Operation] = {op.name: op for op in (
    Operation("rewrite_data_files", "compaction", {
        "enabled": True, "min_input_files": 5, "target_file_size_mb": None, "strategy": None, "sort_order": None,
        "partial_progress": "auto", "partial_progress_above_mb": PARTIAL_PROGRESS_ABOVE_MB, "max_failed_commits": 0,
        "cold_partitions_hours": None, "where": None, "options": {}, "interval_hours": None},
        compaction_errors, compaction_due, compaction_sql),
    Operation("rewrite_position_delete_files", "rewrite_position_delete_files", {
        "enabled": True, "min_input_files": 5, "where": None, "options": {}, "interval_hours": None},
        _position_deletes_errors, _position_deletes_due, _position_deletes_sql),
    Operation("expire_snapshots", "expire_snapshots", {
        "enabled": True, "older_than_hours": 168, "older_than": None, "retain_last": 5, "clean_expired_metadata": None,
        "max_concurrent_deletes": None, "stream_results": None, "retain_metadata_files": None, "interval_hours": None},
        _expire_errors, _expire_due, _expire_sql),
    Operation("remove_orphan_files", "remove_orphan_files", {
        "enabled": True, "older_than_hours": 72, "location": None, "max_concurrent_deletes": None,
        "equal_schemes": None, "equal_authorities": None, "prefix_mismatch_mode": None, "prefix_listing": None,
        "interval_hours": ORPHAN_INTERVAL_HOURS}, _orphan_errors, _orphan_due, _orphan_sql),
    Operation("rewrite_manifests", "rewrite_manifests", {"enabled": True, "min_manifests": 5, "use_caching": None,
                                                   "interval_hours": None},
              _manifests_errors, _manifests_due, _manifests_sql),
    # Not default operations. Table statistics read every row: at most once a day by default;
    # partition statistics read only manifests: no interval.
    Operation("compute_table_stats", "compute_table_stats", {"enabled": True, "columns": None, "interval_hours": 24},
              lambda section: checks.compute_table_stats_errors(None, section["columns"]),
              table_stats_due, table_stats_sql),
    Operation("compute_partition_stats", "compute_partition_stats", {"enabled": True, "interval_hours": None},
              lambda section: checks.compute_partition_stats_errors(None), partition_stats_due, partition_stats_sql),
)}
