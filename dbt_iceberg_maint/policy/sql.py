"""CALL text, the Python side of macros/internal/sql_literals.sql and of each procedure's
`get_<procedure>_sql` macro (macros/procedures/): same arguments, same order, same literals.
Each raises PolicyError ("dbt_iceberg_maint: invalid arguments: ...") where the macro raises.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbt_iceberg_maint import guards
from dbt_iceberg_maint.errors import PolicyError
from dbt_iceberg_maint.policy import checks

NO_AGE_LIMIT = "TIMESTAMP '9999-12-31 23:59:59Z'"  # expire_snapshots older_than_hours 0


def string_literal(value: Any) -> str:
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def boolean_literal(value: Any) -> str:
    return "true" if value else "false"


def map_literal(mapping: Mapping[str, Any]) -> str:
    """map('k1', 'v1', ...), keys sorted so the SQL is stable."""
    items = []
    for key in sorted(mapping):
        value = mapping[key]
        text = ("true" if value else "false") if isinstance(value, bool) else value
        items.append(f"{string_literal(key)}, {string_literal(text)}")
    return "map(" + ", ".join(items) + ")"


def timestamp_literal(instant: dt.datetime) -> str:
    text = instant.strftime("%Y-%m-%d %H:%M:%S") + (instant.strftime(".%f") if instant.microsecond else "")
    return f"TIMESTAMP '{text}Z'"


def timestamp_hours_ago(hours: float, now: dt.datetime) -> str:
    return timestamp_literal((now - dt.timedelta(hours=hours)).replace(microsecond=0))


def raise_if_errors(errors: Sequence[str]) -> None:
    if errors:
        raise PolicyError("dbt_iceberg_maint: invalid arguments: " + "; ".join(errors))


@dataclass(frozen=True)
class TableRef:
    """`schema.table` as the procedures take it, and the catalog of `<catalog>.system` (or none)."""

    schema: str
    identifier: str
    catalog: str | None = None

    @classmethod
    def parse(cls, name: str, catalog: str | None = None) -> TableRef:
        """'schema.table' (with `catalog`, the var's value) or 'catalog.schema.table'."""
        parts = name.split(".")
        if len(parts) == 3:
            return cls(parts[1], parts[2], parts[0])
        if len(parts) != 2:
            raise PolicyError(f"dbt_iceberg_maint: argument `relation` is '{name}'; expected 'schema.table' or "
                              "'catalog.schema.table'")
        return cls(parts[0], parts[1], catalog)

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.identifier}"

    @property
    def qualified(self) -> str:
        return f"{self.catalog}.{self.name}" if self.catalog else self.name

    def errors(self) -> list[str]:
        """The identifier guard on every part (`_iceberg_maint_relation_parts`)."""
        parts = [("schema", self.schema), ("identifier", self.identifier)]
        if self.catalog is not None:
            parts.insert(0, ("catalog", self.catalog))
        return [e for label, value in parts for e in guards.identifier_errors(f"table `{label}`", value)]

    def call(self, procedure: str, arguments: Sequence[tuple[str, str]]) -> str:
        namespace = f"{self.catalog}.system" if self.catalog else "system"
        rendered = ", ".join(f"{name} => {literal}" for name, literal in [("table", string_literal(self.name)),
                                                                          *arguments])
        return f"CALL {namespace}.{procedure}({rendered})"


def rewrite_data_files_sql(table: TableRef, where: Any = None, strategy: Any = None, sort_order: Any = None,
                           options: Any = None) -> str:
    raise_if_errors(checks.rewrite_data_files_errors(where, strategy, sort_order, options))
    args: list[tuple[str, str]] = []
    effective = strategy if strategy is not None else ("sort" if sort_order is not None else None)
    if effective is not None:
        args.append(("strategy", string_literal(effective.lower())))
    if sort_order is not None:
        args.append(("sort_order", string_literal(sort_order.strip())))
    if options:
        args.append(("options", map_literal(options)))
    if where is not None:
        args.append(("where", string_literal(where.strip())))
    return table.call("rewrite_data_files", args)


def rewrite_position_delete_files_sql(table: TableRef, where: Any = None, options: Any = None) -> str:
    raise_if_errors(checks.rewrite_position_delete_files_errors(where, options))
    args: list[tuple[str, str]] = []
    if options:
        args.append(("options", map_literal(options)))
    if where is not None:
        args.append(("where", string_literal(where.strip())))
    return table.call("rewrite_position_delete_files", args)


def expire_snapshots_sql(table: TableRef, now: dt.datetime, older_than_hours: Any = None, retain_last: Any = None,
                         max_concurrent_deletes: Any = None, stream_results: Any = None,
                         clean_expired_metadata: Any = None, older_than: Any = None) -> str:
    raise_if_errors(checks.expire_snapshots_errors(older_than_hours, retain_last, max_concurrent_deletes,
                                                   stream_results, None, clean_expired_metadata, older_than))
    args: list[tuple[str, str]] = []
    if older_than is not None:
        instant = checks.parse_instant("expire_snapshots", "older_than", older_than).value
        assert instant is not None  # checked above
        args.append(("older_than", timestamp_literal(instant)))
    elif older_than_hours is not None and older_than_hours == 0:
        args.append(("older_than", NO_AGE_LIMIT))
    elif older_than_hours is not None:
        args.append(("older_than", timestamp_hours_ago(older_than_hours, now)))
    if retain_last is not None:
        args.append(("retain_last", str(retain_last)))
    if max_concurrent_deletes is not None:
        args.append(("max_concurrent_deletes", str(max_concurrent_deletes)))
    if stream_results is not None:
        args.append(("stream_results", boolean_literal(stream_results)))
    if clean_expired_metadata is not None:
        args.append(("clean_expired_metadata", boolean_literal(clean_expired_metadata)))
    return table.call("expire_snapshots", args)


def remove_orphan_files_sql(table: TableRef, now: dt.datetime, table_location: str | None,
                            older_than_hours: Any = 72, location: Any = None, max_concurrent_deletes: Any = None,
                            equal_schemes: Any = None, equal_authorities: Any = None,
                            prefix_mismatch_mode: Any = None, prefix_listing: Any = None) -> str:
    """`now` is the wall clock: the 24 h floor protects writes in flight, whatever the plan's as_of.
    `table_location`: the table's, which `location` must lie inside (the scope guard)."""
    raise_if_errors(checks.remove_orphan_files_errors(older_than_hours, False, location, max_concurrent_deletes, None,
                                                      equal_schemes, equal_authorities, prefix_mismatch_mode,
                                                      prefix_listing))
    if location is not None:
        raise_if_errors(guards.orphan_location_errors(table_location, location))
    args = [("older_than", timestamp_hours_ago(older_than_hours if older_than_hours is not None else 72, now))]
    if location is not None:
        args.append(("location", string_literal(location)))
    if max_concurrent_deletes is not None:
        args.append(("max_concurrent_deletes", str(max_concurrent_deletes)))
    if equal_schemes:
        args.append(("equal_schemes", map_literal(equal_schemes)))
    if equal_authorities:
        args.append(("equal_authorities", map_literal(equal_authorities)))
    if prefix_mismatch_mode is not None:
        args.append(("prefix_mismatch_mode", string_literal(prefix_mismatch_mode.upper())))
    if prefix_listing is not None:
        args.append(("prefix_listing", boolean_literal(prefix_listing)))
    return table.call("remove_orphan_files", args)


def rewrite_manifests_sql(table: TableRef, use_caching: Any = None) -> str:
    raise_if_errors(checks.rewrite_manifests_errors(use_caching))
    return table.call("rewrite_manifests", [] if use_caching is None else [("use_caching",
                                                                             boolean_literal(use_caching))])


def compute_table_stats_sql(table: TableRef, snapshot_id: Any = None, columns: Sequence[str] | None = None) -> str:
    raise_if_errors(checks.compute_table_stats_errors(snapshot_id, columns))
    args = [] if snapshot_id is None else [("snapshot_id", str(snapshot_id))]
    if columns is not None:
        args.append(("columns", "array(" + ", ".join(string_literal(column) for column in columns) + ")"))
    return table.call("compute_table_stats", args)


def compute_partition_stats_sql(table: TableRef, snapshot_id: Any = None) -> str:
    raise_if_errors(checks.compute_partition_stats_errors(snapshot_id))
    return table.call("compute_partition_stats", [] if snapshot_id is None else [("snapshot_id", str(snapshot_id))])
