"""The embedded runtime and the integration dbt project on real Spark + Iceberg."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.maintenance.health import health_via_dbt

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration


def test_session_creates_an_iceberg_table(spark: SparkSession, warehouse: Path) -> None:
    spark.sql("create namespace if not exists smoke")
    spark.sql("create or replace table smoke.t (id bigint, v string) using iceberg")
    spark.sql("insert into smoke.t values (1, 'a'), (2, 'b')")
    assert spark.sql("select count(*) from smoke.t").collect()[0][0] == 2
    provider = {r["col_name"]: r["data_type"] for r in spark.sql("describe extended smoke.t").collect()}
    assert provider["Provider"] == "iceberg"
    assert (warehouse / "smoke" / "t" / "metadata").is_dir()
    assert [r["operation"] for r in spark.sql("select operation from smoke.t.snapshots").collect()] == ["append"]


def test_the_suites_session_jvm_gets_the_suite_options(spark: SparkSession) -> None:
    """tests/conftest.py: the long-lived session JVM too compiles with C1 alone and skips the
    verification of the jars it loads (SUITE_JAVA_OPTIONS, from the environment)."""
    jvm = spark.sparkContext._jvm
    bean_class = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(bean_class)
    assert bean.getVMOption("TieredStopAtLevel").getValue() == "1"
    assert bean.getVMOption("BytecodeVerificationRemote").getValue() == "false"


def snapshot_operations(spark: SparkSession, table: str) -> list[str]:
    rows = spark.sql(f"select operation from {table}.snapshots order by committed_at").collect()
    return [row["operation"] for row in rows]


def test_project_builds_then_incremental_run_merges(spark: SparkSession, dbt_project: DbtProject) -> None:
    build = dbt_project("build", batch=1)
    statuses = {node.name: node.status for node in build.nodes}
    assert statuses["events"] == statuses["event_log"] == statuses["user_summary"] == "success"
    assert all(status in {"success", "pass"} for status in statuses.values()), statuses

    events = dbt_project.table("events")
    assert spark.sql(f"select count(*) from {events}").collect()[0][0] == 30
    first_snapshots = snapshot_operations(spark, events)
    corrected = spark.sql(
        f"select e.event_id, r.amount from {dbt_project.table('raw_events')} r "
        f"join {events} e on e.event_id = r.event_id where r.batch = 2"
    ).collect()
    assert len(corrected) == 5  # batch 2 corrects five events of batch 1

    dbt_project("run", batch=2)

    # The second run is a MERGE into the existing table: a new overwrite snapshot on top of the
    # old history (a `create or replace` would have restarted the history).
    operations = snapshot_operations(spark, events)
    assert operations == [*first_snapshots, "overwrite"]
    row = spark.sql(f"select count(*) as n, count(distinct event_id) as ids from {events}").collect()[0]
    assert row["n"] == row["ids"] == 60
    for event_id, amount in corrected:
        assert spark.sql(f"select amount from {events} where event_id = {event_id}").collect()[0][0] == amount

    # The append model really appended: 30 + 35 rows, the five corrections included.
    event_log = dbt_project.table("event_log")
    assert spark.sql(f"select count(*) from {event_log}").collect()[0][0] == 65
    assert snapshot_operations(spark, event_log)[-1] == "append"


def test_health_reads_metadata_tables(spark: SparkSession, dbt_project: DbtProject) -> None:
    dbt_project("run", "--select", "events", batch=3)
    [health] = health_via_dbt([f"{dbt_project.schema}.events"], env=dbt_project.env)
    files = spark.sql(f"select count(*) from {dbt_project.table('events')}.files").collect()[0][0]
    assert health.data_files == files > 0
    assert health.small_files == health.data_files  # every demo file is far below 512 MB
    assert health.records == 90
    assert health.snapshots >= 3
    assert health.manifests >= 1
    assert health.partitions == 10  # ten event days, one day partition each
