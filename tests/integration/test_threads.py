"""dbt `threads: 2`: two models lose real catalog races at the same moment; the runner re-runs both.

Each MERGE's commit waits for the lock of its table's next metadata version; only when both
writers are waiting does another job take both versions (tests/integration/concurrency.py), so
the two failures really overlap (with one thread the test fails, naming what never happened).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.runner import RunReport, run_dbt_with_retries
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT
from tests.expect import first
from tests.integration.concurrency import HADOOP_CATALOG, RACE_CATALOG, join_all, lose_catalog_race, other_job

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration
# The lost commit race staged here is the Hadoop catalog's (tests/integration/concurrency.py).
CATALOG_PROPERTIES = HADOOP_CATALOG

MODELS = ("threads_merge_a", "threads_merge_b")
TIMEOUT_SECONDS = 180.0


@pytest.fixture(scope="module")
def report(
    spark: SparkSession, warehouse: Path, dbt_project: DbtProject, tmp_path_factory: pytest.TempPathFactory
) -> RunReport:
    dbt_project("build", "--select", "raw_events", *MODELS, "--vars", "{threads_scenario: true, batch: 1}")
    job = other_job(spark, warehouse, tmp_path_factory.mktemp("threads"))
    folders = {m: warehouse.resolve() / dbt_project.schema / m / "metadata" for m in MODELS}
    races = [
        lose_catalog_race(spark, job, folders[m], f"{RACE_CATALOG}.{dbt_project.schema}.{m}", name=m,
                          timeout_seconds=TIMEOUT_SECONDS,
                          together_with=tuple(f for other, f in folders.items() if other != m))
        for m in MODELS
    ]
    try:
        result = run_dbt_with_retries(
            ["--select", *MODELS, "--vars", "{threads_scenario: true, batch: 2}"],
            command="run", max_attempts=2, project_dir=INTEGRATION_PROJECT,
            env={**dbt_project.env, "DBT_ICEBERG_MAINT_THREADS": "2"},
            backoff=lambda _attempt: 0.0, sleep=lambda _seconds: None,
        )
    finally:
        join_all(races, TIMEOUT_SECONDS)
    for race in races:
        race.check()
    return result


def test_both_threads_lost_at_once_and_both_were_re_run(report: RunReport, spark: SparkSession,
                                                        dbt_project: DbtProject) -> None:
    assert report.success and report.attempts == 2
    raw = spark.sql(f"select count(distinct event_id) from {dbt_project.table('raw_events')} "
                    "where batch <= 2").collect()[0][0]
    for model in MODELS:
        node = report.node(model)
        assert [a.kind for a in node.attempts] == ["commit_failed", None], model
        assert "already exists" in (first(node.attempts, f"an attempt of {model}").message or "")
        row = spark.sql(f"select count(*), count(distinct event_id) from {dbt_project.table(model)} "
                        "where loaded_batch = 2").collect()[0]
        assert (row[0], row[1]) == (raw, raw), model
