"""SQL fragments of a dbt project read with sqlglot's Spark dialect (pure, no I/O).

Three kinds of fragment: a boolean predicate (a policy `where`, an `incremental_predicates`
entry), a `partition_by` entry (an Iceberg partition transform), and a model's SELECT, rendered
from its Jinja with stand-ins for dbt's context so that its output columns can be named.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

DIALECT = "spark"
# dbt-spark's MERGE aliases (spark__get_merge_sql): the target and the model's new rows.
DEST_ALIAS = "dbt_internal_dest"
SOURCE_ALIAS = "dbt_internal_source"

# Iceberg's Spark partition transforms, by the name sqlglot gives the parsed function.
TIME_TRANSFORMS = {
    "years": "years", "year": "years", "months": "months", "month": "months",
    "days": "days", "day": "days", "date": "days", "hours": "hours", "hour": "hours", "date_hour": "hours",
}
OTHER_TRANSFORMS = {"bucket": "bucket", "truncate": "truncate", "trunc": "truncate"}
BOOLEAN_NODES = (exp.Predicate, exp.Connector, exp.Not, exp.Boolean)
# A projection's Spark type, when the model's SQL states it (cast(... as date)).
TIME_TYPES = frozenset({"date", "timestamp", "timestamp_ntz", "timestamp_ltz"})


@dataclass(frozen=True)
class Predicate:
    """A fragment that parsed as exactly one Spark boolean expression."""

    text: str
    expression: exp.Expr


@dataclass(frozen=True)
class PredicateProblem:
    """Why a fragment is not one Spark boolean expression (shown in an invalid_where finding)."""

    text: str
    problem: str


def parse_predicate(text: str) -> Predicate | PredicateProblem:
    """Parse `text` as one Spark boolean expression; a problem instead of an exception."""
    if not text.strip():
        return PredicateProblem(text, "it is empty")
    try:
        statements = [s for s in sqlglot.parse(text, read=DIALECT) if s is not None]
    except SqlglotError as exc:
        return PredicateProblem(text, f"sqlglot cannot parse it as Spark SQL: {_first_line(exc)}")
    if len(statements) != 1:
        return PredicateProblem(text, f"it holds {len(statements)} statements; expected one boolean expression")
    expression = statements[0]
    inner = expression.unnest() if isinstance(expression, exp.Paren) else expression
    if not isinstance(inner, BOOLEAN_NODES) and not isinstance(inner, exp.Func):
        return PredicateProblem(
            text, f"it parses as {type(inner).__name__} ({inner.sql(DIALECT)[:80]}), not a boolean expression")
    if any(True for _ in expression.find_all(exp.Subquery, exp.Select)):
        return PredicateProblem(text, "it contains a subquery; Iceberg accepts column filters only")
    return Predicate(text, expression)


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200].rstrip(".")


def columns(expression: exp.Expr) -> tuple[exp.Column, ...]:
    return tuple(expression.find_all(exp.Column))


def column_qualifier(column: exp.Column) -> str:
    return column.table.lower()


def conjuncts(expression: exp.Expr) -> tuple[exp.Expr, ...]:
    """The top-level AND terms of a predicate (parentheses removed)."""
    inner = expression.unnest() if isinstance(expression, exp.Paren) else expression
    if isinstance(inner, exp.And):
        return (*conjuncts(inner.this), *conjuncts(inner.expression))
    return (inner,)


def _has_column(expression: exp.Expr) -> bool:
    return any(True for _ in expression.find_all(exp.Column))


def _bare_column(expression: exp.Expr, names: frozenset[str], qualifier: str) -> str | None:
    """The name of `expression` when it is one of `names`, qualified by `qualifier` ('' = none)."""
    if isinstance(expression, exp.Column) and expression.name.lower() in names:
        if column_qualifier(expression) == qualifier or (qualifier == "" and not expression.table):
            return expression.name.lower()
    return None


def restricted_column(
    term: exp.Expr, names: frozenset[str], qualifier: str, *, upper_bound_only: bool = False
) -> str | None:
    """The column of `names` that `term` restricts to constant values, or None.

    Only `column <op> constant` forms count (=, <, <=, >, >=, IN, BETWEEN, and ORs of them on
    one column): those are what Spark pushes into the Iceberg scan as a filter, so they bound
    the files read. `upper_bound_only` keeps the forms that exclude the newest values.
    """
    term = term.unnest() if isinstance(term, exp.Paren) else term
    if isinstance(term, exp.Or):
        left = restricted_column(term.this, names, qualifier, upper_bound_only=upper_bound_only)
        right = restricted_column(term.expression, names, qualifier, upper_bound_only=upper_bound_only)
        return left if left is not None and left == right else None
    if isinstance(term, exp.Between):
        column = _bare_column(term.this, names, qualifier)
        bounds = (term.args.get("low"), term.args.get("high"))
        return column if column and not any(b is None or _has_column(b) for b in bounds) else None
    if isinstance(term, exp.In):
        column = _bare_column(term.this, names, qualifier)
        values = term.expressions
        return column if column and values and not any(_has_column(v) for v in values) else None
    comparisons: dict[type[exp.Expr], tuple[bool, bool]] = {
        # kind -> (an upper bound when the column is on the left, ... when on the right)
        exp.EQ: (True, True), exp.LT: (True, False), exp.LTE: (True, False),
        exp.GT: (False, True), exp.GTE: (False, True),
    }
    for kind, (upper_if_left, upper_if_right) in comparisons.items():
        if type(term) is kind:
            left, right = term.this, term.expression
            for side, other, upper in ((left, right, upper_if_left), (right, left, upper_if_right)):
                column = _bare_column(side, names, qualifier)
                if column and not _has_column(other) and (upper or not upper_bound_only):
                    return column
    return None


@dataclass(frozen=True)
class PartitionField:
    """One `partition_by` entry: its source column and Iceberg transform."""

    text: str
    column: str | None  # None: the entry did not parse or names no single column
    transform: str  # identity, years, months, days, hours, bucket, truncate, or unknown


def partition_field(text: str) -> PartitionField:
    try:
        expression = sqlglot.parse_one(text, read=DIALECT)
    except SqlglotError:
        return PartitionField(text, None, "unknown")
    found = {c.name.lower() for c in expression.find_all(exp.Column)}
    column = found.pop() if len(found) == 1 else None
    if isinstance(expression, exp.Column):
        return PartitionField(text, column, "identity")
    name = (expression.name if isinstance(expression, exp.Anonymous) else type(expression).__name__).lower()
    transform = TIME_TRANSFORMS.get(name) or OTHER_TRANSFORMS.get(name) or "unknown"
    return PartitionField(text, column, transform)


@dataclass(frozen=True)
class Projection:
    """The output columns of a model's SELECT, as far as they can be read without a warehouse."""

    names: tuple[str, ...]  # lower case, in order
    types: Mapping[str, str]  # the Spark types the SQL states (cast), lower case


@dataclass(frozen=True)
class Unreadable:
    """Why a model's output columns could not be read (the lint says so instead of guessing)."""

    reason: str


def model_projection(raw_code: str) -> Projection | Unreadable:
    """Render the model's Jinja with stand-ins for dbt's context (first build, no warehouse) and
    read the outer SELECT's column names, or say why that is not possible: an unknown macro, a
    `*`, an unnamed expression, SQL sqlglot cannot parse."""
    rendered = render_model_sql(raw_code)
    if rendered is None:
        return Unreadable("its Jinja uses a macro or context the lint cannot render without dbt (e.g. a package "
                          "macro)")
    try:
        statement = sqlglot.parse_one(rendered, read=DIALECT)
    except SqlglotError:
        return Unreadable("its rendered SQL does not parse as Spark SQL")
    while isinstance(statement, exp.SetOperation):
        statement = statement.left
    if not isinstance(statement, exp.Select):
        return Unreadable("its outer statement is not a SELECT")
    names: list[str] = []
    types: dict[str, str] = {}
    for projection in statement.expressions:
        if isinstance(projection, exp.Star) or (isinstance(projection, exp.Column) and projection.is_star):
            return Unreadable(f"its outer SELECT has `{projection.sql(DIALECT)}`, whose columns come from another "
                              "relation")
        name = projection.alias_or_name
        if not name:
            return Unreadable(f"its outer SELECT has the unnamed expression `{projection.sql(DIALECT)}`")
        names.append(name.lower())
        value = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(value, exp.Cast):
            types[name.lower()] = value.to.sql(DIALECT).lower()
    return Projection(tuple(names), types)


class _Relation:
    """Stands in for `this`, `ref()` and `source()`: renders as a plain table name."""

    def __init__(self, identifier: str, schema: str = "schema") -> None:
        self.identifier = identifier
        self.name = identifier
        self.schema = schema
        self.database = None

    def __str__(self) -> str:
        return f"{self.schema}.{self.identifier}"


class _UnsetVar(str):
    """A var without default (given on the command line at run time): renders as NULL, which is
    valid wherever a value goes (vars feed filters, not column names), and is false in `if`."""

    def __bool__(self) -> bool:
        return False


_UNSET_VAR = _UnsetVar("NULL")


class _Target:
    name = "lint"
    schema = "schema"
    type = "spark"
    database = None


def render_model_sql(raw_code: str) -> str | None:
    """The model's SQL as a first (full) build renders it, or None when it uses anything but the
    usual context (ref, source, var with a default, config, is_incremental, this, target)."""
    import jinja2

    def var(name: str, default: Any = None) -> Any:
        return _UNSET_VAR if default is None else default

    def env_var(name: str, default: str | None = None) -> str:
        if default is None:
            raise LookupError(name)
        return default

    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, extensions=["jinja2.ext.do"])
    context: dict[str, Any] = {
        "ref": lambda *args, **_: _Relation(str(args[-1])),
        "source": lambda source_name, table_name: _Relation(str(table_name), str(source_name)),
        "var": var,
        "env_var": env_var,
        "config": lambda *args, **kwargs: "",
        "is_incremental": lambda: False,
        "this": _Relation("this"),
        "target": _Target(),
        "execute": False,
    }
    try:
        return environment.from_string(raw_code).render(context)
    except Exception:  # noqa: BLE001 - anything the stand-ins cannot render means "unknown"
        return None


def called_macros(jinja_text: str) -> frozenset[str]:
    """The names of the macros a Jinja text calls (`pkg.name(...)` gives `name`), from its
    syntax tree, so calls inside `{% if %}` count too. Empty when the text does not parse."""
    import jinja2
    from jinja2 import nodes

    try:
        tree = jinja2.Environment(extensions=["jinja2.ext.do"]).parse(jinja_text)
    except jinja2.TemplateSyntaxError:
        return frozenset()
    names = set()
    for call in tree.find_all(nodes.Call):
        if isinstance(call.node, nodes.Name):
            names.add(call.node.name)
        elif isinstance(call.node, nodes.Getattr):
            names.add(call.node.attr)
    return frozenset(names)
