"""The fuzz's oracle (issue 22): reads the SQL a macro rendered for a fuzzed input with sqlglot
(dialect spark) and names what is wrong with it. Pure: the harness (lab/fuzz.py) supplies the
rendered text, the table's location and the instant it was rendered.

A rendered text is wrong when
- it is more than one statement, carries a comment, or has SQL outside its literals (a CALL's
  arguments are `name => constant`, an ALTER sets literal keys to literal values, a predicate
  names only the columns it was given, a query reads only the table's metadata tables);
- a remove_orphan_files CALL's `location` is not the table's location or a folder inside it, or
  its `older_than` is less than 24 h before the moment it was rendered;
- a compaction scoped to cold partitions has a `where` whose cold predicate is not a top-level
  AND conjunct (so some other input widened it to partitions that are not cold).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

DIALECT = "spark"
ORPHAN_MIN_AGE = timedelta(hours=24)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Call:
    namespace: tuple[str, ...]
    procedure: str
    arguments: dict[str, exp.Expr]

    def text(self, name: str) -> str | None:
        """The string value of argument `name` (literal or TIMESTAMP literal), or None."""
        value = self.arguments.get(name)
        if isinstance(value, exp.Cast):
            value = value.this
        return value.this if isinstance(value, exp.Literal) and value.is_string else None


def lexical_problems(sql: str) -> list[str]:
    """Comments and statement separators outside literals."""
    try:
        tokens = sqlglot.tokenize(sql, read=DIALECT)
    except TokenError as error:
        return [f"does not tokenize: {error}"]
    problems = []
    if any(token.comments for token in tokens):
        problems.append("a comment outside the literals")
    if any(token.token_type == sqlglot.TokenType.SEMICOLON for token in tokens):
        problems.append("a statement separator outside the literals")
    return problems


def _parse(sql: str) -> list[exp.Expr] | str:
    try:
        return [e for e in sqlglot.parse(sql, read=DIALECT) if e is not None]
    except (ParseError, TokenError) as error:
        return f"does not parse: {str(error).splitlines()[0]}"


def _single(sql: str, what: str = "statements") -> tuple[list[str], exp.Expr | None]:
    """The lexical problems of `sql` and its one parsed statement (None when it is not one)."""
    problems = lexical_problems(sql)
    parsed = _parse(sql)
    if isinstance(parsed, str):
        return [*problems, parsed], None
    if len(parsed) != 1:
        return [*problems, f"{len(parsed)} {what}"], None
    return problems, parsed[0]


def _is_constant(value: exp.Expr) -> bool:
    if isinstance(value, exp.Paren):
        return _is_constant(value.this)
    if isinstance(value, (exp.Literal, exp.Boolean, exp.Null)):
        return True
    if isinstance(value, exp.Neg):
        return isinstance(value.this, exp.Literal) and not value.this.is_string
    if isinstance(value, exp.Cast):  # TIMESTAMP '...'
        return isinstance(value.this, exp.Literal) and value.this.is_string
    if isinstance(value, exp.VarMap):
        return all(_is_constant(v) for side in (value.args.get("keys"), value.args.get("values"))
                   if side is not None for v in side.expressions)
    if isinstance(value, exp.Array):
        return all(_is_constant(v) for v in value.expressions)
    return False


def parse_call(sql: str) -> Call | list[str]:
    """`CALL [catalog.]system.procedure(name => constant, ...)`, or what is wrong with it."""
    match = re.match(r"^\s*call\s+(?P<rest>.*)$", sql, re.I | re.S)
    if not match:
        return ["not a CALL"]
    problems, node = _single(match.group("rest"))
    if node is None:
        return problems
    names: list[str] = []
    while isinstance(node, exp.Dot):
        left = node.this
        if isinstance(left, exp.Dot):
            names.extend(i.name for i in left.find_all(exp.Identifier))
        elif isinstance(left, (exp.Identifier, exp.Column)):
            names.append(left.name)
        else:
            return [*problems, f"a namespace that is not a name: {left.sql(DIALECT)}"]
        node = node.expression
    if not isinstance(node, exp.Anonymous):
        return [*problems, f"not a procedure call: {node.sql(DIALECT)[:200]}"]
    if not names or names[-1].lower() != "system" or len(names) > 2 or not all(_IDENTIFIER.match(n) for n in names):
        problems.append(f"the procedure's namespace {'.'.join(names)!r} is not [catalog.]system")
    arguments: dict[str, exp.Expr] = {}
    for argument in node.expressions:
        if not isinstance(argument, exp.Kwarg) or not _is_constant(argument.expression):
            problems.append(f"an argument that is not `name => constant`: {argument.sql(DIALECT)[:200]}")
            continue
        arguments[argument.this.name] = argument.expression
    return problems or Call(tuple(names), str(node.this), arguments)


def inside(location: str, root: str) -> bool:
    """`location` is the folder `root` or one inside it (after resolving `.` and `..`)."""
    def normal(path: str) -> str:
        text = re.sub(r"^file:(//)?", "", path.strip())
        return posixpath.normpath(text) if text else ""

    wanted, base = normal(location), normal(root)
    return bool(base) and (wanted == base or wanted.startswith(base.rstrip("/") + "/"))


def timestamp_literal(text: str) -> datetime | None:
    """The instant of a rendered `TIMESTAMP 'YYYY-MM-DD HH:MM:SS[.ffffff]Z'`."""
    match = re.fullmatch(r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)(Z|\+00:00)?", text.strip())
    if not match:
        return None
    stamp = match.group(1)
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f" if "." in stamp else "%Y-%m-%d %H:%M:%S").replace(
        tzinfo=timezone.utc)


def orphan_problems(call: Call, table_location: str, rendered_at: datetime) -> list[str]:
    problems = []
    location = call.text("location")
    if "location" in call.arguments and (location is None or not inside(location, table_location)):
        problems.append(f"remove_orphan_files location {location!r} is not inside the table's {table_location!r}")
    older_than = call.text("older_than")
    if older_than is not None:
        instant = timestamp_literal(older_than)
        if instant is None:
            problems.append(f"remove_orphan_files older_than {older_than!r} is not a UTC timestamp")
        elif rendered_at - instant < ORPHAN_MIN_AGE:
            hours = (rendered_at - instant).total_seconds() / 3600
            problems.append(f"remove_orphan_files older_than {older_than!r} is {hours:.4f} h before the render, < 24 h")
    return problems


def conjuncts(where: exp.Expr) -> list[exp.Expr]:
    node = where.unnest()
    if isinstance(node, exp.And):
        return [c for part in (node.this, node.expression) for c in conjuncts(part)]
    return [node]


def cold_conjunct_problems(where: str | None, cold: str) -> list[str]:
    """The cold-partition predicate `cold` is `where` itself or one of its top-level AND terms."""
    if where is None:
        return [f"no `where` although the compaction is scoped to the cold partitions ({cold})"]
    try:
        combined = sqlglot.parse_one(where, read=DIALECT)
        wanted = sqlglot.parse_one(cold, read=DIALECT).unnest()
    except (ParseError, TokenError) as error:
        return [f"the compaction's `where` does not parse, so its cold predicate cannot be shown to hold: "
                f"{str(error).splitlines()[0]}"]
    if any(term == wanted for term in conjuncts(combined)):
        return []
    return [f"the cold predicate is not a top-level AND conjunct of the compaction's `where`: {where}"]


def predicate_problems(sql: str, columns: Iterable[str]) -> list[str]:
    """One expression over the given columns and constants only (a partition's range)."""
    problems, node = _single(sql, "expressions")
    if node is None:
        return problems
    if isinstance(node, (exp.Query, exp.Command, exp.DDL, exp.DML)) or any(node.find_all(exp.Query)):
        problems.append(f"a statement or subquery in a predicate: {sql[:200]}")
    allowed = {c.lower() for c in columns}
    named = {c.name.lower() for c in node.find_all(exp.Column)}
    if named - allowed:
        problems.append(f"columns {sorted(named - allowed)} that were not given")
    return problems


def same_table(name: str, table: str) -> bool:
    """`name` and `table` name one table; a name without a catalog (or schema) means the current one."""
    left, right = name.lower().split("."), table.lower().split(".")
    shorter = min(len(left), len(right))
    return left[-shorter:] == right[-shorter:]


def query_problems(sql: str, table: str) -> list[str]:
    """One SELECT reading only `table`'s metadata tables (and its own CTEs)."""
    problems, node = _single(sql)
    if node is None:
        return problems
    if not isinstance(node, exp.Select):
        return [*problems, f"not a SELECT: {type(node).__name__}"]
    ctes = {cte.alias_or_name.lower() for cte in node.find_all(exp.CTE)}
    for table_node in node.find_all(exp.Table):
        name = ".".join(part.name for part in table_node.parts).lower()
        if name not in ctes and not same_table(name.rsplit(".", 1)[0], table):
            problems.append(f"reads {name!r}, not a metadata table of {table!r}")
    return problems


LISTING_VIEW = "iceberg_maint_left_behind_listing"
_LISTING = re.compile(r"create or replace temporary view iceberg_maint_left_behind_listing using binaryFile options "
                      r"\(path '(?:[^'\\]|\\.)*', recursiveFileLookup 'true'\)")


def listing_problems(sql: str) -> list[str]:
    """The left-behind sweep's listing (get_find_left_behind_locations_sql): exactly its CREATE
    TEMPORARY VIEW over binaryFile with one path literal, or one SELECT reading only that view."""
    if sql.lower().startswith("create"):
        problems = lexical_problems(sql)
        return problems if _LISTING.fullmatch(sql) else [*problems, f"not the left-behind listing view: {sql[:200]}"]
    return query_problems(sql, LISTING_VIEW)


def alter_problems(sql: str, table: str | None) -> list[str]:
    """`alter table <table> set tblproperties ('k' = 'v', ...)` and nothing else."""
    problems = lexical_problems(sql)
    parsed = _parse(sql)
    if isinstance(parsed, str):
        return [*problems, parsed]
    for statement in parsed:
        if not isinstance(statement, exp.Alter):
            problems.append(f"not an ALTER TABLE: {statement.sql(DIALECT)[:200]}")
            continue
        name = ".".join(part.name for part in statement.this.parts).lower()
        if table is not None and not same_table(name, table):
            problems.append(f"alters {name!r}, not {table!r}")
        properties = [p for action in statement.args.get("actions") or [] for p in action.find_all(exp.Property)]
        if not properties or not all(isinstance(p.this, exp.Literal) and isinstance(p.args.get("value"), exp.Literal)
                                     for p in properties):
            problems.append(f"an ALTER that is not literal keys set to literal values: {statement.sql(DIALECT)[:200]}")
            continue
        for prop in properties:
            if prop.this.name in INT_PROPERTIES and not _java_int(prop.args["value"].name):
                problems.append(f"{prop.this.name} = {prop.args['value'].name!r} is not a Java int, which Iceberg "
                                "parses it as when it commits")
    return problems


# Table properties Iceberg parses as a Java int when it commits: past its range, that commit
# fails (previous-versions-max) or every later one does (commit.retry.num-retries).
INT_PROPERTIES = frozenset({"write.metadata.previous-versions-max", "commit.retry.num-retries",
                            "commit.retry.min-wait-ms", "commit.retry.max-wait-ms", "commit.retry.total-timeout-ms"})


def _java_int(text: str) -> bool:
    return bool(re.fullmatch(r"-?\d+", text)) and -2**31 <= int(text) < 2**31


def call_problems(sql: str, procedure: str | None = None, table_location: str | None = None,
                  rendered_at: datetime | None = None, cold: str | None = None) -> list[str]:
    """Everything wrong with one rendered CALL (see the module's docstring)."""
    call = parse_call(sql)
    if not isinstance(call, Call):
        return call
    problems = []
    if procedure is not None and call.procedure != procedure:
        problems.append(f"calls {call.procedure!r}, not {procedure!r}")
    if call.procedure == "remove_orphan_files" and table_location is not None and rendered_at is not None:
        problems.extend(orphan_problems(call, table_location, rendered_at))
    if call.procedure == "rewrite_data_files" and cold is not None:
        problems.extend(cold_conjunct_problems(call.text("where"), cold))
    return problems


def sql_texts(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [v for v in value if v]
