"""rewrite_data_files as a plan step (policy section `compaction`): its checks, its due rule
(small files per partition, or under a cold scope per cold partition; deletion vectors' share of
rows), its options (partial progress by table size) and its SQL. Macros:
macros/procedures/rewrite_data_files.sql."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dbt_iceberg_maint import guards
from dbt_iceberg_maint.policy import checks
from dbt_iceberg_maint.policy import sql as s
from dbt_iceberg_maint.policy.operation_types import ColdScope, Decision, PlanContext, Planned

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
# rewrite_data_files rewrites a data file whose deletion vectors delete at least this share of its rows,
# whatever min-input-files says (Iceberg 1.10's BinPackRewriteFilePlanner, option delete-ratio-threshold).
DELETE_RATIO_OPTION = "delete-ratio-threshold"
DEFAULT_DELETE_RATIO_THRESHOLD = 0.3
# How an option value given as text must read to be taken as the threshold (macros: the same pattern).
_DECIMAL = re.compile(r"[0-9]*\.?[0-9]+")


def _nothing_cold(section: Mapping[str, Any], scope: ColdScope | None) -> str:
    """`_iceberg_maint_nothing_cold`: an unpartitioned table has no partitions to speak of."""
    hours = section["cold_partitions_hours"]
    if scope is not None and not scope.partitioned:
        return (f"the table is unpartitioned and was written less than {hours} h ago (cold_partitions_hours), "
                "nothing cold to compact")
    return f"no partition has been quiet for {hours} h (cold_partitions_hours), nothing cold to compact"


def compaction_errors(section: Mapping[str, Any]) -> list[str]:
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


def compaction_due(section: Mapping[str, Any], health: Mapping[str, Any]) -> Decision:
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


def compaction_sql(table: s.TableRef, section: Mapping[str, Any], context: PlanContext) -> Planned:
    where = section["where"]
    if section["cold_partitions_hours"]:
        cold = context.cold_scope.where if context.cold_scope is not None else None
        if cold is None or not cold.strip():
            return Planned(None, _nothing_cold(section, context.cold_scope))
        where, errors = guards.cold_scoped_where(where, cold)
        s.raise_if_errors(errors)
    options = compaction_options(section, uses_partial_progress(section, context.table_bytes), context.force)
    return Planned(s.rewrite_data_files_sql(table, where, section["strategy"], section["sort_order"], options))
