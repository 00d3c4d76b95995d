"""Pure maintenance decisions, mirroring the macros line by line (no I/O).

The macros are the reference: `_iceberg_maint_policy_defaults` / `_iceberg_maint_resolved_policy`
(macros/internal/policy.sql), `_iceberg_maint_due` and `_iceberg_maint_planned_sql`
(macros/internal/decisions.sql, dispatching to each operation's own rules in macros/procedures/),
`spark__get_maintenance_plan` (macros/operations/get_maintenance_plan.sql), the `get_*_sql`
procedure macros (macros/procedures/) and `get_partition_range_sql` (macros/health/). Reason texts
are copied verbatim so that `dbt-iceberg-maint plan` and `maintain(dry_run=true)` print the same
decisions.

Over 300 lines because it mirrors every operation's policy defaults, checks, due rule and SQL in
one place: splitting it would separate each rule from the others the equality test holds together.
"""

from __future__ import annotations

import copy
import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbt_iceberg_maint import guards
from dbt_iceberg_maint.errors import IcebergMaintError

OPERATION_ORDER = (
    "rewrite_data_files",
    "rewrite_position_delete_files",
    "expire_snapshots",
    "remove_orphan_files",
    "rewrite_manifests",
)
DEFAULT_OPERATIONS = ("rewrite_data_files", "expire_snapshots", "remove_orphan_files", "rewrite_manifests")
DEFAULT_TARGET_FILE_SIZE_BYTES = 536870912
# Under partial progress every file group commits alone (several groups in one commit fail on a
# JDBC catalog, Iceberg 1.10): far more commits allowed than a cold-partition compaction has groups.
SERIAL_MAX_COMMITS = "10000"
# Keys of meta.iceberg_maint owned by other parts of the package (accepted, not used here).
OTHER_POLICY_KEYS = ("idempotent", "isolation_level", "commit_retry", "properties")


class PolicyError(IcebergMaintError):
    """A meta.iceberg_maint policy the macros would refuse."""


def policy_defaults() -> dict[str, Any]:
    """macros/internal/policy.sql `_iceberg_maint_policy_defaults`, plus the cost gate (off)."""
    return {
        "enabled": True,
        "compaction": {
            "enabled": True, "min_input_files": 5, "target_file_size_mb": None,
            "strategy": None, "sort_order": None, "partial_progress": True,
            "max_failed_commits": 0, "cold_partitions_hours": None, "where": None, "options": {},
        },
        "rewrite_position_delete_files": {"enabled": True, "min_input_files": 5, "where": None, "options": {}},
        "expire_snapshots": {
            "enabled": True, "older_than_hours": 168, "retain_last": 5,
            "clean_expired_metadata": None, "max_concurrent_deletes": None, "stream_results": None,
        },
        "remove_orphan_files": {
            "enabled": True, "older_than_hours": 72, "location": None, "max_concurrent_deletes": None,
            "equal_schemes": None, "equal_authorities": None, "prefix_mismatch_mode": None, "prefix_listing": None,
        },
        "rewrite_manifests": {"enabled": True, "min_manifests": 5, "use_caching": None},
        "cost_gate": {
            "enabled": True, "skip_unchanged": False, "min_new_records": None, "min_new_bytes": None,
            "min_interval_hours": None,
        },
    }


def policy_shape_errors(raw: Any, source: str = "meta.iceberg_maint") -> list[str]:
    """`_iceberg_maint_policy_shape_errors`: unknown sections/keys, wrong section types."""
    if raw is None or isinstance(raw, bool):
        return []
    if not isinstance(raw, Mapping):
        return [f"{source} is {raw}; expected a mapping, or true/false to switch maintenance on/off"]
    defaults = policy_defaults()
    allowed = [*defaults, *OTHER_POLICY_KEYS]
    errors: list[str] = []
    for key, value in raw.items():
        if key not in allowed:
            errors.append(f"{source} has unknown key `{key}`; allowed keys: {', '.join(allowed)}")
        elif key == "enabled":
            if value is not None and not isinstance(value, bool):
                errors.append(f"{source}: argument `enabled` is {value}; expected true or false")
        elif key in defaults and isinstance(defaults[key], dict) and value is not None:
            if not isinstance(value, (Mapping, bool)):
                errors.append(f"{source}.{key} is {value}; expected a mapping of settings or true/false")
            elif isinstance(value, Mapping):
                for name in value:
                    if name not in defaults[key]:
                        errors.append(f"{source}.{key} has unknown key `{name}`; allowed keys: "
                                      f"{', '.join(defaults[key])}")
    return errors


def cost_gate_errors(section: Mapping[str, Any]) -> list[str]:
    """Validation of the cost_gate section (numbers >= 0, booleans)."""
    errors: list[str] = []
    for key in ("enabled", "skip_unchanged"):
        if not isinstance(section.get(key), bool):
            errors.append(f"policy cost_gate: argument `{key}` is {section.get(key)}; expected true or false")
    for key in ("min_new_records", "min_new_bytes", "min_interval_hours"):
        value = section.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
            errors.append(f"policy cost_gate: argument `{key}` is {value}; expected a number >= 0 or none")
    return errors


def resolved_policy(raw: Any, overrides: Any = None) -> dict[str, Any]:
    """`_iceberg_maint_resolved_policy`: defaults < model policy < overrides."""
    layers: list[Mapping[str, Any]] = []
    for layer in (raw, overrides):
        if isinstance(layer, bool):
            layers.append({"enabled": layer})
        elif isinstance(layer, Mapping):
            layers.append(layer)
    resolved: dict[str, Any] = {}
    for key, default in policy_defaults().items():
        if isinstance(default, dict):
            section = copy.deepcopy(default)
            for layer in layers:
                given = layer.get(key)
                if isinstance(given, Mapping):
                    section.update(given)
                elif isinstance(given, bool):
                    section["enabled"] = given
            resolved[key] = section
        else:
            chosen = default
            for layer in layers:
                if layer.get(key) is not None:
                    chosen = layer[key]
            resolved[key] = chosen
    return resolved


def policy_errors(policy: Mapping[str, Any]) -> list[str]:
    """The guards `_iceberg_maint_policy_errors` applies to what reaches SQL: each `where`, the
    orphan window's 24 h floor (the location needs the table: planned_sql checks it)."""
    errors = guards.where_errors("rewrite_data_files", "where", policy["compaction"]["where"])
    errors += guards.where_errors("rewrite_position_delete_files", "where",
                                  policy["rewrite_position_delete_files"]["where"])
    errors += guards.hours_bound_errors("expire_snapshots", policy["expire_snapshots"]["older_than_hours"])
    return errors + guards.orphan_window_errors(policy["remove_orphan_files"]["older_than_hours"])


def policy_section(operation: str) -> str:
    return "compaction" if operation == "rewrite_data_files" else operation


def requested_operations(operations: str | Sequence[str] | None = None) -> list[str]:
    if operations is None:
        return list(DEFAULT_OPERATIONS)
    requested = [operations] if isinstance(operations, str) else list(operations)
    names = []
    for name in requested:
        canonical = "rewrite_data_files" if name == "compaction" else name
        if canonical not in OPERATION_ORDER:
            raise PolicyError(f"argument `operations` contains '{name}'; allowed: compaction, "
                              f"{', '.join(OPERATION_ORDER)}")
        names.append(canonical)
    return [op for op in OPERATION_ORDER if op in names]


def _num(value: Any) -> str:
    """Jinja's `~` on a number is Python's str()."""
    return str(value)


@dataclass(frozen=True)
class ColdScope:
    """What `_iceberg_maint_cold_scope` returns: the cold predicate and its small-file maximum."""

    where: str | None
    max_small_files: int | None


@dataclass(frozen=True)
class Decision:
    due: bool
    reason: str


def due(operation: str, policy: Mapping[str, Any], health: Mapping[str, Any],
        cold_scope: ColdScope | None = None) -> Decision:
    """`_iceberg_maint_due`, with the macro's reason texts."""
    if operation == "rewrite_data_files":
        threshold = policy["compaction"]["min_input_files"]
        if cold_scope is not None and cold_scope.where is None:
            return Decision(False, f"no partition has been quiet for "
                                   f"{_num(policy['compaction']['cold_partitions_hours'])} h "
                                   "(cold_partitions_hours), nothing cold to compact")
        largest = int((cold_scope.max_small_files or 0) if cold_scope is not None
                      else health["max_small_files_in_partition"])
        partition = "cold partition" if cold_scope is not None else "partition"
        if largest >= threshold:
            return Decision(True, f"a {partition} has {largest} small files, >= min_input_files {threshold}")
        return Decision(False, f"no {partition} has >= {threshold} small files (largest: {largest})")
    if operation == "rewrite_position_delete_files":
        threshold = policy["rewrite_position_delete_files"]["min_input_files"]
        count = int(health["delete_files"])
        if count >= threshold:
            return Decision(True, f"{count} delete files, >= threshold of {threshold}")
        return Decision(False, f"only {count} delete files, below threshold of {threshold}")
    if operation == "expire_snapshots":
        keep = policy["expire_snapshots"]["retain_last"]
        hours = policy["expire_snapshots"]["older_than_hours"]
        count = int(health["snapshots"])
        age = health["oldest_snapshot_age_hours"]
        if count <= keep:
            return Decision(False, f"only {count} snapshots, not more than retain_last {keep}")
        if age is None or age <= hours:
            return Decision(False, f"oldest snapshot is {_num(age if age is not None else 0)} h old, "
                                   f"not older than {_num(hours)} h")
        return Decision(True, f"{count} snapshots (> retain_last {keep}), oldest {_num(age)} h old (> {_num(hours)} h)")
    if operation == "remove_orphan_files":
        hours = policy["remove_orphan_files"]["older_than_hours"]
        return Decision(True, f"always due: deletes only unreferenced files older than {_num(hours)} h")
    if operation == "rewrite_manifests":
        threshold = policy["rewrite_manifests"]["min_manifests"]
        count = int(health["data_manifests"])
        if count >= threshold:
            return Decision(True, f"{count} data manifests, >= threshold of {threshold}")
        return Decision(False, f"only {count} data manifests, below threshold of {threshold}")
    raise PolicyError(f"unknown operation '{operation}'")


# ---- SQL literals and CALL text (macros/internal/sql_literals.sql) ----

def string_literal(value: Any) -> str:
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def boolean_literal(value: Any) -> str:
    return "true" if value else "false"


def map_literal(mapping: Mapping[str, Any]) -> str:
    items = []
    for key in sorted(mapping):
        value = mapping[key]
        text = ("true" if value else "false") if isinstance(value, bool) else value
        items.append(f"{string_literal(key)}, {string_literal(text)}")
    return "map(" + ", ".join(items) + ")"


def timestamp_hours_ago(hours: float, now: dt.datetime) -> str:
    instant = now - dt.timedelta(hours=hours)
    return "TIMESTAMP '" + instant.strftime("%Y-%m-%d %H:%M:%S") + "Z'"


def call_sql(catalog: str | None, procedure: str, arguments: Sequence[tuple[str, str]]) -> str:
    namespace = f"{catalog}.system" if catalog else "system"
    rendered = ", ".join(f"{name} => {literal}" for name, literal in arguments)
    return f"CALL {namespace}.{procedure}({rendered})"


def compaction_options(section: Mapping[str, Any], serial_group_commits: bool = False) -> dict[str, Any]:
    options: dict[str, Any] = {"min-input-files": str(section["min_input_files"])}
    if section["partial_progress"]:
        options["partial-progress.enabled"] = "true"
        if section["max_failed_commits"] is not None:
            options["partial-progress.max-failed-commits"] = str(section["max_failed_commits"])
        if serial_group_commits:  # see _iceberg_maint_compaction_options
            options["max-concurrent-file-group-rewrites"] = "1"
            options["partial-progress.max-commits"] = SERIAL_MAX_COMMITS
    if section["target_file_size_mb"]:
        options["target-file-size-bytes"] = str(int(section["target_file_size_mb"] * 1024 * 1024))
    options.update(section.get("options") or {})
    return options


@dataclass(frozen=True)
class TableRef:
    """`schema.table` as the procedures take it, and the catalog of `<catalog>.system` (or none)."""

    schema: str
    identifier: str
    catalog: str | None = None

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.identifier}"

    def errors(self) -> list[str]:
        """The identifier guard on every part (`_iceberg_maint_relation_parts`)."""
        parts = [("schema", self.schema), ("identifier", self.identifier)]
        if self.catalog is not None:
            parts.insert(0, ("catalog", self.catalog))
        return [e for label, value in parts for e in guards.identifier_errors(f"table `{label}`", value)]

    @property
    def qualified(self) -> str:
        return f"{self.catalog}.{self.name}" if self.catalog else self.name


def planned_sql(table: TableRef, operation: str, policy: Mapping[str, Any], now: dt.datetime,
                cold_where: str | None = None, table_location: str | None = None) -> tuple[str | None, str | None]:
    """`_iceberg_maint_planned_sql`: (CALL text, None) or (None, why nothing runs). Raises
    PolicyError when a guard refuses what would reach the SQL (`table_location`: the table's
    location, which a remove_orphan_files `location` must lie inside)."""
    refused = table.errors() + policy_errors(policy)
    if operation == "remove_orphan_files":
        refused += guards.orphan_location_errors(table_location, policy["remove_orphan_files"]["location"])
    if refused:
        raise PolicyError("dbt_iceberg_maint: invalid arguments: " + "; ".join(refused))
    lit = string_literal
    args: list[tuple[str, str]] = [("table", lit(table.name))]
    if operation == "rewrite_data_files":
        section = policy["compaction"]
        where = section["where"]
        if section["cold_partitions_hours"]:
            if cold_where is None or not cold_where.strip():
                return None, (f"no partition has been quiet for {_num(section['cold_partitions_hours'])} h "
                              "(cold_partitions_hours), nothing cold to compact")
            where, _ = guards.cold_scoped_where(where, cold_where)  # `where` was guarded above
        # Iceberg 1.10's partial-progress group commits fail against each other on every catalog
        # (Hadoop and JDBC measured): groups are rewritten one at a time and commit one by one.
        options = compaction_options(section, bool(section["partial_progress"]))
        strategy = section["strategy"] if section["strategy"] is not None else (
            "sort" if section["sort_order"] is not None else None)
        if strategy is not None:
            args.append(("strategy", lit(strategy.lower())))
        if section["sort_order"] is not None:
            args.append(("sort_order", lit(section["sort_order"].strip())))
        if options:
            args.append(("options", map_literal(options)))
        if where is not None:
            args.append(("where", lit(where.strip())))
        return call_sql(table.catalog, "rewrite_data_files", args), None
    if operation == "rewrite_position_delete_files":
        section = policy["rewrite_position_delete_files"]
        options = {"min-input-files": str(section["min_input_files"]), **(section["options"] or {})}
        if options:
            args.append(("options", map_literal(options)))
        if section["where"] is not None:
            args.append(("where", lit(section["where"].strip())))
        return call_sql(table.catalog, "rewrite_position_delete_files", args), None
    if operation == "expire_snapshots":
        section = policy["expire_snapshots"]
        if section["older_than_hours"] is not None:
            args.append(("older_than", timestamp_hours_ago(section["older_than_hours"], now)))
        if section["retain_last"] is not None:
            args.append(("retain_last", str(section["retain_last"])))
        if section["max_concurrent_deletes"] is not None:
            args.append(("max_concurrent_deletes", str(section["max_concurrent_deletes"])))
        if section["stream_results"] is not None:
            args.append(("stream_results", boolean_literal(section["stream_results"])))
        if section["clean_expired_metadata"] is not None:
            args.append(("clean_expired_metadata", boolean_literal(section["clean_expired_metadata"])))
        return call_sql(table.catalog, "expire_snapshots", args), None
    if operation == "remove_orphan_files":
        section = policy["remove_orphan_files"]
        hours = section["older_than_hours"] if section["older_than_hours"] is not None else 72
        args.append(("older_than", timestamp_hours_ago(hours, now)))
        if section["location"] is not None:
            args.append(("location", lit(section["location"])))
        if section["max_concurrent_deletes"] is not None:
            args.append(("max_concurrent_deletes", str(section["max_concurrent_deletes"])))
        if section["equal_schemes"]:
            args.append(("equal_schemes", map_literal(section["equal_schemes"])))
        if section["equal_authorities"]:
            args.append(("equal_authorities", map_literal(section["equal_authorities"])))
        if section["prefix_mismatch_mode"] is not None:
            args.append(("prefix_mismatch_mode", lit(section["prefix_mismatch_mode"].upper())))
        if section["prefix_listing"] is not None:
            args.append(("prefix_listing", boolean_literal(section["prefix_listing"])))
        return call_sql(table.catalog, "remove_orphan_files", args), None
    section = policy["rewrite_manifests"]
    if section["use_caching"] is not None:
        args.append(("use_caching", boolean_literal(section["use_caching"])))
    return call_sql(table.catalog, "rewrite_manifests", args), None


# ---- cold partitions (macros/health/get_partition_range_sql.sql) ----

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def partition_range_sql(transform: str, column: str | None, column_type: str | None, value: Any) -> str | None:
    """`get_partition_range_sql`: a predicate selecting one partition value, or None."""
    if column is None or column_type is None:
        return None
    col = column if guards.IDENTIFIER.fullmatch(column) else "`" + column.replace("`", "``") + "`"
    kind_type = column_type.lower()
    if transform not in ("identity", "years", "months", "days", "hours", "year", "month", "day", "hour"):
        return None
    if value is None:
        return f"{col} is null"
    if transform == "identity":
        return _identity_sql(col, kind_type, value)
    kind = transform.rstrip("s")
    if kind == "day":
        if not isinstance(value, str) or not _DAY.fullmatch(value):
            return None
        lo = dt.datetime.strptime(value, "%Y-%m-%d")
        hi = lo + dt.timedelta(days=1)
    elif isinstance(value, bool) or not isinstance(value, int):
        return None
    elif kind == "hour":
        lo = dt.datetime(1970, 1, 1) + dt.timedelta(hours=value)
        hi = lo + dt.timedelta(hours=1)
    elif kind == "month":
        lo = dt.datetime(1970 + value // 12, value % 12 + 1, 1)
        hi = dt.datetime(1970 + (value + 1) // 12, (value + 1) % 12 + 1, 1)
    else:
        lo = dt.datetime(1970 + value, 1, 1)
        hi = dt.datetime(1971 + value, 1, 1)
    if kind_type == "date" and kind != "hour":
        fmt, prefix, suffix = "%Y-%m-%d", "date", ""
    elif kind_type == "timestamp":
        fmt, prefix, suffix = "%Y-%m-%d %H:%M:%S", "timestamp", "+00:00"
    elif kind_type == "timestamp_ntz":
        fmt, prefix, suffix = "%Y-%m-%d %H:%M:%S", "timestamp_ntz", ""
    else:
        return None
    return (f"({col} >= {prefix} '{lo.strftime(fmt)}{suffix}' and "
            f"{col} < {prefix} '{hi.strftime(fmt)}{suffix}')")


def _identity_sql(col: str, kind_type: str, value: Any) -> str | None:
    if kind_type == "string" or kind_type.startswith(("varchar", "char")):
        if not isinstance(value, str) or any(marker in value for marker in guards.FRAGMENT_MARKERS):
            return None
        return f"{col} = '" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if kind_type == "boolean":
        return f"{col} = {'true' if value else 'false'}" if isinstance(value, bool) else None
    if kind_type in ("tinyint", "smallint", "int", "integer", "bigint"):
        return f"{col} = {value}" if isinstance(value, int) and not isinstance(value, bool) else None
    if kind_type == "date":
        return f"{col} = date '{value}'" if isinstance(value, str) and _DAY.fullmatch(value) else None
    return None


@dataclass(frozen=True)
class PartitionField:
    transform: str
    column: str | None


@dataclass(frozen=True)
class PartitionState:
    """One row of the `partitions` metadata table, as cold scoping uses it."""

    values: tuple[Any, ...]  # in the current spec's field order, JSON-like (days as 'YYYY-MM-DD')
    current_spec: bool
    last_updated_ms: int | None
    small_files: int


def partitions_where_sql(fields: Sequence[PartitionField], columns: Mapping[str, str],
                         partitions: Sequence[tuple[Any, ...]]) -> str | None:
    """`get_partitions_where_sql`: OR of one conjunction per expressible partition.

    The macro keeps the partitions table's row order; here terms are sorted so the text is
    stable (the predicate is the same set of terms)."""
    terms: list[str] = []
    for values in partitions:
        if len(values) != len(fields):
            continue
        parts = []
        for field, value in zip(fields, values, strict=True):
            part = partition_range_sql(field.transform, field.column,
                                       columns.get(field.column) if field.column else None, value)
            if part is not None:
                parts.append(part)
        if len(parts) == len(fields):
            term = " and ".join(parts)
            terms.append(f"({term})" if len(parts) > 1 else term)
    unique = sorted(set(terms))
    return " or ".join(unique) if unique else None


def cold_scope(fields: Sequence[PartitionField], columns: Mapping[str, str], partitions: Sequence[PartitionState],
               quiet_hours: float, now_ms: int, oldest_snapshot_ms: int | None, total_small_files: int) -> ColdScope:
    """`_iceberg_maint_cold_scope` with a small-file threshold, from partition metadata."""
    limit_ms = now_ms - int(quiet_hours * 3600000)

    def is_cold(p: PartitionState) -> bool:
        updated = p.last_updated_ms if p.last_updated_ms is not None else oldest_snapshot_ms
        return updated is not None and updated < limit_ms

    if not fields:
        cold = len(partitions) > 0 and all(is_cold(p) for p in partitions)
        return ColdScope("true" if cold else None, total_small_files if cold else 0)
    chosen: list[tuple[Any, ...]] = []
    largest = 0
    for p in partitions:
        if not is_cold(p) or not p.current_spec:
            continue
        if partitions_where_sql(fields, columns, [p.values]) is not None:
            chosen.append(p.values)
            largest = max(largest, p.small_files)
    return ColdScope(partitions_where_sql(fields, columns, chosen), largest)
