"""The runner on REAL conflicts: dbt MERGE models lose to a concurrent `rewrite_data_files`.

A Python UDF in the models' source holds each MERGE between planning and commit until a
compaction, run from a separate Spark session (another job, as users meet it), has replaced the
files the MERGE read. Iceberg then aborts the MERGE with `Missing required files to delete`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint._conflict_gate import (
    SCENARIO_MODELS,
    ConcurrentCommit,
    ConflictGate,
    add_small_files,
    compaction_sql,
)
from dbt_iceberg_maint.invoke import INTEGRATION_PROJECT
from dbt_iceberg_maint.runner import RunReport, run_dbt_with_retries
from dbt_iceberg_maint.spark import CatalogSpec, register_catalog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

SCENARIO = "{conflict_scenario: true, batch: %d}"
MODELS = SCENARIO_MODELS


def maintenance_session(spark: SparkSession, warehouse: Path) -> SparkSession:
    """Another job's session: its own catalog instance over the same warehouse."""
    session = spark.newSession()
    register_catalog(session, CatalogSpec(warehouse=str(warehouse.resolve())))
    return session


@dataclass(frozen=True)
class Scenario:
    report: RunReport
    commits: dict[str, ConcurrentCommit]
    snapshots_before: dict[str, list[int]]
    rows_before: dict[str, int]


def snapshot_ids(spark: SparkSession, table: str) -> list[int]:
    return [r[0] for r in spark.sql(f"select snapshot_id from {table}.snapshots order by committed_at").collect()]


@pytest.fixture(scope="module")
def scenario(
    spark: SparkSession, warehouse: Path, dbt_project: DbtProject, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scenario]:
    gate = ConflictGate(tmp_path_factory.mktemp("gate"))
    gate.register(spark)
    dbt_project("build", "--select", "raw_events", *MODELS, "--vars", SCENARIO % 1)
    for model in MODELS:
        # Several small files in every partition the MERGE touches, so that the compaction
        # really replaces files the MERGE reads.
        add_small_files(spark, dbt_project.table(model))
    snapshots_before = {m: snapshot_ids(spark, dbt_project.table(m)) for m in MODELS}
    rows_before = {m: spark.sql(f"select count(*) from {dbt_project.table(m)}").collect()[0][0] for m in MODELS}

    maintenance = maintenance_session(spark, warehouse)
    commits = {}
    for model in MODELS:
        gate.arm(model)
        commits[model] = gate.commit_when_reached(model, maintenance, compaction_sql(dbt_project.table(model)))
    waits: list[float] = []
    report = run_dbt_with_retries(
        ["--select", "path:models/conflicts", "--vars", SCENARIO % 2],
        command="run",
        max_attempts=3,
        project_dir=INTEGRATION_PROJECT,
        env=dbt_project.env,
        backoff=lambda attempt: 0.2 * attempt,
        sleep=waits.append,
    )
    for commit in commits.values():
        commit.join(timeout=60)
    yield Scenario(report, commits, snapshots_before, rows_before)
    for model in MODELS:
        gate.disarm(model)


def test_compactions_really_ran_concurrently(scenario: Scenario, spark: SparkSession, dbt_project: DbtProject) -> None:
    for model, commit in scenario.commits.items():
        assert commit.reached and commit.error is None, (model, commit.error)
        rewritten = commit.results[0][0]  # rewritten_data_files_count
        assert rewritten > 4
        operations = [r[0] for r in spark.sql(
            f"select operation from {dbt_project.table(model)}.snapshots order by committed_at").collect()]
        assert "replace" in operations


def test_idempotent_merge_is_classified_and_re_run_with_its_skipped_child(
    scenario: Scenario, spark: SparkSession, dbt_project: DbtProject
) -> None:
    merge = scenario.report.node("conflict_merge")
    assert [a.status for a in merge.attempts] == ["error", "success"]
    assert [a.kind for a in merge.attempts] == ["missing_files_to_delete", None]
    assert "Missing required files to delete" in (merge.attempts[0].message or "")
    assert merge.not_rerun_reason is None

    child = scenario.report.node("conflict_merge_child")
    assert [a.status for a in child.attempts] == ["skipped", "success"]

    # The data is what one clean run gives: batch 2 merged once, no duplicates.
    table = dbt_project.table("conflict_merge")
    raw = dbt_project.table("raw_events")
    row = spark.sql(f"select count(*) as n, count(distinct event_id) as ids from {table}").collect()[0]
    new_ids = spark.sql(
        f"select count(distinct event_id) from {raw} where batch = 2 and event_id not in "
        f"(select event_id from {raw} where batch = 1)"
    ).collect()[0][0]
    assert row["n"] == row["ids"] == scenario.rows_before["conflict_merge"] + new_ids
    mismatched = spark.sql(
        f"select r.event_id from {raw} r join {table} t on t.event_id = r.event_id "
        "where r.batch = 2 and (t.amount <> r.amount or t.loaded_batch <> 2)"
    ).collect()
    assert mismatched == []
    child_row = spark.sql(f"select row_count, event_ids from {dbt_project.table('conflict_merge_child')}").collect()[0]
    assert child_row["row_count"] == child_row["event_ids"] == row["n"]


def test_same_conflict_on_a_non_idempotent_model_is_reported_not_re_run(
    scenario: Scenario, spark: SparkSession, dbt_project: DbtProject
) -> None:
    unsafe = scenario.report.node("conflict_merge_unsafe")
    assert [a.status for a in unsafe.attempts] == ["error"]
    assert [a.kind for a in unsafe.attempts] == ["missing_files_to_delete"]
    assert "not idempotent" in (unsafe.not_rerun_reason or "")
    assert "meta.iceberg_maint.idempotent: false" in (unsafe.not_rerun_reason or "")
    # Nothing of the MERGE landed: the last commit is the compaction's, the rows are unchanged.
    table = dbt_project.table("conflict_merge_unsafe")
    snapshots = snapshot_ids(spark, table)
    assert snapshots[: len(scenario.snapshots_before["conflict_merge_unsafe"])] == scenario.snapshots_before[
        "conflict_merge_unsafe"
    ]
    assert len(snapshots) == len(scenario.snapshots_before["conflict_merge_unsafe"]) + 1  # the compaction
    assert spark.sql(f"select count(*) from {table}").collect()[0][0] == scenario.rows_before["conflict_merge_unsafe"]


def test_sql_error_is_not_re_run_and_the_run_reports_failure(scenario: Scenario) -> None:
    broken = scenario.report.node("conflict_sql_error")
    assert [a.status for a in broken.attempts] == ["error"]
    assert [a.kind for a in broken.attempts] == ["not_iceberg_conflict"]
    assert (broken.not_rerun_reason or "").startswith("not_iceberg_conflict")
    assert scenario.report.attempts == 2
    assert scenario.report.exit_code == 1
    # Nodes that succeeded the first time are never re-run; only the selected ones ran again.
    assert {n.name for n in scenario.report.nodes if len(n.attempts) > 1} == {"conflict_merge", "conflict_merge_child"}
