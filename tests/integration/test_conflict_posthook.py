"""A post-hook that loses a REAL commit conflict after the model's own write committed.

The runner applies the same rule as for the model's write: the idempotent model is re-run
(model and hook). For the append model, landed verification reads the table's snapshot log and
proves that the append landed (its snapshot was committed inside a statement of the node that
completed before the hook failed): the model is not re-run, because a re-run would load the
batch twice, and the report says so with the snapshot id.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.runner import RunReport, run_dbt_with_retries
from dbt_iceberg_maint.runtime._conflict_gate import ConflictGate, compaction_sql
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT
from dbt_iceberg_maint.runtime.spark import CatalogSpec, register_catalog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

SCENARIO = "{conflict_hook_scenario: true, batch: %d}"
AUDITS = {"conflict_hooked": "conflict_hooked_audit", "conflict_hooked_append": "conflict_hooked_append_audit"}


def count(spark: SparkSession, sql: str) -> int:
    return int(spark.sql(sql).collect()[0][0])


@pytest.fixture(scope="module")
def report(
    spark: SparkSession, warehouse: Path, dbt_project: DbtProject, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunReport]:
    gate = ConflictGate(tmp_path_factory.mktemp("hook_gate"))
    gate.register(spark)
    spark.sql(f"create namespace if not exists local.{dbt_project.schema}")
    for audit in AUDITS.values():
        spark.sql(f"create table {dbt_project.table(audit)} (event_id bigint, day date, loaded_batch int) "
                  "using iceberg partitioned by (day)")
    dbt_project("build", "--select", "raw_events", *AUDITS, "--vars", SCENARIO % 1)
    maintenance = spark.newSession()
    register_catalog(maintenance, CatalogSpec(warehouse=str(warehouse.resolve())))
    commits = []
    for audit in AUDITS.values():
        table = dbt_project.table(audit)
        for remainder in range(3):  # several small files per partition for the compaction
            spark.sql(f"insert into {table} select event_id + 100000, day, 0 from {table} "
                      f"where loaded_batch = 1 and event_id % 3 = {remainder}")
        gate.arm(audit)
        commits.append(gate.commit_when_reached(audit, maintenance, compaction_sql(table)))
    result = run_dbt_with_retries(
        ["--select", *AUDITS, "--vars", SCENARIO % 2],
        project_dir=INTEGRATION_PROJECT,
        env=dbt_project.env, backoff=lambda attempt: 0.1, sleep=lambda seconds: None,
    )
    for commit in commits:
        commit.join(timeout=60)
        assert commit.reached and commit.error is None, commit.error
    yield result
    for audit in AUDITS.values():
        gate.disarm(audit)


def test_idempotent_model_whose_post_hook_lost_is_re_run(
    report: RunReport, spark: SparkSession, dbt_project: DbtProject
) -> None:
    node = report.node("conflict_hooked")
    assert [a.status for a in node.attempts] == ["error", "success"]
    assert [a.kind for a in node.attempts] == ["missing_files_to_delete", None]
    raw = dbt_project.table("raw_events")
    expected = count(spark, f"select count(*) from {raw} where batch <= 2")
    assert count(spark, f"select count(*) from {dbt_project.table('conflict_hooked')}") == expected
    audit = dbt_project.table("conflict_hooked_audit")
    row = spark.sql(f"select count(*) as n, count(distinct event_id) as ids from {audit}").collect()[0]
    assert row["n"] == row["ids"]
    assert count(spark, f"select count(*) from {audit} where loaded_batch = 2") > 0  # the re-run hook landed


def test_append_model_whose_post_hook_lost_is_not_re_run(
    report: RunReport, spark: SparkSession, dbt_project: DbtProject
) -> None:
    node = report.node("conflict_hooked_append")
    assert [a.status for a in node.attempts] == ["error"]
    assert [a.kind for a in node.attempts] == ["missing_files_to_delete"]
    reason = node.not_rerun_reason or ""
    assert "not idempotent" in reason and "append" in reason
    assert reason.startswith("write landed; post-hook failed: missing_files_to_delete"), reason
    # The hook is a MERGE of the project's own, not this package's maintain(): not repeated alone.
    assert "its post-hook is not re-run" in reason and node.hook_rerun is None
    # The evidence is the append's own snapshot: the newest of the table, with batch 2's rows.
    raw = dbt_project.table("raw_events")
    table = dbt_project.table("conflict_hooked_append")
    document = node.to_dict()
    assert document["write_landed"] is True
    [newest] = spark.sql(f"select snapshot_id, operation, summary['added-records'] from {table}.snapshots "
                         "order by committed_at desc limit 1").collect()
    assert document["landed_evidence"]["snapshot_ids"] == [newest[0]]
    assert newest[1] == "append"
    assert int(newest[2]) == count(spark, f"select count(*) from {raw} where batch = 2")
    assert f"snapshot {newest[0]} (append" in reason
    # dbt reported an error, yet the append had landed: batch 2 is there exactly once. A blind
    # re-run (dbt retry) would have loaded it twice.
    assert count(spark, f"select count(*) from {table} where loaded_batch = 2") == count(
        spark, f"select count(*) from {raw} where batch = 2")
    assert report.exit_code == 1
