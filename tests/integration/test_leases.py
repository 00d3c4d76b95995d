"""Per-table leases on a PostgreSQL JDBC catalog and on a Hive Metastore, across processes
(docs/leases.md). The metastore commits under its table locks, not a compare-and-swap on a row,
so the module runs again there (`CATALOGS`; the repeat is in the lab tier).

Four worker processes (tests/integration/lease_worker.py), each its own Spark driver and dbt,
and this test's own session share one Iceberg catalog as the session's `local` catalog; on the
metastore two of the workers reach it as Spark's session catalog instead (SparkSessionCatalog,
two-part names, the `session_hive` target), so contenders and jobs race across both namings:

- the workers' contenders take one table's lease at the same instant (each sleeps in its Spark
  driver until then): exactly one holds it, the others skip naming it; the holder is killed with
  SIGKILL while it holds the lease: a maintain() finds it held (and its run does not fail) until
  its TTL has passed, then takes it;
- the three surviving workers and this process run four maintenance jobs on overlapping tables
  at once (two fleet jobs: iceberg_maintenance and the fleet engine, then post-hook maintain()s
  and the Python maintain): every table is maintained, no two CALLs on one table overlap in time
  (dbt's statement events; the engine's report times each CALL from them), so an
  expire_snapshots can never run beside a rewrite (apache/iceberg#17202);
- `dbt-iceberg-maint leases` lists a lease and `--break` ends it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner, Result

from dbt_iceberg_maint.cli import main
from dbt_iceberg_maint.maintenance.results import parse_result_lines
from dbt_iceberg_maint.maintenance.run import run_maintenance
from dbt_iceberg_maint.runtime import processes
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT, DbtInvocation, invoke_dbt
from tests.conftest import HIVE_METASTORE
from tests.expect import json_document, markers
from tests.integration.lease_lake import Lake, open_lake

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lab.postgres import PostgresServer
    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration
CATALOGS = ("postgres", "hive_metastore")

WORKERS = 4
TTL_MINUTES = 0.4  # the contenders' leases: 24 s (a cold JVM's first lease takes up to ~12 s here)
CONTENDER_VARS = json.dumps({"dbt_iceberg_maint_lease_minutes": TTL_MINUTES})
OPERATIONS = ["rewrite_data_files", "expire_snapshots"]  # the pair of apache/iceberg#17202
TABLES = ["lease_t1", "lease_t2", "lease_t3", "lease_t4"]
SESSION_CATALOG_WORKERS = {1, 2}  # on the metastore: workers whose session catalog is the metastore


@dataclass
class Worker:
    index: int
    state: Path
    process: subprocess.Popen[bytes]
    jobs: int = 0

    def submit(self, args: list[str], run_id: str, start_ms: int | None = None,
               fleet: dict[str, Any] | None = None) -> int:
        number = self.jobs
        (self.state / f"cmd-{number}.json.tmp").write_text(json.dumps(
            {"args": args, "run_id": run_id, "start_ms": start_ms, "fleet": fleet}))
        (self.state / f"cmd-{number}.json.tmp").rename(self.state / f"cmd-{number}.json")
        self.jobs += 1
        return number

    def result(self, number: int, timeout_s: float = 300) -> dict[str, Any]:
        path = self.state / f"result-{number}.json"
        deadline = time.monotonic() + timeout_s
        while not path.exists():
            assert self.process.poll() is None, self.log()
            assert time.monotonic() < deadline, f"worker {self.index} job {number} did not finish\n{self.log()}"
            time.sleep(0.1)
        return json.loads(path.read_text())

    def log(self) -> str:
        return (self.state / "worker.log").read_text()[-4000:]

    def kill(self) -> None:
        processes.kill(self.process)  # the worker and its Spark JVM


@pytest.fixture(scope="module")
def lake(spark: SparkSession, dbt_project: DbtProject, postgres_server: PostgresServer, catalog: str,
         request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """This module's warehouse on the PostgreSQL catalog or the Hive Metastore, as the session's
    `local` catalog."""
    return open_lake(spark, dbt_project, tmp_path_factory.mktemp("lease_lake"), postgres_server,
                     request.getfixturevalue(HIVE_METASTORE) if catalog == HIVE_METASTORE else None)


@pytest.fixture(scope="module")
def workers(lake: Lake, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Worker]]:
    """The worker processes. On the metastore the first reaches the tables through a named catalog
    (`local`, like this process) and the others through Spark's session catalog: one race, both
    ways production clusters name Iceberg tables."""
    started = []
    for index in range(WORKERS):
        state = tmp_path_factory.mktemp(f"lease_worker_{index}")
        env = {**os.environ, **lake.env, "DBT_TARGET_PATH": str(state / "target"),
               "DBT_LOG_PATH": str(state / "logs"), "SPARK_LOCAL_IP": "127.0.0.1"}
        env.pop("PYSPARK_GATEWAY_PORT", None)
        command = [sys.executable, "-m", "tests.integration.lease_worker", "--state", str(state),
                   "--catalog", json.dumps(lake.catalog_properties), "--vars", CONTENDER_VARS]
        if lake.session_catalog_conf is not None and index in SESSION_CATALOG_WORKERS:
            command += ["--session-catalog", json.dumps(lake.session_catalog_conf)]
            env["DBT_ICEBERG_MAINT_TARGET"] = "session_hive"
        # Its own process group (the worker and its Spark JVM), output to the state's worker.log.
        process = processes.start(command, state / "worker.log", env=env, cwd=INTEGRATION_PROJECT.parent).process
        started.append(Worker(index, state, process))
    try:
        deadline = time.monotonic() + 300
        for worker in started:
            while not (worker.state / "ready").exists():
                assert worker.process.poll() is None, worker.log()
                assert time.monotonic() < deadline, worker.log()
                time.sleep(0.2)
            ready = json.loads((worker.state / "ready").read_text())
            if lake.session_catalog_conf is not None and worker.index in SESSION_CATALOG_WORKERS:
                assert ready == {"current_catalog": "spark_catalog",
                                 "session_catalog": "org.apache.iceberg.spark.SparkSessionCatalog"}, ready
            else:
                assert ready["current_catalog"] == "local", ready
        yield started
    finally:
        for worker in started:
            (worker.state / "stop").touch()
            worker.kill()


def cases(messages: list[str] | tuple[str, ...]) -> list[dict[str, Any]]:
    return markers(messages, "ICEBERG_MAINT_CASE")


def lease_reason_holder(reason: str) -> str:
    assert reason.startswith("lease held by "), reason
    return reason.removeprefix("lease held by ").split(" ", 1)[0]


@pytest.mark.lab  # separate worker processes, timed to one instant and to a TTL's expiry
def test_contenders_at_one_instant_one_holds_a_killed_holder_expires(lake: Lake, workers: list[Worker],
                                                                    spark: SparkSession) -> None:
    table = f"{lake.schema}.contested"
    spark.sql(f"create table local.{table} (id bigint) using iceberg")
    spark.sql(f"insert into local.{table} values (1), (2)")
    # The lease log exists before the race: on PostgreSQL, Iceberg's JDBC catalog turns a lost
    # race to create a table into an error, even with IF NOT EXISTS (docs/leases.md).
    first = lake.dbt("run-operation", "iceberg_maint_lease_contend", "--args",
                     json.dumps({"table": table, "start_ms": 0}), run_id="setup")
    assert first.success and cases(first.log_messages)[0]["held"], first.exception

    ttl = ["--vars", CONTENDER_VARS]  # the workers parsed with them: each reaches its gate in seconds
    start_ms = int(time.time() * 1000) + 5000  # a parsed dbt invocation reaches its gate in ~3 s
    contend = ["run-operation", "iceberg_maint_lease_contend", "--args",
               json.dumps({"table": table, "start_ms": start_ms, "hold_ms": 300000}), *ttl]
    jobs = {w.index: w.submit(contend, run_id=f"contender-{w.index}") for w in workers}
    # The losers finish; the holder sleeps in its Spark driver while holding the lease.
    deadline = time.monotonic() + 120
    finished: dict[int, dict[str, Any]] = {}
    while len(finished) < WORKERS - 1:
        for w in workers:
            if w.index not in finished and (w.state / f"result-{jobs[w.index]}.json").exists():
                finished[w.index] = w.result(jobs[w.index])
        assert time.monotonic() < deadline, [w.log() for w in workers]
        time.sleep(0.1)
    [holder] = [w for w in workers if w.index not in finished]
    outcomes = {index: cases(result["messages"])[0] for index, result in finished.items()}
    assert all(result["success"] for result in finished.values())
    assert [o["held"] for o in outcomes.values()] == [False] * (WORKERS - 1)
    assert {lease_reason_holder(o["reason"]) for o in outcomes.values()} == {f"contender-{holder.index}"}
    # They raced: every loser started its claim before any of them had decided, and their claims'
    # INSERTs (the commits the catalog ordered) ran at the same time.
    claimed = [o["claimed_ms"] for o in outcomes.values()]
    assert max(claimed) < min(o["decided_ms"] for o in outcomes.values()), (outcomes, start_ms)
    inserts = [next((started, ended) for sql, started, ended in result["queries"]
                    if "iceberg_maint_leases values" in sql and "'claim'" in sql) for result in finished.values()]
    assert max(started for started, _ in inserts) < min(ended for _, ended in inserts), inserts

    holder.kill()  # kill -9 while it holds the lease (it sleeps for minutes): nothing releases it
    assert not (holder.state / f"result-{jobs[holder.index]}.json").exists()
    maintain = ["run-operation", "dbt_iceberg_maint.maintain", "--args",
                json.dumps({"relation": table, "operations": ["rewrite_manifests"], "force": True})]
    blocked = lake.dbt(*maintain)
    assert blocked.success, blocked.exception  # a skipped step does not fail the run
    [skipped] = parse_result_lines(blocked.log_messages)
    assert skipped.status == "skipped" and lease_reason_holder(skipped.reason or "") == f"contender-{holder.index}"
    expires_at = (skipped.reason or "").rsplit("expires ", 1)[1].rstrip(")")
    expires = datetime.strptime(expires_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    time.sleep(max(0.0, expires.timestamp() - time.time() + 1.5))
    taken = lake.dbt(*maintain)
    assert taken.success, taken.exception
    [result] = parse_result_lines(taken.log_messages)
    assert result.status == "success", result
    workers.remove(holder)



def test_leases_command_lists_and_breaks(lake: Lake, spark: SparkSession) -> None:
    table = f"{lake.schema}.contested"
    spark.sql(f"create table if not exists local.{table} (id bigint) using iceberg")
    kept = lake.dbt("run-operation", "iceberg_maint_lease_contend", "--args",
                    json.dumps({"table": table, "start_ms": 0, "release": False}), run_id="left-behind")
    assert kept.success and cases(kept.log_messages)[0]["held"]

    def leases(*args: str) -> Result:
        return CliRunner().invoke(main, ["leases", *args, "--project-dir", str(INTEGRATION_PROJECT)], env=lake.env,
                                  catch_exceptions=False)

    listed = leases("--schema", lake.schema, "--output", "json")
    assert listed.exit_code == 0, listed.output
    [lease] = json_document(listed.stdout)
    assert (lease["table"], lease["holder"]) == (table, "left-behind")
    assert set(lease) >= {"table", "holder", "acquired_at", "expires_at"}
    # The kill switch: no lease taken, none respected.
    unleashed = lake.dbt("run-operation", "dbt_iceberg_maint.rewrite_manifests", "--args",
                         json.dumps({"relation": table}), "--vars", "{dbt_iceberg_maint_leases_enabled: false}")
    assert [r.status for r in parse_result_lines(unleashed.log_messages)] == ["success"]
    broken = leases("--break", table, "--output", "json")
    assert broken.exit_code == 0 and [b["holder"] for b in json_document(broken.stdout)] == ["left-behind"]
    after = leases("--schema", lake.schema)
    assert after.exit_code == 0 and "no current leases" in after.stdout
    maintained = lake.dbt("run-operation", "dbt_iceberg_maint.rewrite_manifests", "--args",
                          json.dumps({"relation": table}))  # a procedure run-operation takes it now
    assert [r.status for r in parse_result_lines(maintained.log_messages)] == ["success"]


@pytest.mark.lab  # separate worker processes started at one instant
def test_overlapping_jobs_maintain_every_table_and_never_overlap_on_one(lake: Lake, workers: list[Worker],
                                                                       spark: SparkSession) -> None:
    scenario = json.dumps({"lease_scenario": True})
    built = lake.dbt("run", "--select", *TABLES, "--vars", scenario)  # one file per day partition
    assert built.success, built.exception
    # Jobs that start at one instant on a PostgreSQL catalog: the history table exists beforehand
    # (a lost race to create it would fail a job: docs/history.md).
    assert lake.dbt("run-operation", "dbt_iceberg_maint.create_history_table").success
    assert len(workers) >= 3
    start_ms = int(time.time() * 1000) + 4000
    engine = workers[2].submit([], run_id="fleet-engine", start_ms=start_ms, fleet={
        "select": [TABLES[0], TABLES[1], TABLES[3]], "operations": OPERATIONS, "dbt_args": ["--vars", scenario]})
    fleet = workers[0].submit(["run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args", json.dumps(
        {"select": TABLES[:3], "operations": OPERATIONS, "force": True}), "--vars", scenario], run_id="fleet-a",
        start_ms=start_ms)
    hooks = workers[1].submit(["run", "--select", *TABLES[1:], "--vars",
                               json.dumps({"lease_scenario": True, "lease_post_hook": True})],
                              run_id="post-hooks", start_ms=start_ms)
    # The Python maintain, in this process, from the same instant.
    invocations: list[DbtInvocation] = []

    def recorded(args: list[str] | tuple[str, ...]) -> DbtInvocation:
        invocation = invoke_dbt([*args, "--vars", scenario], env=lake.env)
        invocations.append(invocation)
        return invocation

    time.sleep(max(0.0, start_ms / 1000 - time.time()))
    report = run_maintenance([TABLES[3], TABLES[0], TABLES[2]], OPERATIONS, force=True, invoke=recorded)
    jobs = {"iceberg_maintenance": workers[0].result(fleet), "post_hooks": workers[1].result(hooks),
            "python_maintain": {"success": report.exit_code == 0,
                                "messages": [m for i in invocations for m in i.log_messages],
                                "queries": [list(q) for i in invocations for q in i.sql_statements]}}
    engine_job = workers[2].result(engine)
    assert all(job["success"] for job in (*jobs.values(), engine_job)), (
        {name: job.get("exception") for name, job in jobs.items()}, engine_job.get("report"))

    results = {name: [(r.table, r.operation, r.status, r.reason) for r in parse_result_lines(job["messages"])]
               for name, job in jobs.items()}
    engine_steps = engine_job["report"]["results"]
    results["fleet_engine"] = [(r["table"], r["operation"], r["status"], r["reason"]) for r in engine_steps]
    done: dict[tuple[str, str], list[str]] = {}
    for name, records in results.items():
        for table, operation, status, reason in records:
            if status == "success":
                done.setdefault((table.rsplit(".", 1)[-1], operation), []).append(name)
            else:
                assert status == "skipped" and (reason or "").startswith("lease held by "), (name, table, reason)
    assert set(done) == {(table, operation) for table in TABLES for operation in OPERATIONS}
    assert any(r[2] == "skipped" for records in results.values() for r in records)  # they did collide
    assert any(r[2] == "success" for r in results["fleet_engine"]), engine_steps  # it was not only skipped

    calls: dict[str, list[tuple[int, int, str]]] = {}
    for name, job in jobs.items():
        for sql, started, ended in job["queries"]:
            if sql.lstrip().upper().startswith("CALL"):
                assert ended is not None, (name, sql)
                table = sql.split("table => '", 1)[1].split("'", 1)[0].rsplit(".", 1)[-1]
                calls.setdefault(table, []).append((started, ended, name))
    for step in engine_steps:  # the engine's report: each CALL's span, from its invocation's statements
        assert len(step["calls"]) == (step["status"] == "success"), step
        for call in step["calls"]:
            assert call["ended_ms"] is not None, step
            calls.setdefault(step["table"].rsplit(".", 1)[-1], []).append(
                (call["started_ms"], call["ended_ms"], "fleet_engine"))
    for table, spans in calls.items():
        spans.sort()
        for (_, end, first), (start, _, second) in zip(spans, spans[1:], strict=False):
            assert end <= start or first == second, (table, spans)
    for table in TABLES:  # every row still there: 30 (and 30 more from the post-hook run's append)
        spark.sql(f"refresh table local.{lake.schema}.{table}")  # the other jobs expired what this session cached
        rows = spark.sql(f"select count(*) from local.{lake.schema}.{table}").collect()[0][0]
        assert rows == (60 if table in TABLES[1:] else 30), table


def test_a_renewal_extends_a_lease_and_fails_once_it_was_broken(lake: Lake, spark: SparkSession) -> None:
    spark.sql(f"create table local.{lake.schema}.renewed (id bigint) using iceberg")
    invocation = lake.dbt("run-operation", "iceberg_maint_lease_renew_case", "--args",
                          json.dumps({"table": f"{lake.schema}.renewed"}))
    assert invocation.success, invocation.exception
    [case] = cases(invocation.log_messages)
    assert (case["acquired"], case["renewed"], case["extended"], case["after_break"]) == (True, True, True, False)
    assert case["reason"].startswith("lease lost: "), case


def test_own_tables_lose_settled_lease_rows_and_stay_compact(lake: Lake, spark: SparkSession) -> None:
    """maintain_own_tables: the rows of leases settled long ago go as whole files (every other row
    keeps its commit's sequence number, and a held lease stays held), the lease log's and the
    history table's snapshots are expired, the history table is compacted."""
    schema = lake.schema
    log, history = f"local.{schema}.iceberg_maint_leases", f"local.{schema}.iceberg_maint_history"
    spark.sql(f"create table if not exists local.{schema}.own_held (id bigint) using iceberg")
    held = lake.dbt("run-operation", "iceberg_maint_lease_contend", "--args",
                    json.dumps({"table": f"{schema}.own_held", "start_ms": 0, "release": False}), run_id="keeper")
    assert held.success and cases(held.log_messages)[0]["held"]
    # Two leases settled ten hours ago, one row (one commit, one file) per event.
    old_ms = int(time.time() * 1000) - 10 * 3600 * 1000
    for key, event, at_ms, expires_ms in [("own_old_a", "claim", old_ms, old_ms + 60_000),
                                          ("own_old_a", "release", old_ms + 1000, old_ms + 1000),
                                          ("own_old_b", "claim", old_ms, old_ms + 7_200_000)]:
        spark.sql(f"insert into {log} values ('{key}', '{event}', 'old-{key}', 'run-old', 'maintain', {at_ms}, "
                  f"{expires_ms})")
    # The history table with five one-row files in today's partition: a compaction is due.
    skipped = lake.dbt("run-operation", "dbt_iceberg_maint.expire_snapshots", "--args",
                       json.dumps({"relation": f"{schema}.own_held"}), run_id="own-history")
    assert [r.status for r in parse_result_lines(skipped.log_messages)] == ["skipped"]  # keeper holds it
    for _ in range(4):
        spark.sql(f"insert into {history} select * from {history} where run_id = 'own-history'")

    def log_files() -> dict[str, tuple[str, int]]:
        spark.sql(f"refresh table {log}")
        return {row["file"]: (row["key"], row["seq"]) for row in spark.sql(
            f"select data_file.file_path as file, data_file.partition.table_name as key, sequence_number as seq "
            f"from {log}.entries where status < 2").collect()}

    def most_history_files_in_a_partition() -> int:
        spark.sql(f"refresh table {history}")
        return int(spark.sql(f"select max(n) from (select count(*) as n from {history}.files group by partition)"
                             ).collect()[0][0])

    before = log_files()
    assert most_history_files_in_a_partition() >= 5
    started = spark.sql("select current_timestamp()").collect()[0][0]
    own = lake.dbt("run-operation", "dbt_iceberg_maint.maintain_own_tables", "--args",
                   json.dumps({"schemas": [schema], "older_than_hours": 0}), run_id="own-tables")
    assert own.success, own.exception
    assert any("removing 3 settled row(s) of 2 table(s) (own_old_a, own_old_b)" in m for m in own.log_messages)
    results = {(r.table.rsplit(".", 1)[-1], r.operation): r.status for r in parse_result_lines(own.log_messages)}
    assert results[("iceberg_maint_leases", "expire_snapshots")] == "success", results
    assert results[("iceberg_maint_history", "rewrite_data_files")] == "success", results
    assert results[("iceberg_maint_history", "expire_snapshots")] == "success", results

    after = log_files()
    gone = {file for file in before if file not in after}
    assert {before[file][0] for file in gone} == {"own_old_a", "own_old_b"} and len(gone) == 3
    # Every other row is where it was, in the same commit order; new rows are this run's own.
    assert all(after[file] == before[file] for file in before if file not in gone)
    for table in (log, history):  # every snapshot from before the run expired (older_than_hours 0)
        assert spark.sql(f"select count(*) from {table}.snapshots where committed_at < timestamp '{started}'"
                         ).collect()[0][0] == 0, table
    assert most_history_files_in_a_partition() < 5
    leases = CliRunner().invoke(main, ["leases", "--schema", schema, "--output", "json", "--project-dir",
                                       str(INTEGRATION_PROJECT)], env=lake.env, catch_exceptions=False)
    assert leases.exit_code == 0, leases.output
    assert {(lease["table"], lease["holder"]) for lease in json_document(leases.stdout)} >= {
        (f"{schema}.own_held", "keeper")}
    # A wrong argument changes nothing.
    wrong = lake.dbt("run-operation", "dbt_iceberg_maint.maintain_own_tables", "--args",
                     json.dumps({"schemas": [schema], "older_than_hours": -1}))
    text = " ".join(wrong.log_messages) + (wrong.exception or "")
    assert not wrong.success and "maintain_own_tables: argument `older_than_hours` is -1" in text, text
