"""The fleet engine (`maintain --concurrency/--budget/--step-timeout`, dbt_iceberg_maint/fleet/)
over the suite's real Spark Thrift Server: N dbt worker processes = N client sessions of one Spark
application. The lake is a few dbt sources with `meta.iceberg_maint` that the test writes itself
through its own PyHive session; the engine plans them from metadata (pyiceberg on the server's
catalog) and runs every step through execute_maintenance_steps.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from dbt_iceberg_maint.cli import main
from dbt_iceberg_maint.fleet import FleetReport, run_fleet
from dbt_iceberg_maint.maintenance.run import error_text
from dbt_iceberg_maint.metadata.catalog import CatalogConfig, config_from_options, open_catalog
from dbt_iceberg_maint.metadata.health import read_health
from dbt_iceberg_maint.protocol import LEASES_MARKER, OPERATIONS
from dbt_iceberg_maint.runtime.invoke import invoke_dbt
from tests.expect import json_document, markers
from tests.thrift.conftest import run_history, write_thrift_project

if TYPE_CHECKING:
    from dbt_iceberg_maint.runtime.thrift_server import ThriftServer
    from tests.thrift.conftest import ThriftSql

pytestmark = pytest.mark.integration

LAKE = "fleet_lake"
# Partial progress whatever the size (`auto` would commit these small tables once): the brittle
# table's failed rewrite is then undecided until a re-run decides it.
POLICY = ("{compaction: {min_input_files: 2, partial_progress: true}, "
          "expire_snapshots: {older_than_hours: 0, retain_last: 1}}")
# The slow table's compaction rewrites every file as a group of its own, one commit each (partial
# progress): real Spark work that lasts far longer than the step timeout below (STEP_TIMEOUT_S).
SLOW_POLICY = ("{compaction: {min_input_files: 1, partial_progress: true, "
               "options: {max-file-group-size-bytes: '1', rewrite-all: 'true'}}, "
               "expire_snapshots: {older_than_hours: 0, retain_last: 1}}")
TABLES = ("t0", "t1", "t2")
OTHERS = ("u0", "u1")
BRITTLE = "brittle"  # its expiry is refused by Spark (gc.enabled turned off after planning)
RAW = "raw_feed"  # in the catalog, declared by no dbt node
SLOW_FILES = 240
# Long enough for every other table's step on the shared, busy server (one took 11.3 s under CI's
# load, past the 10 s this was), short against the slow CALL: 60 files took 28 s alone here, about
# 0.45 s each, so 240 would take far longer than the timeout. Once its worker is killed the
# server ends the CALL sooner (12-13 s after the kill here, with 120 files or 240), so the size
# costs the test no time.
STEP_TIMEOUT_S = 25
# The budget test's worst table: its compaction (slow, one commit per file) outlasts the window,
# so whatever the machine's speed the window closes while it runs and the rest is backlog.
GATE_FILES = 30
OPERATIONS_RUN = ["compaction", "expire_snapshots"]


@pytest.fixture(scope="module")
def lake(thrift_server: ThriftServer, thrift_sql: ThriftSql, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet_project")
    # The policy of catalog tables no dbt node declares (--include-catalog).
    write_thrift_project(root, "fleet", thrift_server, f"{{dbt_iceberg_maint_catalog_policy: {POLICY}, "
                                                       f"dbt_iceberg_maint_history_schema: {LAKE}}}")
    # t0 has a health test of the backlog a budgeted run left (dbt test --select t0_backlog).
    backlog_test = ("        data_tests:\n          - dbt_iceberg_maint.iceberg_healthy:\n"
                    "              name: t0_backlog\n              arguments: {max_backlog_operations: 0}\n")
    tables = "".join(f"      - name: {name}\n        meta: {{iceberg_maint: {POLICY}}}\n"
                     + (backlog_test if name == "t0" else "") for name in (*TABLES, *OTHERS, BRITTLE))
    (root / "models" / "sources.yml").write_text(
        f"sources:\n  - name: lake\n    schema: {LAKE}\n    tables:\n{tables}"
        f"      - name: slow\n        meta: {{iceberg_maint: {SLOW_POLICY}}}\n"
        f"      - name: gate\n        meta: {{iceberg_maint: {SLOW_POLICY}}}\n")
    assert invoke_dbt(["deps", "--quiet"], root, root).success
    thrift_sql.execute(f"create namespace if not exists {LAKE}")
    for name in (*TABLES, *OTHERS, BRITTLE, RAW):  # an ingestion job's small appends: 3 small files, 3 snapshots
        thrift_sql.execute(f"create or replace table {LAKE}.{name} using iceberg as select 0L as id, 'a' as kind")
        for batch in (1, 2):
            thrift_sql.execute(f"insert into {LAKE}.{name} values ({batch}, 'a')")
    for name, files in (("slow", SLOW_FILES), ("gate", GATE_FILES)):
        thrift_sql.execute(f"create or replace table {LAKE}.{name} (id bigint, kind string) using iceberg")
        thrift_sql.execute(f"insert into {LAKE}.{name} select /*+ REPARTITION({files}) */ id, cast(id as string) "
                           f"from range({files * 50})")
    return root


@pytest.fixture(scope="module")
def catalog(thrift_server: ThriftServer) -> CatalogConfig:
    return config_from_options(str(thrift_server.spec.catalog.warehouse), [], "local")


def fleet(lake: Path, catalog: CatalogConfig, tables: tuple[str, ...], **options: Any) -> FleetReport:
    return run_fleet([f"source:lake.{name}" for name in tables], OPERATIONS_RUN, project_dir=lake,
                     profiles_dir=lake, catalog=catalog, **options)


def state(sql: ThriftSql, name: str) -> tuple[Any, ...]:
    """What maintenance changes: the current snapshot, the snapshots and the data files."""
    return (tuple(sql.rows(f"select snapshot_id from {LAKE}.{name}.snapshots order by committed_at")),
            sql.scalar(f"select count(*) from {LAKE}.{name}.data_files"))


def moment(text: str | None) -> float:
    assert text is not None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def spark_calls(server: ThriftServer) -> list[tuple[str, float, float | None]]:
    """Every CALL the Spark application executed, from its own UI REST API: (table, start, end) in epoch s."""
    assert server.ui_url is not None
    with urllib.request.urlopen(f"{server.ui_url}/api/v1/applications", timeout=10) as response:
        app = json.load(response)[0]["id"]
    with urllib.request.urlopen(f"{server.ui_url}/api/v1/applications/{app}/sql?details=false&length=100000",
                                timeout=10) as response:
        executions = json.load(response)
    calls = []
    for e in executions:
        match = re.search(r"CALL [\w.]+\(table => '([^']+)'", e.get("description") or "", re.IGNORECASE)
        if match:
            start = moment(e["submissionTime"].replace("GMT", "Z"))
            end = None if e.get("status") == "RUNNING" else start + e["duration"] / 1000
            calls.append((match.group(1), start, end))
    return calls


def history(sql: ThriftSql, run_id: str) -> list[tuple[Any, ...]]:
    """A run's rows of the maintenance history: (table, operation, status, reason)."""
    return run_history(sql, LAKE, run_id)


def backlog_test(project: Path) -> tuple[str, str | None]:
    """`dbt test --select t0_backlog`: its status and the message of its one row, if any (the
    test's SELECT of literal rows is in its SQL)."""
    tested = invoke_dbt(["test", "--select", "t0_backlog"], project, project)
    [node] = tested.nodes
    sql = " ".join(e.msg for e in tested.events if e.name == "SQLQuery" and e.node_id == node.unique_id)
    found = re.search(r"'([^']*backlog[^']*), more than 0", sql)
    return node.status, None if found is None else f"{found.group(1)}, more than 0"


def test_bad_input_exits_2_and_changes_nothing(lake: Path, thrift_sql: ThriftSql,
                                               thrift_server: ThriftServer) -> None:
    before = {name: state(thrift_sql, name) for name in TABLES}
    warehouse = str(thrift_server.spec.catalog.warehouse)
    for option, value, said in (("--concurrency", "0", "--concurrency is 0; expected a whole number of workers"),
                                ("--budget", "abc", "--budget is 'abc'; expected a positive duration"),
                                ("--step-timeout", "5x", "--step-timeout is '5x'; expected a positive duration")):
        result = CliRunner().invoke(main, ["maintain", option, value, "--warehouse", warehouse,
                                           "--project-dir", str(lake), "--profiles-dir", str(lake)])
        assert result.exit_code == 2, result.output
        assert said in result.output
    assert {name: state(thrift_sql, name) for name in TABLES} == before


def test_budget_leaves_the_rest_as_backlog_and_a_resumed_run_finishes_on_two_workers(
        lake: Path, catalog: CatalogConfig, thrift_sql: ThriftSql, thrift_server: ThriftServer,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Planned from metadata, worst first (the gate table's 30 small files, then 3 each): every
    # table is due a compaction and expiry.
    planned = fleet(lake, catalog, ("gate", *TABLES), dry_run=True)
    assert [(r.operation, r.status) for r in planned.outcomes if r.table == f"{LAKE}.t0"] == [
        ("rewrite_data_files", "dry_run"), ("expire_snapshots", "dry_run")]
    assert [(t.table, t.figures["small_files"], t.components["small_files"]) for t in planned.tables] == [
        (f"{LAKE}.gate", GATE_FILES, float(GATE_FILES))] + [(f"{LAKE}.{t}", 3, 3.0) for t in TABLES]

    # A window that closes while the first step (the gate table's slow compaction) runs: it
    # finishes, and everything else is backlog, counted.
    begun = time.time()
    budget = planned.planning_s + 3.0
    cut = fleet(lake, catalog, ("gate", *TABLES), budget_s=budget)
    started = [r for r in cut.outcomes if r.started_at is not None]
    assert [(r.table, r.operation, r.status) for r in started] == [(f"{LAKE}.gate", "rewrite_data_files", "success")]
    assert all(moment(r.started_at) <= begun + budget + 0.5 for r in started)
    backlog = [r for r in cut.outcomes if r.status == "backlog"]
    assert backlog, cut.to_json()
    document = json.loads(cut.to_json())
    assert document["totals"]["backlog"] == {
        "steps": len(backlog), "tables": len({r.table for r in backlog}),
        "eligible_files": 3 * sum(r.operation == "rewrite_data_files" for r in backlog),
        "eligible_bytes": sum(r.eligible_bytes or 0 for r in backlog)}
    assert [(b["table"], b["operation"]) for b in document["backlog"]] == [(r.table, r.operation) for r in backlog]
    untouched = {r.table for r in backlog} - {r.table for r in started}
    for table in untouched:  # nothing ran on a table whose steps are all backlog
        assert thrift_sql.scalar(f"select count(*) from {table}.data_files") == 3
    report = tmp_path / "cut.json"
    report.write_text(cut.to_json())
    # Every step has its history row, the backlog too (recorded by the engine, as no macro ran it).
    assert sorted(history(thrift_sql, cut.run_id)) == sorted(
        (r.table, r.operation, "skipped" if r.status == "backlog" else r.status, r.reason) for r in cut.outcomes)
    assert all((r.reason or "").startswith("backlog: not started, the budget of ") for r in backlog)
    # The leases the run claimed in one batch with the gate table's (the gate's kept for its expiry,
    # the others for steps the closed window left unstarted) were released at the run's end, each
    # claimed once (other jobs need not wait for their TTL).
    batch_log = thrift_sql.rows(f"select table_name, event, path from {LAKE}.iceberg_maint_leases "
                                f"where holder = '{cut.run_id}' order by at_ms, table_name")
    claimed = [row[0] for row in batch_log if row[1] == "claim"]
    assert "gate" in claimed, batch_log
    assert sorted(claimed) == sorted(set(claimed)) and len(claimed) > 1, batch_log
    assert sorted(row[0] for row in batch_log if row[1] == "release") == sorted(claimed), batch_log
    assert {row[2] for row in batch_log} == {"claim_leases"}, batch_log
    # iceberg_healthy's max_backlog_operations fails on a table the budget left untouched...
    assert backlog_test(lake) == ("fail", f"{LAKE}.t0: the last maintenance run ({cut.run_id}) left 2 operation(s) "
                                          "as backlog (expire_snapshots, rewrite_data_files), more than 0")

    # The next run resumes from that report, on two workers: every table ends healthy.
    window_start = time.time()
    made: list[str] = []
    make_folder = tempfile.mkdtemp

    def recorded_folder(*args: Any, **kwargs: Any) -> str:
        made.append(make_folder(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", recorded_folder)
    done = fleet(lake, catalog, ("gate", *TABLES), concurrency=2, resume=report)
    assert done.exit_code == 0, done.to_json()
    # The workers' folder (their dbt targets, logs, job files) was made, and goes once the run ended well.
    folders = [f for f in made if Path(f).name.startswith("dbt-iceberg-maint-fleet-")]
    assert len(folders) == 1 and not Path(folders[0]).exists(), made
    assert done.run_id == cut.run_id  # the same run: it re-enters its own leases
    settled = {(r.table, r.operation) for r in cut.outcomes if r.status == "success"}
    ran = {(r.table, r.operation) for r in done.outcomes if r.status == "success"}
    assert not settled & ran and settled | ran == {(f"{LAKE}.{t}", op) for t in ("gate", *TABLES)
                                                   for op in ("rewrite_data_files", "expire_snapshots")}
    # Both workers take steps when two tables have work left (one table's steps never run at once;
    # the steps start once both workers are ready).
    left_tables = {r.table for r in backlog}
    workers = {r.worker for r in done.outcomes if r.worker is not None}
    assert workers <= {1, 2} and len(workers) == min(2, len(left_tables)), (left_tables, done.to_json())
    assert done.to_dict()["totals"]["calls"] == len(ran)
    for record in read_health(open_catalog(catalog), [f"{LAKE}.{t}" for t in TABLES]):
        assert record.figures is not None and (record.figures["data_files"], record.figures["snapshots"]) == (1, 1)
    # Each table's steps in canonical order, and never two CALLs on one table at once (Spark's own record).
    for table in TABLES:
        mine = sorted((r for r in cut.outcomes + done.outcomes if r.table == f"{LAKE}.{table}" and r.started_at),
                      key=lambda r: moment(r.started_at))
        assert [r.operation for r in mine] == sorted((r.operation for r in mine), key=OPERATIONS.index)
    calls = [c for c in spark_calls(thrift_server) if c[1] >= begun - 1]
    assert len(calls) >= len(settled | ran)
    for table in TABLES:
        spans = sorted((start, end) for name, start, end in calls if name == f"{LAKE}.{table}")
        assert all(end is not None for _, end in spans)
        assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1)), spans  # type: ignore[operator]
    assert any(start >= window_start for _, start, _ in calls)
    # The engine records its checks as iceberg_maintenance does: each compaction recorded the
    # snapshot its plan read, the parent of the compaction's own (the fixed point's evidence), so
    # the next night decides these tables from their snapshot summary alone.
    for table in TABLES:
        properties = dict(thrift_sql.rows(f"show tblproperties {LAKE}.{table}"))
        parent = thrift_sql.scalar(f"select parent_id from {LAKE}.{table}.snapshots")
        assert properties.get("dbt-iceberg-maint.checked-snapshot.rewrite_data_files") == str(parent), properties
    # ...and passes once the resumed run (the same run id) did that work.
    assert backlog_test(lake) == ("pass", None)
    again = fleet(lake, catalog, TABLES, dry_run=True)
    assert [r.status for r in again.outcomes] == ["skipped"] * 2 * len(TABLES), again.to_json()
    assert all(t.figures["tiers"] == ["summary"] for t in again.tables), again.to_json()


@pytest.mark.lab  # its step timeout must part a slow table's CALL from the others' on a busy server
def test_a_step_past_its_timeout_is_stopped_and_the_other_tables_are_still_maintained(
        lake: Path, catalog: CatalogConfig, thrift_sql: ThriftSql, thrift_server: ThriftServer) -> None:
    rows = thrift_sql.scalar(f"select count(*) from {LAKE}.slow")
    begun = time.monotonic()
    report = fleet(lake, catalog, ("slow", *OTHERS), concurrency=2, step_timeout_s=f"{STEP_TIMEOUT_S}s",
                   include_catalog=[f"{LAKE}.raw_*"])  # one matching nothing is a usage error (issue 55)
    took = time.monotonic() - begun
    by_key = {(r.table, r.operation): r for r in report.outcomes}
    # The catalog-only table is maintained with the project's catalog policy, like the sources.
    assert report.catalog == {"taken": [f"{LAKE}.{RAW}"], "unmatched_patterns": [], "left_to_dbt": [],
                              "uncovered": []}, report.catalog
    assert [by_key[(f"{LAKE}.{RAW}", op)].status for op in ("rewrite_data_files", "expire_snapshots")] == [
        "success", "success"], report.to_json()
    assert thrift_sql.scalar(f"select count(*) from {LAKE}.{RAW}.data_files") == 1
    stopped = by_key[(f"{LAKE}.slow", "rewrite_data_files")]
    assert (stopped.status, stopped.kind) == ("failed", "timeout"), report.to_json()
    assert STEP_TIMEOUT_S <= stopped.duration_s < STEP_TIMEOUT_S + 10  # type: ignore[operator]
    later = by_key[(f"{LAKE}.slow", "expire_snapshots")]
    assert later.status == "skipped" and "timed out" in (later.reason or "")
    for name in OTHERS:
        assert [by_key[(f"{LAKE}.{name}", op)].status for op in ("rewrite_data_files", "expire_snapshots")] == [
            "success", "success"], report.to_json()
    assert report.exit_code == 1
    # What the kill leaves in the server: the CALL runs on there until it ends (wait for it, so
    # the suite's server is idle again), and the table keeps every row.
    deadline = time.monotonic() + 300
    while any(name == f"{LAKE}.slow" and end is None for name, _, end in spark_calls(thrift_server)):
        assert time.monotonic() < deadline, "the timed-out CALL still runs in the server after 300 s"
        time.sleep(1)
    print(f"\nfleet with a timeout: {took:.1f} s; the timed-out CALL ended in the server "
          f"{time.monotonic() - begun:.1f} s after the run began")
    assert thrift_sql.scalar(f"select count(*) from {LAKE}.slow") == rows
    # History after the kill: exactly one row per step. The finished steps' rows come from their
    # macros; the killed step and the one skipped after it from the engine, once the rest ended.
    written = history(thrift_sql, report.run_id)
    assert sorted(written) == sorted((o.table, o.operation, o.status, o.reason) for o in report.outcomes), written
    assert ((f"{LAKE}.slow", "rewrite_data_files", "failed", stopped.reason) in written
            and f"stopped after the step timeout of {STEP_TIMEOUT_S} s" in (stopped.reason or ""))


def test_lease_logs_are_created_up_front_on_request(lake: Path, thrift_sql: ThriftSql) -> None:
    thrift_sql.execute("create namespace if not exists fleet_fresh")
    refused = invoke_dbt(["run-operation", "dbt_iceberg_maint.create_lease_logs", "--args",
                          json.dumps({"schemas": ["fleet_fresh", "no such"]})], lake, lake)
    assert not refused.success and 'create_lease_logs: argument `schemas` contains "no such"' in error_text(
        refused), refused.log_messages
    assert thrift_sql.rows("show tables in fleet_fresh") == []
    bad_holder = invoke_dbt(["run-operation", "dbt_iceberg_maint.break_lease", "--args",
                             json.dumps({"relation": f"{LAKE}.t0", "holder": 5})], lake, lake)
    assert not bad_holder.success and "break_lease: argument `holder` is 5; expected a run id" in error_text(
        bad_holder), bad_holder.log_messages
    created = invoke_dbt(["run-operation", "dbt_iceberg_maint.create_lease_logs", "--args",
                          json.dumps({"schemas": ["fleet_fresh"]})], lake, lake)
    assert created.success and ["fleet_fresh.iceberg_maint_leases"] in markers(
        created.log_messages, LEASES_MARKER), created.log_messages
    assert [row[1] for row in thrift_sql.rows("show tables in fleet_fresh")] == ["iceberg_maint_leases"]
    assert thrift_sql.scalar("select count(*) from fleet_fresh.iceberg_maint_leases") == 0


def test_steps_spark_rejects_are_decided_and_give_their_lease_back(lake: Path, catalog: CatalogConfig,
                                                                    thrift_sql: ThriftSql) -> None:
    """Spark rejects both steps of one table at run time: the compaction (a codec Parquet does not
    know: undecided under partial progress until a re-run decides it) and the expiry (gc.enabled
    turned off after planning). Each failure stops its macro with the lease taken; the engine
    gives it back, so the next job maintains the table at once instead of after the TTL."""
    table = f"{LAKE}.{BRITTLE}"
    thrift_sql.execute(f"alter table {table} set tblproperties ('write.parquet.compression-codec'='no-such-codec')")
    before = state(thrift_sql, BRITTLE)
    turned_off: list[bool] = []

    def turn_gc_off_after_planning(progress: Mapping[str, Any]) -> None:
        # The first report comes when the first step is taken, before it runs.
        if not turned_off:
            thrift_sql.execute(f"alter table {table} set tblproperties ('gc.enabled'='false')")
            turned_off.append(True)

    report = run_fleet([f"source:lake.{BRITTLE}"], OPERATIONS_RUN, project_dir=lake, profiles_dir=lake,
                       catalog=catalog, progress=turn_gc_off_after_planning)
    compaction, expiry = report.outcomes
    assert turned_off and [(o.operation, o.status) for o in report.outcomes] == [
        ("rewrite_data_files", "failed"), ("expire_snapshots", "failed")], report.to_json()
    # The compaction's re-run, failed commits tolerated, failed to rewrite the files again.
    assert (compaction.kind, compaction.metrics["probe"]["metrics"]["failed_data_files_count"] > 0) == (
        "not_iceberg_conflict", True), report.to_json()
    assert "deterministic: re-run once with failed commits tolerated" in (compaction.reason or "")
    # 2 steps, each after a batch claim of the table's lease (the first step's lease was given back
    # when it failed), the re-run, 2 give-backs, and the history rows of the two steps no macro
    # finished.
    assert len(compaction.calls) == 2 and report.invocations == 8
    # Their rows say failed; the re-run (through maintain(), failed commits tolerated) has its own,
    # as it ran: its CALL returned, with the files it failed to rewrite in its output.
    rows = thrift_sql.rows(f"select path, operation, status, get_json_object(output, '$.failed_data_files_count') "
                           f"from {LAKE}.iceberg_maint_history where run_id = '{report.run_id}'")
    assert sorted(tuple(row) for row in rows) == [
        ("execute_maintenance_steps", "expire_snapshots", "failed", None),
        ("execute_maintenance_steps", "rewrite_data_files", "failed", None),
        ("maintain", "rewrite_data_files", "success", "3")], rows
    assert expiry.kind == "invalid_request" and "GC is disabled" in expiry.metrics["error"], expiry
    assert "lease" not in (expiry.reason or ""), expiry.reason
    assert report.exit_code == 1 and state(thrift_sql, BRITTLE) == before
    log = thrift_sql.rows(f"select event, holder, path from {LAKE}.iceberg_maint_leases "
                          f"where table_name = '{BRITTLE}' order by at_ms")
    assert log[-2:] == [("claim", report.run_id, "claim_leases"), ("break", report.run_id, "break_lease")], log
    listed = CliRunner().invoke(main, ["leases", "--schema", LAKE, "--output", "json", "--project-dir", str(lake),
                                       "--profiles-dir", str(lake)])
    assert listed.exit_code == 0, listed.output
    assert not [row for row in json_document(listed.stdout) if row["table"].endswith(f".{BRITTLE}")], listed.output
    thrift_sql.execute(f"alter table {table} unset tblproperties ('gc.enabled', 'write.parquet.compression-codec')")
    again = run_fleet([f"source:lake.{BRITTLE}"], OPERATIONS_RUN, project_dir=lake, profiles_dir=lake,
                      catalog=catalog)
    assert again.run_id != report.run_id
    assert [o.status for o in again.outcomes] == ["success", "success"], again.to_json()
    assert len(state(thrift_sql, BRITTLE)[0]) == 1
