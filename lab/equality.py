"""Planner vs macros: run table_health + maintain(dry_run=true) through dbt for a list of
tables, plan the same tables from metadata, and return both sides normalised for comparison."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dbt_iceberg_maint import protocol
from dbt_iceberg_maint.maintenance.results import parse_result_lines
from dbt_iceberg_maint.metadata.catalog_tables import MetadataCatalog
from dbt_iceberg_maint.metadata.health import HEALTH_FIELDS, health_figures
from dbt_iceberg_maint.metadata.planner import plan_table
from dbt_iceberg_maint.metadata.project import ModelTarget
from dbt_iceberg_maint.metadata.reader import now_ms, read_summary
from dbt_iceberg_maint.policy import engine
from dbt_iceberg_maint.policy.gate import gate_reason
from dbt_iceberg_maint.policy.sql import TableRef
from dbt_iceberg_maint.runtime.invoke import DbtInvocation

ALL_OPERATIONS = list(protocol.OPERATIONS)
_TIMESTAMP = re.compile(r"TIMESTAMP '[^']*Z'")
_WHERE = re.compile(r"where => '(.*)'\)$")
_HOURS = re.compile(r"\d+\.\d+ h old")


def normalise_sql(sql: str | None) -> Any:
    """CALL text without its clock-dependent instants; a cold `where` as a set of OR terms
    (the macro keeps the partitions table's row order, the planner sorts)."""
    if sql is None:
        return None
    text = _TIMESTAMP.sub("TIMESTAMP <t>", sql)
    match = _WHERE.search(text)
    if match:
        return text[: match.start()], frozenset(match.group(1).split(" or "))
    return text


def normalise_reason(reason: str | None) -> str | None:
    if reason is None:
        return None
    return _HOURS.sub("<age> h old", reason.removeprefix("dry run: "))


def macro_side(run: Callable[..., DbtInvocation], cases: Sequence[Mapping[str, Any]]
               ) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str], tuple[Any, ...]]]:
    invocation = run("run-operation", "iceberg_maint_metadata_cases", "--args", json.dumps({"cases": list(cases)}))
    health: dict[str, dict[str, Any]] = {}
    plan: dict[tuple[str, str], tuple[Any, ...]] = {}
    for payload in protocol.marker_payloads(invocation.log_messages, "ICEBERG_MAINT_GATE"):
        line = json.loads(payload)
        plan[(line["table"], "gate:" + json.dumps(line["check"], sort_keys=True))] = (line["reason"],)
    # The first tier read for all cases in one statement (iceberg_maintenance) equals each read alone.
    summaries = [json.loads(p) for p in protocol.marker_payloads(invocation.log_messages, "ICEBERG_MAINT_SUMMARIES")]
    assert len(summaries) == 1 and summaries[0]["many"] == summaries[0]["single"], summaries
    for result in parse_result_lines(invocation.log_messages):
        if result.operation == "table_health":
            health[result.table] = dict(result.metrics)
        else:
            plan[(result.table, result.operation)] = (
                result.status, normalise_reason(result.reason), normalise_sql(result.sql))
    return health, plan


def planner_side(catalog: MetadataCatalog, cases: Sequence[Mapping[str, Any]]
                 ) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str], tuple[Any, ...]]]:
    """`relation` is 'schema.table', or 'catalog.schema.table' for a named catalog."""
    health: dict[str, dict[str, Any]] = {}
    plan: dict[tuple[str, str], tuple[Any, ...]] = {}
    for case in cases:
        qualified = case["relation"]
        *prefix, schema, identifier = qualified.split(".")
        catalog_prefix = prefix[0] if prefix else None
        table = catalog.load(f"{schema}.{identifier}")
        figures, _ = health_figures(qualified, table)
        health[qualified] = {k: figures[k] for k in HEALTH_FIELDS}
        target = ModelTarget(qualified, TableRef(schema, identifier, catalog_prefix), {})
        rows, _tiers = plan_table(target, table, case.get("operations"), overrides=case.get("policy"))
        for row in rows:
            plan[(row.table, row.operation)] = (row.status, normalise_reason(row.reason), normalise_sql(row.sql))
        for check in case.get("gates") or []:
            gate = {**engine.COST_GATE_DEFAULTS, **check["gate"]}
            reason = gate_reason(check["operation"], gate, read_summary(table).snapshots, now_ms(),
                                 check.get("cold_partitions_hours"))
            plan[(qualified, "gate:" + json.dumps(check, sort_keys=True))] = (reason,)
    return health, plan


def cases_for(tables: Sequence[str]) -> list[dict[str, Any]]:
    """Policies that make every operation's threshold reachable on small test tables."""
    policies: dict[str, dict[str, Any]] = {
        "many_snapshots": {"expire_snapshots": {"older_than_hours": 0.0001, "retain_last": 3}},
        "gc_disabled": {"expire_snapshots": {"older_than_hours": 0.0001, "retain_last": 2}},
        "cold_days": {"compaction": {"cold_partitions_hours": 0.0002, "min_input_files": 2}},
        "evolved": {"compaction": {"min_input_files": 2}, "rewrite_manifests": {"min_manifests": 3}},
        "unpartitioned": {"compaction": {"min_input_files": 3}},
        "deletes": {"rewrite_position_delete_files": {"min_input_files": 3}},
        "deletion_vectors": {"compaction": {"min_input_files": 3}, "rewrite_manifests": {"min_manifests": 3}},
        "maintained": {"compaction": {"min_input_files": 2}},
    }
    gates = [
        {"operation": "rewrite_manifests", "gate": {"skip_unchanged": True}},
        {"operation": "expire_snapshots", "gate": {"skip_unchanged": True}},
        {"operation": "remove_orphan_files", "gate": {"min_interval_hours": 24}},
        {"operation": "rewrite_data_files", "gate": {"min_new_records": 10}},
        {"operation": "rewrite_data_files", "gate": {"skip_unchanged": True}, "cold_partitions_hours": 1.0},
    ]
    gated = ("maintained", "small_files")
    return [{"relation": t, "operations": ALL_OPERATIONS, "policy": policies.get(t.split(".")[-1], {}),
             "gates": gates if t.split(".")[-1] in gated else []} for t in tables]


def assert_same_health(macro_health: Mapping[str, Any], planner_health: Mapping[str, Any],
                       tables: Sequence[str]) -> None:
    """The planner's health figures equal table_health's for every table; both ages are "now -
    oldest commit", read a few seconds apart, so they agree to 0.05 h."""
    assert set(planner_health) == set(macro_health) == set(tables)
    for table in tables:
        expected, actual = dict(macro_health[table]), dict(planner_health[table])
        expected_age, actual_age = expected.pop("oldest_snapshot_age_hours"), actual.pop("oldest_snapshot_age_hours")
        assert (expected_age is None) == (actual_age is None), table
        if expected_age is not None:
            assert abs(actual_age - expected_age) <= 0.05, (table, actual_age, expected_age)
        assert actual == expected, table
