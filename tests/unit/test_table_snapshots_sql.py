"""The SQL behind the `table_snapshots` macro (landed verification), rendered by dbt without Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dbt_iceberg_maint.runtime.invoke import DbtInvocation, invoke_dbt
from tests.expect import markers

ENV = {"DBT_ICEBERG_MAINT_SCHEMA": "analytics"}
SQL = ("select snapshot_id, parent_id, unix_millis(committed_at) as committed_at_ms, operation, "
       "coalesce(summary['spark.app.id'], summary['app-id']) as app_id, summary['added-records'] as "
       "added_records, summary['deleted-records'] as deleted_records, coalesce(snapshot_id = (select "
       "max(snapshot_id) from analytics.events.refs where name = 'main'), false) as is_current from "
       "analytics.events.snapshots order by committed_at, snapshot_id")


def render(target: Path, cases: list[dict[str, Any]]) -> DbtInvocation:
    return invoke_dbt(["run-operation", "iceberg_maint_render_snapshot_sql", "--args", json.dumps({"cases": cases}),
                       "--target-path", str(target)], env=ENV)


@pytest.fixture(scope="module")
def target(render_target: Path) -> Path:
    return render_target


def test_the_whole_log_with_parents_and_the_main_ref(target: Path) -> None:
    # Lineage needs every snapshot and its parent; no filter on commit time (landed.py).
    invocation = render(target, [{"id": "log", "relation": "analytics.events"}])
    assert invocation.success, invocation.exception
    rendered = {case["id"]: " ".join(case["sql"].split())
                for case in markers(invocation.log_messages, "ICEBERG_MAINT_SNAPSHOT_SQL")}
    assert rendered == {"log": SQL}


@pytest.mark.parametrize("relation", ["analytics.events; drop table analytics.events", "analytics.events\n"])
def test_a_relation_that_is_not_a_table_name_is_refused(target: Path, relation: str) -> None:
    invocation = render(target, [{"id": "bad", "relation": relation}])
    assert not invocation.success
    logged = " ".join("\n".join(invocation.log_messages).split())  # the message spans log lines
    said = " ".join(f"argument `relation` is '{relation}'; expected 'table', 'schema.table'".split())
    assert said in logged, logged
