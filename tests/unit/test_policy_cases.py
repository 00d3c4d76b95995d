"""The shared policy case table (tests/policy_cases.yml) against both policy engines.

The Python engine (dbt_iceberg_maint/policy/) runs each case directly; the macros run them all in
one `dbt run-operation` of the harness (integration_tests/macros/iceberg_maint_harness.sql,
`iceberg_maint_plan_case`), rendered without Spark. Each side must give the case's expected
errors or steps, so a change to one engine that the other does not make fails here in seconds.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from dbt_iceberg_maint import protocol
from dbt_iceberg_maint.policy import engine
from dbt_iceberg_maint.policy.gate import GateSnapshot
from dbt_iceberg_maint.policy.operation_types import ColdScope
from dbt_iceberg_maint.policy.operations import OPERATIONS
from dbt_iceberg_maint.policy.sql import TableRef
from tests.expect import markers
from tests.unit.test_procedure_sql import render

TABLE = Path(__file__).parents[1] / "policy_cases.yml"
DOCUMENT = yaml.safe_load(TABLE.read_text())
CASES: list[dict[str, Any]] = DOCUMENT["cases"]
_LITERAL = re.compile(r"TIMESTAMP '(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)Z'")
# A cut-off the plan took from the clock is within this of `now - <whole hours>`.
CLOCK_TOLERANCE = dt.timedelta(minutes=2)


def facts_of(case: Mapping[str, Any]) -> dict[str, Any]:
    facts = {**DOCUMENT["defaults"]["facts"], **(case.get("facts") or {})}
    facts["health"] = {**DOCUMENT["defaults"]["facts"]["health"], **((case.get("facts") or {}).get("health") or {})}
    return facts


class CaseFacts:
    """The engine's TableFacts from a case's data."""

    def __init__(self, facts: Mapping[str, Any]) -> None:
        self.facts = facts

    def gc_enabled(self) -> bool:
        return bool(self.facts["gc_enabled"])

    def data_files(self) -> int | None:
        return self.facts["data_files"]

    def delete_files(self) -> int | None:
        return self.facts["delete_files"]

    def table_bytes(self) -> int | None:
        return self.facts["table_bytes"]

    def health(self, operation: str) -> Mapping[str, Any]:
        return {**self.facts["health"], "table_age_hours": self.facts["table_age_hours"]}

    def cold_scope(self, hours: float) -> ColdScope:
        scope = self.facts["cold_scope"]
        assert scope is not None, "a case with cold_partitions_hours gives its cold_scope"
        return ColdScope(scope["where"], scope["max_small_files"], scope.get("max_delete_ratio"),
                         scope.get("partitioned", True))

    def snapshots(self) -> list[GateSnapshot]:
        return [GateSnapshot.from_row(row) for row in self.facts["snapshots"]]

    def snapshots_now_ms(self) -> int:
        return int(self.facts["now_ms"])

    def location(self) -> str | None:
        return None

    def checked_hours_ago(self, operation: str) -> float | None:
        return (self.facts.get("checked_hours_ago") or {}).get(operation)

    def unchanged_since_check(self, operation: str) -> int | None:
        return (self.facts.get("unchanged_since_checked") or {}).get(operation)


def python_outcome(case: Mapping[str, Any], now: dt.datetime) -> dict[str, Any]:
    errors = engine.shape_errors(case.get("policy")) + engine.shape_errors(case.get("overrides"),
                                                                            "maintain: argument `policy`")
    if errors:
        return {"errors": errors}
    policy = engine.resolved(case.get("policy"), case.get("overrides"))
    errors = engine.errors(policy)
    if errors:
        return {"errors": errors}
    facts = facts_of(case)
    as_of = case.get("as_of")
    steps = engine.plan_steps(
        TableRef.parse(case.get("table", "analytics.events")), engine.requested_operations(case.get("operations")),
        policy, CaseFacts(facts) if facts["exists"] else None, now, project_enabled=facts["project_enabled"],
        force=case.get("force", False), as_of=dt.datetime.fromisoformat(as_of).replace(tzinfo=dt.timezone.utc)
        if as_of else None, required=facts["required"], table_format=facts["table_format"])
    return {"steps": [step.to_dict() for step in steps]}


def clock_free(sql: str | None, now: dt.datetime) -> str | None:
    """`{now-<h>h}` for each cut-off within CLOCK_TOLERANCE of `now` minus whole hours."""
    if sql is None:
        return None

    def relative(match: re.Match[str]) -> str:
        instant = dt.datetime.fromisoformat(match.group(1)).replace(tzinfo=dt.timezone.utc)
        if instant >= now:  # a fixed instant (no age limit's 9999-12-31), not taken from the clock
            return match.group(0)
        hours = round((now - instant).total_seconds() / 3600)
        close = abs(now - dt.timedelta(hours=hours) - instant) <= CLOCK_TOLERANCE
        return f"{{now-{hours}h}}" if close and 0 < hours else match.group(0)

    return _LITERAL.sub(relative, sql)


def takes_the_clock(case: Mapping[str, Any], operation: str) -> bool:
    """Whether a step's cut-off comes from the wall clock: the orphan window always; expiry
    unless the plan has an as_of or the policy an absolute older_than (then it is exact)."""
    if operation == "remove_orphan_files":
        return True
    expire = (case.get("policy") or {}).get("expire_snapshots") if isinstance(case.get("policy"), Mapping) else None
    absolute = isinstance(expire, Mapping) and expire.get("older_than") is not None
    return operation == "expire_snapshots" and case.get("as_of") is None and not absolute


def comparable(outcome: Mapping[str, Any], now: dt.datetime, case: Mapping[str, Any]) -> dict[str, Any]:
    if "errors" in outcome:
        return {"errors": list(outcome["errors"])}
    rows = []
    for step in outcome["steps"]:
        assert step["table"] == qualified(case)
        sql = clock_free(step["sql"], now) if takes_the_clock(case, step["operation"]) else step["sql"]
        rows.append([step["operation"], step["status"], step["reason"], sql])
    return {"steps": rows}


def qualified(case: Mapping[str, Any]) -> str:
    return case.get("table", "analytics.events")


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_python_engine(case: dict[str, Any]) -> None:
    now = dt.datetime.now(dt.timezone.utc)
    assert comparable(python_outcome(case, now), now, case) == case["expect"]


@pytest.fixture(scope="module")
def macro_outcomes(render_target: Path) -> dict[str, Any]:
    cases = [{**case, "kind": "plan_case", "facts": facts_of(case)} for case in CASES]
    cases.append({"id": "_defaults", "kind": "policy"})
    invocation = render(["run-operation", "iceberg_maint_render_cases", "--args", json.dumps({"cases": cases})],
                        render_target)
    assert invocation.success, invocation.exception
    outcomes = markers(invocation.log_messages, "ICEBERG_MAINT_CASE")
    return {outcome["id"]: outcome for outcome in outcomes}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_macros(case: dict[str, Any], macro_outcomes: dict[str, Any]) -> None:
    outcome = macro_outcomes[case["id"]]
    now = dt.datetime.fromisoformat(outcome["now"]) if "now" in outcome else dt.datetime.now(dt.timezone.utc)
    assert comparable(outcome, now, case) == case["expect"]


def test_every_case_says_what_it_expects() -> None:
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids))
    for case in CASES:
        assert set(case["expect"]) in ({"errors"}, {"steps"}), case["id"]


def test_the_table_covers_every_policy_key_and_operation() -> None:
    """Every key of every section is set by some case, and every operation is planned by one."""
    given: set[str] = set()
    for case in CASES:
        for layer in (case.get("policy"), case.get("overrides")):
            if isinstance(layer, Mapping):
                for key, value in layer.items():
                    given.add(key)
                    if isinstance(value, Mapping):
                        given.update(f"{key}.{name}" for name in value)
    defaults = engine.defaults()
    wanted = {key for key in defaults} | set(protocol.POLICY_OTHER_KEYS)
    wanted |= {f"{key}.{name}" for key, section in defaults.items() if isinstance(section, dict) for name in section}
    assert wanted - given == set()
    planned = {step[0] for case in CASES for step in case["expect"].get("steps", []) if step[1] == "planned"}
    assert planned == set(protocol.OPERATIONS)


def test_every_operation_is_registered_on_both_sides(macro_outcomes: dict[str, Any]) -> None:
    """Each protocol operation has its Python policy defaults, checks, due rule and SQL, its macros
    have theirs, and the macros' resolved defaults equal the Python engine's."""
    assert set(OPERATIONS) == set(protocol.OPERATIONS)
    for name, operation in OPERATIONS.items():
        assert name == operation.name and operation.defaults["enabled"] is True
    macros = Path(__file__).parents[2] / "macros" / "procedures"
    for name in protocol.OPERATIONS:
        text = (macros / f"{name}.sql").read_text()
        for part in ("defaults", "policy_errors", "due", "planned_sql"):
            assert f"macro _iceberg_maint_{name}_{part}(" in text, (name, part)
        assert f"macro get_{name}_sql(" in text, name
    assert macro_outcomes["_defaults"]["value"] == engine.defaults()
