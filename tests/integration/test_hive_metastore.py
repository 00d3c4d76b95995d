"""What only a Hive catalog does, on a real Hive Metastore (lab/hive_metastore.py): dbt's tables are
the metastore's, and a commit that loses the metastore's lock race, or times out waiting for that
lock, fails with the Hive catalog's own text, is classified, verified not landed and re-run by the
runner.

The other integration checks run on this metastore too: every module naming
`CATALOGS = ("embedded", "hive_metastore")` runs once per catalog (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pyiceberg.catalog import load_catalog

from dbt_iceberg_maint.conflicts import classify
from dbt_iceberg_maint.metadata.catalog import config_from_options, open_catalog
from dbt_iceberg_maint.runner import run_dbt_with_retries
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT
from tests.expect import first
from tests.integration.metastore_locks import HeldTableLock

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dbt_iceberg_maint.runtime._conflict_gate import ConflictGate
    from lab.hive_metastore import HiveMetastore
    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration
CATALOGS = ("hive_metastore",)

FAILURES = Path(__file__).resolve().parents[1] / "unit" / "failures"
FIXTURE = FAILURES / "hive_metastore__base_metadata_location_lost_race"
RECORD = os.environ.get("DBT_ICEBERG_MAINT_RECORD") == "1"
SCENARIO = "{conflict_scenario: true, batch: %d}"
MODEL = "conflict_merge_unsafe"  # declared not idempotent: re-run only when verified not landed
STALE_BASE = "is not same as the current table metadata location"


@pytest.fixture(scope="module")
def metastore_catalog(hive_metastore: HiveMetastore, warehouse: Path) -> Any:
    """pyiceberg's Hive catalog on the same metastore: another application, as users meet it. It
    waits up to a minute for a lock the test holds. A Hive Metastore 2.x refuses the column types
    pyiceberg writes for timestamptz unless it writes Hive 2's names (hive.hive2-compatible)."""
    return load_catalog("hms", type="hive", uri=hive_metastore.uri, warehouse=str(warehouse),
                        **{"hive.hive2-compatible": "true", "lock-check-min-wait-time": "0.05",
                           "lock-check-max-wait-time": "1", "lock-check-retries": "120"})


def snapshot_ids(spark: SparkSession, table: str) -> list[int]:
    return [r[0] for r in spark.sql(f"select snapshot_id from {table}.snapshots order by committed_at").collect()]


def assert_committed_fixture(fixture: Path, text: str, marker: str) -> None:
    """The text as the runner met it is a committed fixture (recorded with
    DBT_ICEBERG_MAINT_RECORD=1), classified as its JSON says: a CommitFailedException."""
    result = classify(text)
    verdict = {"kind": result.kind, "retryable": result.retryable, "exception_class": result.exception_class,
               "files": list(result.files)}
    assert verdict["exception_class"] == "org.apache.iceberg.exceptions.CommitFailedException"
    if RECORD:
        fixture.with_suffix(".txt").write_bytes(text.encode())
        fixture.with_suffix(".json").write_text(json.dumps(verdict, indent=2) + "\n")
    assert marker in fixture.with_suffix(".txt").read_bytes().decode("utf-8")
    assert json.loads(fixture.with_suffix(".json").read_text()) == verdict


def test_dbt_tables_are_the_metastores_iceberg_tables(
    spark: SparkSession, dbt_project: DbtProject, metastore_catalog: Any
) -> None:
    dbt_project("build", "--select", "raw_events")
    assert (dbt_project.schema, "raw_events") in metastore_catalog.list_tables(dbt_project.schema)
    table = metastore_catalog.load_table(f"{dbt_project.schema}.raw_events")
    latest = spark.sql(f"select file from {dbt_project.table('raw_events')}.metadata_log_entries "
                       "order by timestamp desc limit 1").collect()[0][0]
    assert table.metadata_location == latest


def test_a_merge_that_loses_the_metastore_lock_race_is_verified_not_landed_and_re_run(
    spark: SparkSession, dbt_project: DbtProject, hive_metastore: HiveMetastore, metastore_catalog: Any,
    conflict_gate: ConflictGate,
) -> None:
    dbt_project("build", "--select", "raw_events", MODEL, "--vars", SCENARIO % 1)
    table = dbt_project.table(MODEL)
    # No retry inside Iceberg: the lost race reaches dbt (Iceberg would otherwise refresh and win).
    spark.sql(f"alter table {table} set tblproperties ('commit.retry.num-retries' = '0')")
    before = snapshot_ids(spark, table)
    rows_before = spark.sql(f"select count(*) from {table}").collect()[0][0]

    # The other application changes the table's metadata (a property, as a catalog tool or another
    # engine does): a new metadata location and no snapshot.
    other = metastore_catalog.load_table(f"{dbt_project.schema}.{MODEL}")
    errors: list[BaseException] = []

    def other_application_commits() -> None:
        try:
            with other.transaction() as transaction:
                transaction.set_properties({"owner.team": "platform"})
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    with HeldTableLock(hive_metastore.port, dbt_project.schema, MODEL) as lock:
        writer = threading.Thread(target=other_application_commits)
        writer.start()
        lock.wait_for_waiting(1, timeout_s=60, failed=errors)  # the other application queued first

        def release_when_the_merge_queued() -> None:
            try:
                lock.wait_for_waiting(2, timeout_s=120)
            finally:
                lock.release()

        releaser = threading.Thread(target=release_when_the_merge_queued)
        releaser.start()
        report = run_dbt_with_retries(
            ["--select", MODEL, "--vars", SCENARIO % 2], command="run", max_attempts=3,
            project_dir=INTEGRATION_PROJECT, env=dbt_project.env, sleep=lambda _: None,
        )
        releaser.join(timeout=150)
        writer.join(timeout=150)
    assert not releaser.is_alive() and not writer.is_alive()
    assert errors == []

    node = report.node(MODEL)
    assert [a.status for a in node.attempts] == ["error", "success"], node.to_dict()
    lost = first(node.attempts, "the MERGE's lost attempt").message or ""
    assert "CommitFailedException: Cannot commit: Base metadata location" in lost and STALE_BASE in lost, lost
    assert node.attempts[0].kind == "commit_failed"
    document = node.to_dict()
    assert document["write_landed"] is False, document
    evidence = document["landed_evidence"]
    assert evidence["recorded_snapshot_id"] == before[-1] and evidence["snapshot_ids"] == [], evidence
    # Re-run once: the old log and exactly one MERGE; the other application's property is kept.
    after = snapshot_ids(spark, table)
    assert after[: len(before)] == before and len(after) == len(before) + 1
    properties = dict(spark.sql(f"show tblproperties {table}").collect())
    assert properties.get("owner.team") == "platform"
    raw = dbt_project.table("raw_events")
    new_ids = spark.sql(f"select count(distinct event_id) from {raw} where batch = 2 and event_id not in "
                        f"(select event_id from {raw} where batch = 1)").collect()[0][0]
    row = spark.sql(f"select count(*) as n, count(distinct event_id) as ids from {table}").collect()[0]
    assert row["n"] == row["ids"] == rows_before + new_ids

    assert_committed_fixture(FIXTURE, lost, STALE_BASE)


LOCK_TIMEOUT = "spark.sql.catalog.local.hadoop.iceberg.hive.lock-timeout-ms"
LOCK_FIXTURE = FAILURES / "hive_metastore__lock_timeout"


def reload_catalogs(spark: SparkSession) -> None:
    """Spark caches catalog instances: the next statement builds `local` again from its settings."""
    spark._jsparkSession.sessionState().catalogManager().reset()  # noqa: SLF001


def test_a_merge_that_times_out_waiting_for_the_metastore_lock_is_verified_not_landed_and_re_run(
    spark: SparkSession, dbt_project: DbtProject, hive_metastore: HiveMetastore, conflict_gate: ConflictGate,
) -> None:
    """Another process holds the table's metastore lock longer than Iceberg waits for it
    (`iceberg.hive.lock-timeout-ms`, 3 minutes by default; 2 s here, set for the one catalog through
    Spark's per-catalog Hadoop settings). The MERGE gives up with the Hive catalog's LockException,
    nothing is committed, and the runner re-runs the model, declared not idempotent, once landed
    verification proves its write did not land and the lock is free."""
    dbt_project("build", "--select", "raw_events", MODEL, "--vars", SCENARIO % 2)
    table = dbt_project.table(MODEL)
    spark.sql(f"alter table {table} set tblproperties ('commit.retry.num-retries' = '0')")
    before = snapshot_ids(spark, table)
    counts = f"select count(*) as n, count(distinct event_id) as ids from {table}"
    rows_before = spark.sql(counts).collect()[0]
    spark.conf.set(LOCK_TIMEOUT, "2000")
    reload_catalogs(spark)
    released = threading.Event()
    try:
        with HeldTableLock(hive_metastore.port, dbt_project.schema, MODEL) as lock:
            def release_once_the_merge_gave_up() -> None:
                try:
                    lock.wait_for_waiting(1, timeout_s=120)  # the MERGE's commit queued...
                    deadline = time.monotonic() + 60
                    while lock.waiting() and time.monotonic() < deadline:
                        time.sleep(0.05)  # ...and withdrew its request when it timed out
                finally:
                    lock.release()
                    released.set()

            releaser = threading.Thread(target=release_once_the_merge_gave_up)
            releaser.start()
            report = run_dbt_with_retries(
                ["--select", MODEL, "--vars", SCENARIO % 3], command="run", max_attempts=3,
                project_dir=INTEGRATION_PROJECT, env=dbt_project.env, sleep=lambda _: released.wait(120),
            )
            releaser.join(timeout=150)
    finally:
        spark.conf.unset(LOCK_TIMEOUT)
        reload_catalogs(spark)
    assert not releaser.is_alive()

    node = report.node(MODEL)
    assert [a.status for a in node.attempts] == ["error", "success"], node.to_dict()
    lost = first(node.attempts, "the MERGE's timed-out attempt").message or ""
    assert re.search(r"LockException: Timed out after \d+ ms waiting for lock on "
                     rf"{dbt_project.schema}\.{MODEL}", lost), lost
    assert node.attempts[0].kind == "commit_failed"
    document = node.to_dict()
    assert document["write_landed"] is False, document
    assert document["landed_evidence"]["snapshot_ids"] == [], document["landed_evidence"]
    after = snapshot_ids(spark, table)
    assert after[: len(before)] == before and len(after) == len(before) + 1  # the re-run's MERGE alone
    raw = dbt_project.table("raw_events")
    new_ids = spark.sql(f"select count(distinct event_id) from {raw} where batch = 3 and event_id not in "
                        f"(select event_id from {raw} where batch <= 2)").collect()[0][0]
    # One MERGE of batch 3: its new events inserted, its corrections updated in place.
    row = spark.sql(counts).collect()[0]
    assert (row["n"], row["ids"]) == (rows_before["n"] + new_ids, rows_before["ids"] + new_ids)

    assert_committed_fixture(LOCK_FIXTURE, lost, "waiting for lock on")


def test_the_planner_reads_the_metastore_from_many_threads(
    spark: SparkSession, dbt_project: DbtProject, hive_metastore: HiveMetastore, warehouse: Path
) -> None:
    """The planner and the fleet engine load tables from several threads: pyiceberg's Hive catalog
    shares one metastore connection per instance, which two threads break (`Transport not open`)."""
    names = [f"{dbt_project.schema}.threads_{n}" for n in range(4)]
    spark.sql(f"create namespace if not exists local.{dbt_project.schema}")
    for name in names:
        spark.sql(f"create table local.{name} (id bigint) using iceberg")
        spark.sql(f"insert into local.{name} values (1)")
    catalog = open_catalog(config_from_options(None, ["type=hive", f"uri={hive_metastore.uri}",
                                                      f"warehouse={warehouse}"], "local"))
    with ThreadPoolExecutor(max_workers=8) as pool:
        loaded = list(pool.map(lambda name: catalog.load(name).metadata_location, names * 25))
    assert len(loaded) == 100 and all(loaded)
