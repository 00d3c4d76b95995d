"""Each maintenance operation as a plan step: its policy section's defaults, its policy checks,
its due rule (with the reason texts) and its SQL from the policy. The Python side of the
"as a maintenance step" part of each macros/procedures/<operation>.sql
(`_iceberg_maint_<operation>_defaults`, `_policy_errors`, `_due`, `_planned_sql`).

Adding an operation: its procedure file with those four macros, its name in the protocol
(macros/internal/protocol.sql, protocol.py), and an `Operation` here;
tests/unit/test_policy_cases.py fails until all of them exist and agree.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dbt_iceberg_maint import guards
from dbt_iceberg_maint.policy import checks
from dbt_iceberg_maint.policy import sql as s

# Under partial progress every file group commits alone (several groups in one commit fail on a
# JDBC catalog, Iceberg 1.10), one group at a time (Iceberg commits on the rewrite threads, which
# would race): far more commits allowed than a cold-partition compaction has groups. What it costs:
# docs/benchmarks-effect.md (benchmarks/effect.py's bulk phase).
SERIAL_MAX_COMMITS = "10000"
# `partial_progress: auto` (the default) commits group by group only on a table at least this big
# (its current snapshot's total-files-size, an upper bound of what one compaction reads): a
# shorter rewrite runs Iceberg's parallel groups and commits once, which the effect bench measured
# faster; a long one keeps each finished group if a later one loses its commit.
PARTIAL_PROGRESS_ABOVE_MB = 10240
# Orphan removal lists the whole table location: at most every 12 h by default, so a post-hook pays
# it twice a day per table, and a daily job (whose runs are a little under or over 24 h apart) every run.
ORPHAN_INTERVAL_HOURS = 12
# rewrite_data_files rewrites a data file whose deletion vectors delete at least this share of its rows,
# whatever min-input-files says (Iceberg 1.10's BinPackRewriteFilePlanner, option delete-ratio-threshold).
DELETE_RATIO_OPTION = "delete-ratio-threshold"
DEFAULT_DELETE_RATIO_THRESHOLD = 0.3
# How an option value given as text must read to be taken as the threshold (macros: the same pattern).
_DECIMAL = re.compile(r"[0-9]*\.?[0-9]+")


@dataclass(frozen=True)
class Decision:
    due: bool
    reason: str


@dataclass(frozen=True)
class ColdScope:
    """What `_iceberg_maint_cold_scope` returns: the cold predicate (None: nothing is cold), the
    most small files one of those partitions holds and the greatest share of one's rows deletion
    vectors delete (None: not read, the table has no delete file)."""

    where: str | None
    max_small_files: int | None
    max_delete_ratio: float | None = None
    partitioned: bool = True  # False: the table is one partition, cold or not as a whole


@dataclass(frozen=True)
class PlanContext:
    """What a step's SQL depends on besides the policy: the wall clock (the orphan window's
    reference, always), the plan's as_of (expire_snapshots' reference when given), the cold scope
    and the table's location (the orphan scope guard)."""

    now: dt.datetime
    reference: dt.datetime | None = None
    cold_scope: ColdScope | None = None
    table_location: str | None = None
    force: bool = False  # the rewrites' min-input-files is 1: a forced rewrite rewrites what it finds
    table_bytes: int | None = None  # the current snapshot's total-files-size (partial_progress: auto)


@dataclass(frozen=True)
class Planned:
    sql: str | None
    reason: str | None = None


@dataclass(frozen=True)
class Operation:
    name: str
    section: str  # its key in meta.iceberg_maint
    defaults: Mapping[str, Any]
    policy_errors: Callable[[Mapping[str, Any]], list[str]]
    due: Callable[[Mapping[str, Any], Mapping[str, Any]], Decision]
    planned_sql: Callable[[s.TableRef, Mapping[str, Any], PlanContext], Planned]


# ---- rewrite_data_files (policy section `compaction`) ----

def _nothing_cold(section: Mapping[str, Any], scope: ColdScope | None) -> str:
    """`_iceberg_maint_nothing_cold`: an unpartitioned table has no partitions to speak of."""
    hours = section["cold_partitions_hours"]
    if scope is not None and not scope.partitioned:
        return (f"the table is unpartitioned and was written less than {hours} h ago (cold_partitions_hours), "
                "nothing cold to compact")
    return f"no partition has been quiet for {hours} h (cold_partitions_hours), nothing cold to compact"


def _compaction_errors(section: Mapping[str, Any]) -> list[str]:
    owner = "policy compaction"
    errors = (checks.positive_number(owner, "min_input_files", section["min_input_files"], integer=True)
              + checks.positive_number(owner, "target_file_size_mb", section["target_file_size_mb"])
              + checks.positive_number(owner, "cold_partitions_hours", section["cold_partitions_hours"]))
    failed = section["max_failed_commits"]
    if failed is not None and (not checks.is_integer(failed) or failed < 0):
        errors.append(f"{owner}: argument `max_failed_commits` is {failed}; expected a whole number >= 0")
    if section["partial_progress"] != "auto" and checks.boolean(owner, "partial_progress", section["partial_progress"]):
        errors.append(f"{owner}: argument `partial_progress` is {section['partial_progress']}; "
                      "expected true, false or auto")
    errors += checks.positive_number(owner, "partial_progress_above_mb", section["partial_progress_above_mb"])
    if isinstance(section["options"], Mapping) and DELETE_RATIO_OPTION in section["options"] \
            and delete_ratio_threshold(section) is None:
        errors.append(f"{owner}: option `{DELETE_RATIO_OPTION}` is {section['options'][DELETE_RATIO_OPTION]}; "
                      "expected a number greater than 0 and at most 1")
    return errors + checks.rewrite_data_files_errors(section["where"], section["strategy"], section["sort_order"],
                                                     section["options"])


def delete_ratio_threshold(section: Mapping[str, Any]) -> float | None:
    """`_iceberg_maint_delete_ratio_threshold`: the compaction's `options['delete-ratio-threshold']`
    when set, else Iceberg's default 0.3; None when the option is not a number in (0, 1]."""
    value = (section["options"] or {}).get(DELETE_RATIO_OPTION) if isinstance(section["options"], Mapping) else None
    if value is None:
        return DEFAULT_DELETE_RATIO_THRESHOLD
    if checks.is_number(value) or (isinstance(value, str) and _DECIMAL.fullmatch(value)):
        number = float(value)
        return number if 0 < number <= 1 else None
    return None


def too_few_data_files(section: Mapping[str, Any], data_files: int | None, delete_files: int | None = 0) -> str | None:
    """`_iceberg_maint_too_few_data_files`: the reason a compaction is not due when the current
    snapshot's summary counts fewer data files than min_input_files (then no partition can hold
    that many small files) and no delete file (deletion vectors make a file due whatever
    min_input_files says), decided before any file list or cold scope is read; none when unknown
    or not fewer."""
    threshold = section["min_input_files"]
    if data_files is None or data_files >= threshold or delete_files != 0:
        return None
    return f"the table has {data_files} data files, fewer than min_input_files {threshold}: nothing to compact"


def _compaction_due(section: Mapping[str, Any], health: Mapping[str, Any]) -> Decision:
    threshold = section["min_input_files"]
    scope = health.get("cold_scope")
    if isinstance(scope, ColdScope) and scope.where is None:
        return Decision(False, _nothing_cold(section, scope))
    largest = int((scope.max_small_files if isinstance(scope, ColdScope) else
                   health.get("max_small_files_in_partition")) or 0)
    partition = "cold partition" if isinstance(scope, ColdScope) else "partition"
    if largest >= threshold:
        return Decision(True, f"a {partition} has {largest} small files, >= min_input_files {threshold}")
    reason = f"no {partition} has >= {threshold} small files (largest: {largest})"
    # Under a cold scope only the cold partitions' ratio counts: the compaction touches nothing else.
    ratio = scope.max_delete_ratio if isinstance(scope, ColdScope) else health.get("max_partition_delete_ratio")
    limit = delete_ratio_threshold(section)
    if ratio is None or not ratio > 0 or limit is None:
        return Decision(False, reason)
    # Iceberg rewrites a file whose deletion vectors delete >= the threshold of its rows; a partition
    # at or above it holds such a file (a partition's share is a weighted mean of its files' shares).
    if ratio >= limit:
        return Decision(True, f"deletion vectors delete {round(ratio, 3)} of a {partition}'s rows, "
                              f">= delete-ratio-threshold {limit}")
    return Decision(False, f"{reason}; deletion vectors delete at most {round(ratio, 3)} of a {partition}'s rows, "
                           f"below delete-ratio-threshold {limit}")


def uses_partial_progress(section: Mapping[str, Any], table_bytes: int | None) -> bool:
    """`_iceberg_maint_uses_partial_progress`: `partial_progress` true or false as given; `auto` on
    a table of at least `partial_progress_above_mb` (null: any size) or of unknown size."""
    if section["partial_progress"] != "auto":
        return bool(section["partial_progress"])
    above = section["partial_progress_above_mb"]
    return table_bytes is None or above is None or table_bytes >= above * 1024 * 1024


def compaction_options(section: Mapping[str, Any], partial_progress: bool, force: bool = False) -> dict[str, Any]:
    """`_iceberg_maint_compaction_options`: explicit `options` win."""
    options: dict[str, Any] = {"min-input-files": "1" if force else str(section["min_input_files"])}
    if partial_progress:
        options["partial-progress.enabled"] = "true"
        if section["max_failed_commits"] is not None:
            options["partial-progress.max-failed-commits"] = str(section["max_failed_commits"])
        options["max-concurrent-file-group-rewrites"] = "1"
        options["partial-progress.max-commits"] = SERIAL_MAX_COMMITS
    if section["target_file_size_mb"]:
        options["target-file-size-bytes"] = str(int(section["target_file_size_mb"] * 1024 * 1024))
    options.update(section["options"] or {})
    return options


def _compaction_sql(table: s.TableRef, section: Mapping[str, Any], context: PlanContext) -> Planned:
    where = section["where"]
    if section["cold_partitions_hours"]:
        cold = context.cold_scope.where if context.cold_scope is not None else None
        if cold is None or not cold.strip():
            return Planned(None, _nothing_cold(section, context.cold_scope))
        where, errors = guards.cold_scoped_where(where, cold)
        s.raise_if_errors(errors)
    options = compaction_options(section, uses_partial_progress(section, context.table_bytes), context.force)
    return Planned(s.rewrite_data_files_sql(table, where, section["strategy"], section["sort_order"], options))


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
    """An absolute older_than wins over older_than_hours (which has a default)."""
    return checks.expire_snapshots_errors(
        section["older_than_hours"] if section["older_than"] is None else None, section["retain_last"],
        section["max_concurrent_deletes"], section["stream_results"], None, section["clean_expired_metadata"],
        section["older_than"])


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

# The table property recording the snapshot the statistics the plan last computed are for (the
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


def _table_stats_due(section: Mapping[str, Any], health: Mapping[str, Any]) -> Decision:
    return statistics_due(health, *STATISTICS["compute_table_stats"])


def _table_stats_sql(table: s.TableRef, section: Mapping[str, Any], context: PlanContext) -> Planned:
    return Planned(s.compute_table_stats_sql(table, None, section["columns"]))


def _partition_stats_due(section: Mapping[str, Any], health: Mapping[str, Any]) -> Decision:
    """Iceberg refuses an unpartitioned table ("Table must be partitioned")."""
    if health.get("partitioned") is False:
        return Decision(False, "the table is unpartitioned: Iceberg computes partition statistics only for a "
                               "partitioned table")
    return statistics_due(health, *STATISTICS["compute_partition_stats"])


def _partition_stats_sql(table: s.TableRef, section: Mapping[str, Any], context: PlanContext) -> Planned:
    return Planned(s.compute_partition_stats_sql(table))


OPERATIONS: Mapping[str, Operation] = {op.name: op for op in (
    Operation("rewrite_data_files", "compaction", {
        "enabled": True, "min_input_files": 5, "target_file_size_mb": None, "strategy": None, "sort_order": None,
        "partial_progress": "auto", "partial_progress_above_mb": PARTIAL_PROGRESS_ABOVE_MB, "max_failed_commits": 0,
        "cold_partitions_hours": None, "where": None, "options": {}, "interval_hours": None},
        _compaction_errors, _compaction_due, _compaction_sql),
    Operation("rewrite_position_delete_files", "rewrite_position_delete_files", {
        "enabled": True, "min_input_files": 5, "where": None, "options": {}, "interval_hours": None},
        _position_deletes_errors, _position_deletes_due, _position_deletes_sql),
    Operation("expire_snapshots", "expire_snapshots", {
        "enabled": True, "older_than_hours": 168, "older_than": None, "retain_last": 5, "clean_expired_metadata": None,
        "max_concurrent_deletes": None, "stream_results": None, "interval_hours": None},
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
              _table_stats_due, _table_stats_sql),
    Operation("compute_partition_stats", "compute_partition_stats", {"enabled": True, "interval_hours": None},
              lambda section: checks.compute_partition_stats_errors(None), _partition_stats_due, _partition_stats_sql),
)}
