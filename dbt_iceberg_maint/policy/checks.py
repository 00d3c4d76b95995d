"""Argument checks, the Python side of macros/internal/validation.sql and of each procedure's
`_iceberg_maint_<procedure>_errors` macro: same rules, same messages (a message names the
argument, the value and what is allowed). Values are the YAML/JSON kinds a policy holds.

Rendering follows Jinja's `~`: `str()` of the value (None, True, lists and dicts print as Python
prints them), `tojson` is `json.dumps`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dbt_iceberg_maint import guards

_INSTANT = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(\.\d{1,6})?(Z|\+00:00)?")
_VIEW_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_SORT_COLUMN = r"[A-Za-z_][A-Za-z0-9_.]*"
_ZORDER = re.compile(rf"^\s*zorder\s*\(\s*{_SORT_COLUMN}(\s*,\s*{_SORT_COLUMN})*\s*\)\s*$", re.IGNORECASE)
_SORT_TERM = re.compile(rf"^\s*{_SORT_COLUMN}(\s+(asc|desc))?(\s+nulls\s+(first|last))?\s*$", re.IGNORECASE)


def is_number(value: Any) -> bool:
    """Jinja's `is number and not boolean`."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def positive_number(owner: str, argument: str, value: Any, integer: bool = False) -> list[str]:
    """`_iceberg_maint_check_positive_number` (minimum_exclusive 0)."""
    if value is None:
        return []
    if not is_number(value) or (integer and not is_integer(value)):
        kind = "whole number" if integer else "number"
        return [f"{owner}: argument `{argument}` is {value}; expected a {kind} greater than 0"]
    if value <= 0:
        return [f"{owner}: argument `{argument}` is {value}; it must be greater than 0"]
    return []


def hours_bound(owner: str, argument: str, value: Any) -> list[str]:
    """`_iceberg_maint_check_hours_bound`: a timestamp can be computed from it."""
    if is_number(value) and value > guards.MAX_AGE_HOURS:
        return [f"{owner}: argument `{argument}` is {value}; it must be at most {guards.MAX_AGE_HOURS} (100 years)"]
    return []


def boolean(owner: str, argument: str, value: Any) -> list[str]:
    if value is None or isinstance(value, bool):
        return []
    return [f"{owner}: argument `{argument}` is {value}; expected true or false"]


def choice(owner: str, argument: str, value: Any, allowed: tuple[str, ...]) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, str) or value.lower() not in [a.lower() for a in allowed]:
        return [f"{owner}: argument `{argument}` is '{value}'; allowed values: {', '.join(allowed)}"]
    return []


def string_map(owner: str, argument: str, value: Any) -> list[str]:
    """A mapping of string keys to scalar values (procedure options, equal_schemes, ...)."""
    if value is None:
        return []
    if not isinstance(value, Mapping):
        return [f"{owner}: argument `{argument}` is {value}; expected a mapping of string keys to string values, "
                "e.g. {'key': 'value'}"]
    for key, item in value.items():
        if (not isinstance(key, str) or not key.strip() or item is None or isinstance(item, (Mapping, list, tuple))):
            return [f"{owner}: argument `{argument}` has entry {key}: {item}; keys must be non-empty strings and "
                    "values strings, numbers or booleans"]
    return []


@dataclass(frozen=True)
class Instant:
    """`_iceberg_maint_parse_instant`: a UTC datetime, or the errors that kept it from being one."""

    value: dt.datetime | None
    errors: tuple[str, ...] = ()


def parse_instant(owner: str, argument: str, value: Any) -> Instant:
    """'YYYY-MM-DD HH:MM:SS[.ffffff]' or ISO with T, in UTC (an optional Z or +00:00 says so)."""
    if value is None:
        return Instant(None)
    match = _INSTANT.fullmatch(value) if isinstance(value, str) else None
    problem = (f"{owner}: argument `{argument}` is {json.dumps(value)}; expected a UTC time "
               "'YYYY-MM-DD HH:MM:SS[.ffffff]' (or ISO 8601 with T and an optional Z)")
    if not match:
        return Instant(None, (problem,))
    year, month, day = (int(p) for p in match.group(1).split("-"))
    hour, minute, second = (int(p) for p in match.group(2).split(":"))
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 60):
        return Instant(None, (problem,))
    fraction = ((match.group(3) or ".0")[1:] + "000000")[:6]
    try:
        parsed = dt.datetime(year, month, day, hour, minute, second, int(fraction), tzinfo=dt.timezone.utc)
    except ValueError:  # 31 February: the macro's strptime fails the same way
        return Instant(None, (problem,))
    return Instant(parsed)


def sort_order_errors(owner: str, sort_order: str) -> list[str]:
    """'col [ASC|DESC] [NULLS FIRST|LAST], ...' or 'zorder(col, ...)'; Iceberg refuses to mix them."""
    if "zorder" in sort_order.lower():
        if not _ZORDER.match(sort_order):
            return [f"{owner}: argument `sort_order` is '{sort_order}'; a z-order must be exactly "
                    "'zorder(col1, col2, ...)' and cannot be mixed with other sort columns"]
        return []
    if any(not _SORT_TERM.match(item) for item in sort_order.split(",")):
        return [f"{owner}: argument `sort_order` is '{sort_order}'; expected 'col [ASC|DESC] [NULLS FIRST|LAST], "
                "...' or 'zorder(col1, col2, ...)'"]
    return []


# ---- each procedure's arguments (`_iceberg_maint_<procedure>_errors`) ----

def rewrite_data_files_errors(where: Any = None, strategy: Any = None, sort_order: Any = None,
                              options: Any = None) -> list[str]:
    owner = "rewrite_data_files"
    errors = guards.where_errors(owner, "where", where)
    errors += choice(owner, "strategy", strategy, ("binpack", "sort"))
    errors += string_map(owner, "options", options)
    if sort_order is not None:
        fragment = guards.where_errors(owner, "sort_order", sort_order, one_expression=False)
        errors += fragment
        if isinstance(strategy, str) and strategy.lower() == "binpack":
            errors.append(f"{owner}: argument `sort_order` is '{sort_order}' but `strategy` is '{strategy}'; a sort "
                          "order needs strategy 'sort' (or no strategy, which means sort)")
        elif not fragment:
            errors += sort_order_errors(owner, sort_order)
    return errors


def rewrite_position_delete_files_errors(where: Any = None, options: Any = None) -> list[str]:
    owner = "rewrite_position_delete_files"
    return guards.where_errors(owner, "where", where) + string_map(owner, "options", options)


def expire_snapshots_errors(older_than_hours: Any = None, retain_last: Any = None, max_concurrent_deletes: Any = None,
                            stream_results: Any = None, snapshot_ids: Any = None,
                            clean_expired_metadata: Any = None, older_than: Any = None) -> list[str]:
    owner = "expire_snapshots"
    errors: list[str] = []
    meaning = "0 means now: every snapshot but the newest retain_last"
    if older_than_hours is not None and not is_number(older_than_hours):
        errors.append(f"{owner}: argument `older_than_hours` is {older_than_hours}; expected a number of hours >= 0 "
                      f"({meaning})")
    elif older_than_hours is not None and older_than_hours < 0:
        errors.append(f"{owner}: argument `older_than_hours` is {older_than_hours}; it must be 0 or more ({meaning})")
    errors += hours_bound(owner, "older_than_hours", older_than_hours)
    instant_errors = list(parse_instant(owner, "older_than", older_than).errors)
    errors += instant_errors
    if older_than is not None and older_than_hours is not None and not instant_errors:
        errors.append(f"{owner}: arguments `older_than` ({older_than}) and `older_than_hours` ({older_than_hours}) "
                      "are both given; give one cut-off")
    if retain_last is not None and (not is_integer(retain_last) or retain_last < 1):
        errors.append(f"{owner}: argument `retain_last` is {retain_last}; it must be a whole number of at least 1 "
                      "(Iceberg always keeps the current snapshot)")
    errors += positive_number(owner, "max_concurrent_deletes", max_concurrent_deletes, integer=True)
    errors += boolean(owner, "stream_results", stream_results)
    errors += boolean(owner, "clean_expired_metadata", clean_expired_metadata)
    if snapshot_ids is not None:
        if isinstance(snapshot_ids, (list, tuple)) and snapshot_ids:
            errors += [f"{owner}: argument `snapshot_ids` contains {i}; snapshot ids are whole numbers"
                       for i in snapshot_ids if not is_integer(i)]
        else:
            errors.append(f"{owner}: argument `snapshot_ids` is {snapshot_ids}; expected a non-empty list of "
                          "snapshot ids")
    return errors


def remove_orphan_files_errors(older_than_hours: Any = 72, dry_run: Any = False, location: Any = None,
                               max_concurrent_deletes: Any = None, file_list_view: Any = None,
                               equal_schemes: Any = None, equal_authorities: Any = None,
                               prefix_mismatch_mode: Any = None, prefix_listing: Any = None) -> list[str]:
    owner = "remove_orphan_files"
    number = positive_number(owner, "older_than_hours", older_than_hours)
    errors = number + hours_bound(owner, "older_than_hours", older_than_hours)
    if not number and older_than_hours is not None and older_than_hours < guards.ORPHAN_FLOOR_HOURS:
        errors.append(f"{owner}: argument `older_than_hours` is {older_than_hours}; it must be at least 24: removing "
                      "files younger than a day can delete the files of a write still in progress and corrupt the "
                      "table")
    errors += boolean(owner, "dry_run", dry_run) + boolean(owner, "prefix_listing", prefix_listing)
    errors += positive_number(owner, "max_concurrent_deletes", max_concurrent_deletes, integer=True)
    errors += choice(owner, "prefix_mismatch_mode", prefix_mismatch_mode, ("ERROR", "IGNORE", "DELETE"))
    errors += string_map(owner, "equal_schemes", equal_schemes) + string_map(owner, "equal_authorities",
                                                                             equal_authorities)
    if location is not None and (not isinstance(location, str) or not location.strip()):
        errors.append(f"{owner}: argument `location` is '{location}'; expected a non-empty path or URI")
    elif isinstance(location, str) and (location != location.strip() or len(location.splitlines()) > 1):
        errors.append(f"{owner}: argument `location` is {json.dumps(location)}; expected a path or URI without "
                      "surrounding whitespace or line breaks")
    if file_list_view is not None and (not isinstance(file_list_view, str) or not _VIEW_NAME.fullmatch(file_list_view)):
        errors.append(f"{owner}: argument `file_list_view` is '{file_list_view}'; expected a view name (letters, "
                      "digits, underscores, dots) with columns file_path string and last_modified timestamp")
    return errors


def rewrite_manifests_errors(use_caching: Any = None, spec_id: Any = None) -> list[str]:
    errors = boolean("rewrite_manifests", "use_caching", use_caching)
    if spec_id is not None and (not is_integer(spec_id) or spec_id < 0):
        errors.append(f"rewrite_manifests: argument `spec_id` is {spec_id}; expected a partition spec id, a whole "
                      "number >= 0")
    return errors


def snapshot_id(owner: str, value: Any) -> list[str]:
    """`_iceberg_maint_check_snapshot_id`: Iceberg refuses one the table does not have."""
    if value is not None and (not is_integer(value) or value < 0):
        return [f"{owner}: argument `snapshot_id` is {value}; expected a snapshot id, a whole number >= 0"]
    return []


def compute_table_stats_errors(snapshot: Any = None, columns: Any = None) -> list[str]:
    owner = "compute_table_stats"
    errors = snapshot_id(owner, snapshot)
    if columns is None:
        return errors
    if not isinstance(columns, (list, tuple)) or not columns:
        return [*errors, f"{owner}: argument `columns` is {columns}; expected a non-empty list of column names, "
                         "e.g. ['id', 'event_date']"]
    for column in columns:
        if not isinstance(column, str) or not column.strip() or column != column.strip() or "\n" in column:
            errors.append(f"{owner}: argument `columns` has entry {column}; expected a column name, non-empty, "
                          "without surrounding whitespace or line breaks")
    return errors


def compute_partition_stats_errors(snapshot: Any = None) -> list[str]:
    return snapshot_id("compute_partition_stats", snapshot)
