"""The runner on REAL conflicts: dbt MERGE models lose to a concurrent `rewrite_data_files`.

A Python UDF in the models' source holds each MERGE between planning and commit until a
compaction, run from a separate Spark session (another job, as users meet it), has replaced the
files the MERGE read. Iceberg then aborts the MERGE with `Missing required files to delete`.
Landed verification (dbt_iceberg_maint/runner/landed.py) then proves from the snapshot log that the
MERGE of the model declared not idempotent did not land, so it is re-run too; the contested
model's MERGE loses to an append by another session of the same application, which makes the
log undecidable, so it is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.runner import RunReport, run_dbt_with_retries
from dbt_iceberg_maint.runtime._conflict_gate import (
    SCENARIO_MODELS,
    ConcurrentCommit,
    ConflictGate,
    add_small_files,
    compaction_sql,
)
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT
from dbt_iceberg_maint.runtime.spark import CatalogSpec, register_catalog
from tests.expect import first

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

SCENARIO = "{conflict_scenario: true, conflict_contested: true, batch: %d}"
CONTESTED = "conflict_merge_contested"
MODELS = (*SCENARIO_MODELS, CONTESTED)


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
    contested_append: int  # rows the other writer appended to the contested model's table


def snapshot_ids(spark: SparkSession, table: str) -> list[int]:
    return [r[0] for r in spark.sql(f"select snapshot_id from {table}.snapshots order by committed_at").collect()]


@pytest.fixture(scope="module")
def scenario(
    spark: SparkSession, warehouse: Path, dbt_project: DbtProject, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scenario]:
    gate = ConflictGate(tmp_path_factory.mktemp("gate"))
    gate.register(spark)
    dbt_project("build", "--select", "raw_events", *MODELS, "--vars", SCENARIO % 1)
    for model in SCENARIO_MODELS:
        # Several small files in every partition the MERGE touches, so that the compaction
        # really replaces files the MERGE reads.
        add_small_files(spark, dbt_project.table(model))
    snapshots_before = {m: snapshot_ids(spark, dbt_project.table(m)) for m in MODELS}
    rows_before = {m: spark.sql(f"select count(*) from {dbt_project.table(m)}").collect()[0][0] for m in MODELS}

    maintenance = maintenance_session(spark, warehouse)
    commits = {}
    for model in SCENARIO_MODELS:
        gate.arm(model)
        commits[model] = gate.commit_when_reached(model, maintenance, compaction_sql(dbt_project.table(model)))
    contested = dbt_project.table(CONTESTED)
    appended = spark.sql(f"select count(*) from {contested} where loaded_batch = 1 and event_id % 5 = 0").first()[0]
    gate.arm(CONTESTED)
    commits[CONTESTED] = gate.commit_when_reached(CONTESTED, maintenance, (
        f"insert into {contested} select event_id + 200000, user_id, event_type, event_ts, amount, 0 "
        f"from {contested} where loaded_batch = 1 and event_id % 5 = 0"))
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
    for model, commit in commits.items():
        commit.join(timeout=60)
        assert not commit.thread.is_alive(), f"the concurrent commit on {model} did not end within 60 s"
    yield Scenario(report, commits, snapshots_before, rows_before, appended)
    for model in MODELS:
        gate.disarm(model)


def test_compactions_really_ran_concurrently(scenario: Scenario, spark: SparkSession, dbt_project: DbtProject) -> None:
    for model in SCENARIO_MODELS:
        commit = scenario.commits[model]
        assert commit.reached and commit.error is None, (model, commit.error)
        rewritten = first(commit.results, f"the compaction result on {model}")[0]  # rewritten_data_files_count
        assert rewritten > 4
        operations = [r[0] for r in spark.sql(
            f"select operation from {dbt_project.table(model)}.snapshots order by committed_at").collect()]
        assert "replace" in operations


def assert_merged_once(spark: SparkSession, dbt_project: DbtProject, model: str, rows_before: int) -> int:
    """The data is what one clean run gives: batch 2 merged once, no duplicates. Returns the row count."""
    table = dbt_project.table(model)
    raw = dbt_project.table("raw_events")
    row = spark.sql(f"select count(*) as n, count(distinct event_id) as ids from {table}").collect()[0]
    new_ids = spark.sql(
        f"select count(distinct event_id) from {raw} where batch = 2 and event_id not in "
        f"(select event_id from {raw} where batch = 1)"
    ).collect()[0][0]
    assert row["n"] == row["ids"] == rows_before + new_ids
    mismatched = spark.sql(
        f"select r.event_id from {raw} r join {table} t on t.event_id = r.event_id "
        "where r.batch = 2 and (t.amount <> r.amount or t.loaded_batch <> 2)"
    ).collect()
    assert mismatched == []
    return int(row["n"])


def test_idempotent_merge_is_classified_and_re_run_with_its_skipped_child(
    scenario: Scenario, spark: SparkSession, dbt_project: DbtProject
) -> None:
    merge = scenario.report.node("conflict_merge")
    assert [a.status for a in merge.attempts] == ["error", "success"]
    assert [a.kind for a in merge.attempts] == ["missing_files_to_delete", None]
    assert "Missing required files to delete" in (first(merge.attempts, "an attempt of the MERGE").message or "")
    assert merge.not_rerun_reason is None

    child = scenario.report.node("conflict_merge_child")
    assert [a.status for a in child.attempts] == ["skipped", "success"]

    rows = assert_merged_once(spark, dbt_project, "conflict_merge", scenario.rows_before["conflict_merge"])
    child_row = spark.sql(f"select row_count, event_ids from {dbt_project.table('conflict_merge_child')}").collect()[0]
    assert child_row["row_count"] == child_row["event_ids"] == rows


def test_non_idempotent_merge_verified_not_landed_is_re_run_and_merged_once(
    scenario: Scenario, spark: SparkSession, dbt_project: DbtProject
) -> None:
    unsafe = scenario.report.node("conflict_merge_unsafe")
    assert [a.status for a in unsafe.attempts] == ["error", "success"]
    assert [a.kind for a in unsafe.attempts] == ["missing_files_to_delete", None]
    assert unsafe.not_rerun_reason is None and unsafe.final_status == "success"
    # The evidence: the snapshot current before the attempt, and since then only the compaction
    # (a `replace` of the same application, which changes no rows).
    document = unsafe.to_dict()
    assert document["write_landed"] is False
    evidence = document["landed_evidence"]
    before = scenario.snapshots_before["conflict_merge_unsafe"]
    assert evidence["recorded_snapshot_id"] == before[-1]
    assert evidence["snapshot_ids"] == []
    table = dbt_project.table("conflict_merge_unsafe")
    compaction = spark.sql(f"select snapshot_id from {table}.snapshots where operation = 'replace'").collect()
    assert len(compaction) == 1
    assert "no data-changing snapshot of this application" in evidence["why"]
    assert f"{compaction[0][0]} (replace" in evidence["why"]
    # Re-run once: the log is the old one, the compaction, then exactly one MERGE.
    snapshots = snapshot_ids(spark, table)
    assert snapshots[: len(before)] == before and len(snapshots) == len(before) + 2
    assert_merged_once(spark, dbt_project, "conflict_merge_unsafe", scenario.rows_before["conflict_merge_unsafe"])


def test_undecidable_when_the_same_application_wrote_meanwhile_is_refused(
    scenario: Scenario, spark: SparkSession, dbt_project: DbtProject
) -> None:
    commit = scenario.commits[CONTESTED]
    assert commit.reached and commit.error is None, commit.error
    node = scenario.report.node(CONTESTED)
    assert [a.status for a in node.attempts] == ["error"]
    [kind] = [a.kind for a in node.attempts]
    assert kind == "conflicting_added_files", first(node.attempts, f"an attempt of {CONTESTED}").message
    document = node.to_dict()
    assert document["write_landed"] is None
    table = dbt_project.table(CONTESTED)
    appends = spark.sql(f"select snapshot_id from {table}.snapshots where operation = 'append' "
                        f"and summary['added-records'] = '{scenario.contested_append}'").collect()
    assert len(appends) == 1
    assert document["landed_evidence"]["snapshot_ids"] == [appends[0][0]]
    reason = node.not_rerun_reason or ""
    assert "not idempotent" in reason and "cannot be decided" in reason, reason
    assert str(appends[0][0]) in reason
    # Refused: the MERGE did not land and nothing of batch 2 is there; the other writer's rows are.
    assert spark.sql(f"select count(*) from {table} where loaded_batch = 2").collect()[0][0] == 0
    appended = spark.sql(f"select count(*) from {table} where loaded_batch = 0").collect()[0][0]
    assert appended == scenario.contested_append


def test_sql_error_is_not_re_run_and_the_run_reports_failure(scenario: Scenario) -> None:
    broken = scenario.report.node("conflict_sql_error")
    assert [a.status for a in broken.attempts] == ["error"]
    assert [a.kind for a in broken.attempts] == ["not_iceberg_conflict"]
    assert (broken.not_rerun_reason or "").startswith("not_iceberg_conflict")
    assert scenario.report.attempts == 2
    assert scenario.report.exit_code == 1
    # Nodes that succeeded the first time are never re-run; only the selected ones ran again.
    assert {n.name for n in scenario.report.nodes if len(n.attempts) > 1} == {
        "conflict_merge", "conflict_merge_child", "conflict_merge_unsafe"}
