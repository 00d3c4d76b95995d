"""Guards that no input gets around (issue 22): each test tries to get around one guard.

The macro side is rendered by dbt without Spark (the harness of tests/unit/test_procedure_sql.py);
the Python side (the metadata planner, the replay of a logged plan, the JDBC settings) is called
directly. Where filters are checked on the rendered SQL with sqlglot's Spark dialect: the cold
predicate must be a top-level operand of the AND, whatever the user's `where` holds.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from dbt_iceberg_maint import guards
from dbt_iceberg_maint.errors import IcebergMaintError, PolicyError
from dbt_iceberg_maint.maintenance.run import PlanStep, replay
from dbt_iceberg_maint.metadata.jdbc_uri import sqlalchemy_uri
from dbt_iceberg_maint.policy import engine
from dbt_iceberg_maint.policy.operation_types import ColdScope, PlanContext
from dbt_iceberg_maint.policy.operations import OPERATIONS
from dbt_iceberg_maint.policy.sql import TableRef, raise_if_errors
from dbt_iceberg_maint.runtime.invoke import DbtInvocation, invoke_dbt
from tests.expect import markers

ENV = {"DBT_ICEBERG_MAINT_SCHEMA": "analytics"}
NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
COLD = "(day >= date '2024-01-01' and day < date '2024-01-02') or day = date '2024-01-05'"
# Filters that close the guard's parenthesis early, open a quote that swallows the rest, or are
# not one expression: each would leave the cold predicate out of the top level.
BYPASSES = [
    "x = 1) or (true",
    "true) or (1 = 1",
    "(x = 1",
    "x = 'open",
    "x = 'a\\') or (true",  # a backslash-escaped quote does not close the literal
    'x = "a\\") or (true',
    # A raw literal ends at its first quote (no backslash escape): on Spark 3.5 this selects every
    # row of `(<it>) and (false)`.
    "x = r'\\' or true) or (true or x = 'z\\''",
    'x = R"\\" or true) or (true or x = "z\\""',
    "x = 1, y = 2",
    "x = 1; drop table t",
    "x = 1 -- the rest",
    "x = 1 /* the rest */",
]
# Quotes, parentheses and commas inside literals, identifiers and calls are fine.
ACCEPTED = [
    "x = ')' or y = '('",
    "note = 'it''s' and n in (1, 2)",
    "note = 'it\\'s (really)'",
    'name = "a\\"b)"',
    "`odd)col` = 1",
    "x = r'a\\' and y = '(\\''",
    "`col) or (true` = 1",  # an identifier, however odd: the cold scope stays a top-level conjunct
    "coalesce(a, b) > 0",
    "(a = 1 or b = 2)",
]


def where_literal(call: str) -> str:
    """The `where` argument of a rendered CALL, unescaped by sqlglot (Spark string literal)."""
    head, _, literal = call.rpartition("where => ")
    assert head and literal.endswith(")"), call
    parsed = sqlglot.parse_one(literal[:-1], read="spark")
    assert isinstance(parsed, exp.Literal) and parsed.is_string, literal
    return str(parsed.this)


def assert_cold_is_a_top_level_conjunct(where: str, cold: str) -> None:
    tree = sqlglot.parse_one(where, read="spark")
    assert isinstance(tree, exp.And), where
    operands = [tree.this, tree.expression]
    expected = sqlglot.parse_one(cold, read="spark")
    assert any(op.unnest() == expected for op in operands), (where, cold)


# ---- Python paths ---------------------------------------------------------------------------

def planned_sql(ref: TableRef, operation: str, policy: dict[str, Any], cold: str | None = None,
                table_location: str | None = None) -> str | None:
    """What the policy engine renders for one step, after the checks the planner makes first."""
    raise_if_errors(ref.errors() + engine.errors(policy))
    context = PlanContext(NOW, None, ColdScope(cold, None) if cold else None, table_location)
    return OPERATIONS[operation].planned_sql(ref, policy[engine.section_of(operation)], context).sql


def cold_policy(where: str) -> dict[str, Any]:
    return engine.resolved({"compaction": {"cold_partitions_hours": 6, "where": where}})


@pytest.mark.parametrize("where", BYPASSES)
def test_planner_refuses_a_where_that_escapes_the_cold_scope(where: str) -> None:
    with pytest.raises(PolicyError, match=r"argument `where` is .*" + r"; it must"):
        planned_sql(TableRef("analytics", "events"), "rewrite_data_files", cold_policy(where), COLD)
    assert any(message.startswith("rewrite_data_files: argument `where` is ")
               for message in engine.errors(cold_policy(where)))


@pytest.mark.parametrize("where", ACCEPTED)
def test_planner_keeps_the_cold_scope_a_top_level_conjunct(where: str) -> None:
    assert engine.errors(cold_policy(where)) == []
    sql = planned_sql(TableRef("analytics", "events"), "rewrite_data_files", cold_policy(where), COLD)
    assert sql is not None
    assert_cold_is_a_top_level_conjunct(where_literal(sql), COLD)


@pytest.mark.parametrize(("ref", "argument"), [
    (TableRef("analytics", "events", "cat.system.expire_snapshots(table => 'x'); --"), "catalog"),
    (TableRef("analytics\n", "events"), "schema"),
    (TableRef("analytics", "events\n"), "identifier"),
    (TableRef("analytics", "ev'ents"), "identifier"),
])
def test_planner_refuses_names_that_are_not_identifiers(ref: TableRef, argument: str) -> None:
    with pytest.raises(PolicyError, match=f"`{argument}` is "):
        planned_sql(ref, "rewrite_manifests", engine.resolved({}))


def test_planner_holds_orphan_removal_to_the_floor_and_the_table_location() -> None:
    ref = TableRef("analytics", "events")
    young = engine.resolved({"remove_orphan_files": {"older_than_hours": 23}})
    with pytest.raises(PolicyError, match="argument `older_than_hours` is 23; it must be at least 24"):
        planned_sql(ref, "remove_orphan_files", young, table_location="file:/wh/analytics/events")
    for outside in ("/wh/analytics", "/wh/analytics/events-other", "file:/wh/analytics/events/../other"):
        policy = engine.resolved({"remove_orphan_files": {"location": outside}})
        with pytest.raises(PolicyError, match="argument `location` is .*must be the table's location"):
            planned_sql(ref, "remove_orphan_files", policy, table_location="file:/wh/analytics/events")
    inside = engine.resolved({"remove_orphan_files": {"location": "/wh/analytics/events/data"}})
    sql = planned_sql(ref, "remove_orphan_files", inside, table_location="file:///wh/analytics/events/")
    assert sql is not None and "location => '/wh/analytics/events/data'" in sql


def orphan_step(sql_arguments: str, table: str = "analytics.events") -> PlanStep:
    return PlanStep(table, "remove_orphan_files", "planned", "due",
                    f"CALL system.remove_orphan_files(table => '{table}'{sql_arguments})")


def hours_ago(hours: float) -> str:
    instant = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=hours)
    return "TIMESTAMP '" + instant.strftime("%Y-%m-%d %H:%M:%S") + "Z'"


@pytest.mark.parametrize(("step", "message"), [
    (orphan_step(f", older_than => {hours_ago(1)}"), "older_than"),
    (orphan_step(", older_than => TIMESTAMP '9999-12-31 23:59:59Z'"), "older_than"),
    (orphan_step(", older_than => current_timestamp()"), "older_than"),
    (orphan_step(f", older_than => {hours_ago(72)}, file_list_view => 'tmp.listing'"), "file_list_view"),
    (PlanStep("analytics.events", "rewrite_data_files", "planned", "due",
              "CALL system.rewrite_data_files(table => 'analytics.events', where => 'x = 1) or (true')"), "where"),
])
def test_replay_refuses_a_step_the_guards_would_refuse(step: PlanStep, message: str) -> None:
    with pytest.raises(IcebergMaintError, match=f"`{message}`"):
        replay([step])


def test_replay_passes_steps_the_guards_accept() -> None:
    step = orphan_step(f", older_than => {hours_ago(72)}, location => '/wh/analytics/events/data'")
    sql = planned_sql(TableRef("analytics", "events"), "rewrite_data_files", cold_policy("x = ')'"), COLD)
    assert sql is not None
    cold = PlanStep("analytics.events", "rewrite_data_files", "planned", "due", sql)
    args = replay([step, cold])
    assert [s["sql"] for s in json.loads(args[-1])["steps"]] == [step.sql, cold.sql]


def test_jdbc_uri_parameters_survive_the_translation() -> None:
    uri = sqlalchemy_uri("jdbc:postgresql://db.example:5432/ice?sslmode=require&currentSchema=iceberg"
                          "&ApplicationName=maint&connectTimeout=7&sslrootcert=/etc/ca.pem", "u", "p")
    assert uri.startswith("postgresql+psycopg2://u:p@db.example:5432/ice?")
    from urllib.parse import parse_qs, urlsplit

    query = parse_qs(urlsplit(uri).query)
    assert query == {"sslmode": ["require"], "options": ["-c search_path=iceberg"], "application_name": ["maint"],
                     "connect_timeout": ["7"], "sslrootcert": ["/etc/ca.pem"]}
    # user/password in the URI count like jdbc.user/jdbc.password; ssl=true means sslmode=require.
    assert sqlalchemy_uri("jdbc:postgresql://h/db?user=a&password=b%40c&ssl=true", None, None) == (
        "postgresql+psycopg2://a:b%40c@h/db?sslmode=require")
    with pytest.raises(IcebergMaintError, match="JDBC URI parameter `prepareThreshold`"):
        sqlalchemy_uri("jdbc:postgresql://h/db?prepareThreshold=0", None, None)


# ---- the macros -----------------------------------------------------------------------------

def render(target: Path, args: list[str], vars: dict[str, Any] | None = None) -> DbtInvocation:
    extra = ["--vars", json.dumps(vars)] if vars else []
    return invoke_dbt([*args, *extra, "--target-path", str(target)], env=ENV)


def cases(invocation: DbtInvocation) -> dict[str, dict[str, Any]]:
    outcomes = markers(invocation.log_messages, "ICEBERG_MAINT_CASE")
    return {outcome["id"]: outcome for outcome in outcomes}


def failure(invocation: DbtInvocation) -> str:
    assert not invocation.success, "expected a refusal"
    return " ".join(invocation.log_messages) + (invocation.exception or "")


@pytest.fixture(scope="module")
def target(render_target: Path) -> Path:
    return render_target


MACRO_CASES: list[dict[str, Any]] = [
    *({"id": f"where_bypass_{i}", "kind": "errors", "procedure": "rewrite_data_files", "kwargs": {"where": where}}
      for i, where in enumerate(BYPASSES)),
    *({"id": f"where_accepted_{i}", "kind": "errors", "procedure": "rewrite_data_files", "kwargs": {"where": where}}
      for i, where in enumerate(ACCEPTED)),
    *({"id": f"cold_{i}", "kind": "planned", "kwargs": {
        "relation": "analytics.events", "operation": "rewrite_data_files", "cold_scope": {"where": COLD},
        "policy": {"compaction": {"cold_partitions_hours": 6, "where": where}}}} for i, where in enumerate(ACCEPTED)),
    {"id": "policy_where_bypass", "kind": "policy_errors",
     "kwargs": {"policy": {"rewrite_position_delete_files": {"where": "x = 1) or (true"}}}},
    {"id": "steps_orphans", "kind": "step_errors", "kwargs": {"steps": [
        orphan_step(f", older_than => {hours_ago(1)}").to_dict(),
        orphan_step(", older_than => TIMESTAMP '9999-12-31 23:59:59Z'").to_dict(),
        orphan_step(f", older_than => {hours_ago(72)}, file_list_view => 'tmp.listing'").to_dict(),
        orphan_step(f", older_than => {hours_ago(72)}").to_dict(),
        orphan_step(f", older_than => {hours_ago(72)}, dry_run => true").to_dict()]}},
]


@pytest.fixture(scope="module")
def rendered(target: Path) -> dict[str, dict[str, Any]]:
    invocation = render(target, ["run-operation", "iceberg_maint_render_cases", "--args",
                                 json.dumps({"cases": MACRO_CASES})])
    assert invocation.success, invocation.exception
    return cases(invocation)


@pytest.mark.parametrize(("index", "where"), enumerate(BYPASSES))
def test_macro_where_guard_refuses_each_bypass(rendered: dict[str, dict[str, Any]], index: int, where: str) -> None:
    [message] = rendered[f"where_bypass_{index}"]["errors"]
    assert message.startswith(f"rewrite_data_files: argument `where` is {json.dumps(where)}; it must")
    # The Python paths' guard says exactly the same.
    assert guards.where_errors("rewrite_data_files", "where", where) == [message]


@pytest.mark.parametrize(("index", "where"), enumerate(ACCEPTED))
def test_macro_cold_scope_is_a_top_level_conjunct(rendered: dict[str, dict[str, Any]], index: int,
                                                  where: str) -> None:
    assert rendered[f"where_accepted_{index}"]["errors"] == []
    assert guards.where_errors("rewrite_data_files", "where", where) == []
    statement = rendered[f"cold_{index}"]["sql"]
    assert_cold_is_a_top_level_conjunct(where_literal(statement), COLD)
    # The Python planner renders the same CALL text.
    python = planned_sql(TableRef("analytics", "events"), "rewrite_data_files", cold_policy(where), COLD)
    assert python is not None and where_literal(python) == where_literal(statement)


def test_macro_policy_where_is_guarded(rendered: dict[str, dict[str, Any]]) -> None:
    [message] = rendered["policy_where_bypass"]["errors"]
    assert message.startswith('rewrite_position_delete_files: argument `where` is "x = 1) or (true"; it must')


def test_macro_replayed_orphan_steps_keep_the_floor(rendered: dict[str, dict[str, Any]]) -> None:
    errors = rendered["steps_orphans"]["errors"]
    assert [e.split(", step ", 1)[1].split(" ", 1)[0] for e in errors] == ["1", "2", "3"], errors
    assert "`older_than`" in errors[0] and "at least 24 h" in errors[0]
    assert "`older_than`" in errors[1]
    assert "`file_list_view`" in errors[2]


def test_macro_where_bypass_through_the_cold_combination_is_refused(target: Path) -> None:
    case = {"id": "x", "kind": "planned", "kwargs": {
        "relation": "analytics.events", "operation": "rewrite_data_files", "cold_scope": {"where": COLD},
        "policy": {"compaction": {"cold_partitions_hours": 6, "where": "x = 1) or (true"}}}}
    message = failure(render(target, ["run-operation", "iceberg_maint_render_cases", "--args",
                                      json.dumps({"cases": [case]})]))
    assert 'argument `where` is "x = 1) or (true"' in message


@pytest.mark.parametrize(("args", "vars", "message"), [
    ({"relation": "analytics.events"}, {"dbt_iceberg_maint_catalog": "cat.system.expire_snapshots(table => 'x'); --"},
     "var `dbt_iceberg_maint_catalog` is \"cat.system.expire_snapshots(table => 'x'); --\"; expected"),
    ({"relation": "analytics.events"}, {"dbt_iceberg_maint_catalog": "cat\n"}, "var `dbt_iceberg_maint_catalog` is"),
    ({"relation": "analytics.events\n"}, None, "argument `relation` is"),
    ({"relation": "analytics\n.events"}, None, "argument `relation` is"),
])
def test_macro_names_are_whole_identifiers(target: Path, args: dict[str, Any], vars: dict[str, Any] | None,
                                           message: str) -> None:
    invocation = render(target, ["run-operation", "dbt_iceberg_maint.get_rewrite_manifests_sql", "--args",
                                 json.dumps(args)], vars)
    assert message in failure(invocation)


def test_macro_file_list_view_name_is_a_whole_identifier(target: Path) -> None:
    invocation = render(target, ["run-operation", "dbt_iceberg_maint.get_remove_orphan_files_sql", "--args",
                                 json.dumps({"relation": "analytics.events", "file_list_view": "tmp.listing\n"})])
    assert "argument `file_list_view` is" in failure(invocation)


def test_ages_no_timestamp_can_be_computed_from_are_refused_like_the_macros_do() -> None:
    # Found by the fuzzer: 2**63 hours passed the checks and overflowed Python's datetime.
    huge = engine.resolved({"remove_orphan_files": {"older_than_hours": 2**63},
                              "expire_snapshots": {"older_than_hours": 876001}})
    assert engine.errors(huge) == [
        "expire_snapshots: argument `older_than_hours` is 876001; it must be at most 876000 (100 years)",
        f"remove_orphan_files: argument `older_than_hours` is {2**63}; it must be at most 876000 (100 years)"]


@pytest.mark.parametrize("location", ["/wh/analytics/events/data\n", " /wh/analytics/events", "/wh/a\n/../b"])
def test_an_orphan_location_is_checked_as_iceberg_will_list_it(location: str) -> None:
    # Found by the fuzzer: a trailing newline passed the (stripped) location check and reached the CALL.
    [error] = guards.orphan_location_errors("file:/wh/analytics/events", location)
    assert "expected a path or URI without surrounding whitespace or line breaks" in error
