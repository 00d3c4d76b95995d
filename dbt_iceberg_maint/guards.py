"""The guards of every destructive or scope-limiting CALL, for the Python paths (pure, no I/O).

Each mirrors one macro, with the same messages: `identifier_errors` the identifier guard
(`_iceberg_maint_is_identifier`, macros/internal/relation_names.sql), `where_errors` the where
guard and `scan_expression` its scanner (`_iceberg_maint_check_where`,
`_iceberg_maint_scan_expression`, macros/internal/validation.sql), `orphan_location_errors` the
location guard (macros/procedures/remove_orphan_files.sql; the 24 h floor and the 100-year bound
are policy/checks.py's), `replayed_step_errors` the checks of a replayed plan step
(`_iceberg_maint_replayed_argument_errors`, macros/operations/get_maintenance_plan.sql).
The policy engine (policy/) and the replay (maintenance/run.py) call these.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
FRAGMENT_MARKERS = (";", "--", "/*", "*/")
ORPHAN_FLOOR_HOURS = 24
MAX_AGE_HOURS = 876_000  # 100 years: beyond it no timestamp can be computed
_QUOTES = ("'", '"', "`")
_WORD = re.compile(r"[A-Za-z0-9_]")
# A string literal as the package renders it: only \\ and \' escapes.
_PACKAGE_LITERAL = re.compile(r"'(?:[^'\\]|\\[\\'])*'")
_CUTOFF_LITERAL = re.compile(r"TIMESTAMP '(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?)Z'")


def identifier_errors(label: str, value: object) -> list[str]:
    """`label` names the argument; a name is one plain identifier as a whole string."""
    if isinstance(value, str) and IDENTIFIER.fullmatch(value):
        return []
    return [f"{label} is {json.dumps(value)}; expected letters, digits and underscores"]


@dataclass(frozen=True)
class Scan:
    """Why a SQL text is not balanced (None when it is) and its parts at top-level commas."""

    problem: str | None
    parts: tuple[str, ...]


def scan_expression(text: str) -> Scan:
    """Walk `text` as Spark's lexer does: '...' and "..." literals (backslash escapes, a doubled
    quote stays inside; r'...' raw literals without escapes), `...` identifiers (a doubled
    backtick stays inside), parenthesis depth."""
    quote: str | None = None
    depth = opened_at = start = 0
    skip = raw = False
    parts: list[str] = []
    for i, char in enumerate(text):
        if skip:
            skip = False
        elif quote is not None:
            if char == "\\" and quote != "`" and not raw:
                skip = True
            elif char == quote:
                if text[i + 1:i + 2] == char:  # '' = the literal ends, a new (not raw) one starts
                    skip, raw = True, False
                else:
                    quote = None
        elif char in _QUOTES:
            quote, opened_at = char, i
            # r'...' / R"...": Spark's raw literal, where a backslash escapes nothing.
            raw = char != "`" and text[i - 1:i] in ("r", "R") and not _WORD.fullmatch(text[i - 2:i - 1] or " ")
        elif char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                return Scan(f"the ')' at character {i + 1} closes a parenthesis it never opened", ())
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    if quote is not None:
        return Scan(f"the {quote} at character {opened_at + 1} is never closed", tuple(parts))
    if depth > 0:
        return Scan(f"{depth} parenthesis(es) are never closed", tuple(parts))
    return Scan(None, tuple(parts))


def fragment_problems(text: str) -> list[str]:
    problems = []
    if ";" in text:
        problems.append("';' (a statement separator: only one predicate/expression is allowed)")
    if any(marker in text for marker in FRAGMENT_MARKERS[1:]):
        problems.append("a SQL comment (--, /* or */)")
    return problems


def where_errors(owner: str, argument: str, value: object, one_expression: bool = True) -> list[str]:
    """The where guard: one balanced boolean expression (a sort order: an expression list)."""
    if value is None:
        return []
    if not isinstance(value, str) or not value.strip():
        return [f"{owner}: argument `{argument}` is '{value}'; expected a non-empty SQL string"]
    head = f"{owner}: argument `{argument}` is {json.dumps(value)}"
    problems = fragment_problems(value)
    if problems:
        return [f"{head}; it must not contain {' or '.join(problems)}"]
    scan = scan_expression(value)
    problem = scan.problem
    if problem is None and one_expression and len(scan.parts) > 1:
        problem = f"it holds {len(scan.parts)} comma-separated expressions"
    if problem is not None:
        shape = "boolean expression" if one_expression else "SQL expression list"
        return [f"{head}; it must be one {shape} with quotes and parentheses balanced outside string literals, "
                f"but {problem}"]
    return []


def cold_scoped_where(where: str | None, cold: str) -> tuple[str, list[str]]:
    """`(<where>) and (<cold>)`, the cold scope a top-level conjunct; errors when `where` is unguarded."""
    if not where:
        return cold, []
    errors = where_errors("rewrite_data_files", "where", where)
    return f"({where.strip()}) and ({cold})", errors


def normalised_location(path: str) -> str:
    text = path.strip().rstrip("/")
    for prefix in ("file://", "file:"):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def location_inside(root: str, location: str) -> bool:
    """Whether `location` is the folder `root` or one inside it (paths normalised first)."""
    base, wanted = normalised_location(root), normalised_location(location)
    return wanted == base or (wanted.startswith(base + "/") and "/../" not in wanted + "/")


def orphan_location_errors(table_location: str | None, location: object) -> list[str]:
    if location is None:
        return []
    if not isinstance(location, str) or not location.strip():
        return [f"remove_orphan_files: argument `location` is '{location}'; expected a non-empty path or URI"]
    if location != location.strip() or len(location.splitlines()) > 1:
        return [f"remove_orphan_files: argument `location` is {json.dumps(location)}; expected a path or URI "
                "without surrounding whitespace or line breaks"]
    if table_location is None:
        return [f"remove_orphan_files: argument `location` is '{location}' but the table's location could not "
                "be read, so it cannot be checked to lie inside the table"]
    if location_inside(table_location, location):
        return []
    return [f"remove_orphan_files: argument `location` is '{location}'; it must be the table's location "
            f"'{table_location}' or a folder inside it: every unreferenced file under it is deleted, other tables' "
            "files included"]


def string_literal_value(literal: str) -> str | None:
    """The value of a string literal the package rendered, or None for any other text (Spark's
    other escapes, e.g. \\u002e, would make Spark read another value than the one checked)."""
    if not _PACKAGE_LITERAL.fullmatch(literal):
        return None
    return re.sub(r"\\(.)", r"\1", literal[1:-1])


def call_arguments(sql: str, head: str) -> tuple[dict[str, str], list[str]]:
    """({name: literal text}, errors) of `<head>name => literal, ...)`."""
    inner = sql[len(head):-1] if sql.startswith(head) and sql.endswith(")") else ""
    scan = scan_expression(inner)
    problems = [p for p in (*fragment_problems(inner), scan.problem) if p]
    if not inner or problems:
        return {}, [f"its arguments must be balanced and hold no {' or '.join(problems) or 'other statement'}"]
    values: dict[str, str] = {}
    errors: list[str] = []
    for part in scan.parts:
        name, separator, literal = part.partition("=>")
        if not separator or not IDENTIFIER.fullmatch(name.strip()) or name.strip() in values:
            errors.append(f"argument {json.dumps(part.strip())} is not `name => value`")
        else:
            values[name.strip()] = literal.strip()
    return values, errors


def replayed_step_errors(operation: str, values: Mapping[str, str], now: dt.datetime) -> list[str]:
    """A replayed step's arguments against its procedure's guards (the location needs the
    table's location: execute_maintenance_steps checks it against the catalog)."""
    errors: list[str] = []
    if operation in ("rewrite_data_files", "rewrite_position_delete_files") and "where" in values:
        where = string_literal_value(values["where"])
        errors += where_errors(operation, "where", where) if where is not None else [
            f"{operation}: argument `where` is {values['where']}; expected a string literal"]
    if operation != "remove_orphan_files":
        return errors
    literal = values.get("older_than")
    if literal is not None:
        match = _CUTOFF_LITERAL.fullmatch(literal)
        instant = (dt.datetime.fromisoformat(match.group(1)).replace(tzinfo=dt.timezone.utc)
                   if match else None)
        if instant is None or instant > now - dt.timedelta(hours=ORPHAN_FLOOR_HOURS):
            errors.append(f"remove_orphan_files: argument `older_than` is {literal}; expected a constant TIMESTAMP "
                          "'YYYY-MM-DD HH:MM:SSZ' at least 24 h before now: a younger file may belong to a write in "
                          "progress")
    if "file_list_view" in values:
        errors.append(f"remove_orphan_files: argument `file_list_view` is {values['file_list_view']}; a replayed "
                      "plan step never lists files itself (call remove_orphan_files with file_list_view instead)")
    if "location" in values and string_literal_value(values["location"]) is None:
        errors.append(f"remove_orphan_files: argument `location` is {values['location']}; expected a string literal")
    return errors
