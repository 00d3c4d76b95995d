"""Maintenance history on real Spark: one row per executed or skipped step from every path
(maintain() as a post-hook, iceberg_maintenance, a procedure run-operation,
execute_maintenance_steps), the kill switch var, a failed step's row, a history that cannot be
written, and a run stopped midway (docs/history.md)."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import pytest

from dbt_iceberg_maint.maintenance.results import MaintenanceResult, parse_result_lines
from dbt_iceberg_maint.protocol import CHECKED_MARKER, HISTORY_MARKER, HISTORY_ROWS_MARKER, KEPT_MARKER
from tests.expect import markers
from tests.integration.test_maintenance import build_project, current_snapshot

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dbt_iceberg_maint.runtime.invoke import DbtInvocation
    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration
CATALOGS = ("embedded", "hive_metastore")

HISTORY = "iceberg_maint_history"
PROJECT = "iceberg_maint_integration_tests"
COLUMNS = ("run_id, invocation_id, path, node, table_name, operation, status, reason, started_at, ended_at, "
           "duration_ms, output, health_before, health_after, snapshot_id_before, snapshot_id_after, lease_holder, sql")


@pytest.fixture(scope="module")
def built(spark: SparkSession, dbt_project: DbtProject) -> DbtProject:
    return build_project(spark, dbt_project)


def history(spark: SparkSession, project: DbtProject, run_id: str, table: str = HISTORY) -> list[dict[str, Any]]:
    name = project.table(table)
    spark.sql(f"refresh table {name}")
    rows = spark.sql(f"select {COLUMNS} from {name} where run_id = '{run_id}' order by started_at, operation").collect()
    return [row.asDict() for row in rows]


def sent(invocation: DbtInvocation) -> list[str]:
    """The invocation's statements without dbt's leading query comment."""
    return [re.sub(r"^\s*(/\*.*?\*/\s*)*", "", sql, flags=re.S) for sql, _start, _end in invocation.sql_statements]


def cache_fill(invocation: DbtInvocation) -> list[str]:
    """dbt's relation cache, filled at a `dbt run`'s start, describes every table of the schema
    (the models' own tables too, and the history table when it exists): dbt's cost, not ours."""
    return [sql for sql in sent(invocation) if sql.startswith("describe extended")]


def history_statements(invocation: DbtInvocation, table: str = HISTORY) -> list[str]:
    """The statements the package sent to the history table."""
    return [sql for sql in sent(invocation) if table in sql and sql not in cache_fill(invocation)]


def inserts(invocation: DbtInvocation) -> list[str]:
    return [sql for sql in history_statements(invocation) if sql.startswith("insert into")]


def history_markers(invocation: DbtInvocation) -> list[dict[str, Any]]:
    return markers(invocation.log_messages, HISTORY_MARKER)


def assert_rows_match(rows: list[dict[str, Any]], results: list[MaintenanceResult], path: str) -> None:
    """One row per result, in the same order, carrying what its result line says."""
    assert [(r["table_name"], r["operation"], r["status"], r["reason"]) for r in rows] == [
        (x.table, x.operation, x.status, x.reason) for x in results], (rows, results)
    for row, result in zip(rows, results, strict=True):
        assert row["path"] == path and row["invocation_id"]
        assert row["started_at"] <= row["ended_at"] and row["duration_ms"] == result.duration_ms
        assert json.loads(row["output"]) == json.loads(json.dumps(dict(result.metrics)))
        assert row["sql"] == result.sql


def test_iceberg_maintenance_writes_a_row_per_step(spark: SparkSession, built: DbtProject) -> None:
    event_log = built.table("event_log")
    for event_id in (9201, 9202):  # two more manifests: rewrite_manifests has work
        spark.sql(f"insert into {event_log} values ({event_id}, 'view', date'2026-11-01', 1.00, 9)")
    run = built("run-operation", "iceberg_maintenance", "--args", json.dumps(
        {"select": "event_log", "operations": ["expire_snapshots", "rewrite_manifests"]}),
                "--vars", "{dbt_iceberg_maint_run_id: hist-im}")
    results = list(parse_result_lines(run.log_messages))
    rows = history(spark, built, "hist-im")
    assert_rows_match(rows, results, "iceberg_maintenance")
    assert {r["node"] for r in rows} == {f"{PROJECT}.event_log"}
    manifests = next(r for r in rows if r["operation"] == "rewrite_manifests")
    assert manifests["status"] == "success" and json.loads(manifests["output"])["rewritten_manifests_count"] >= 2
    # The plan's summary figures before; read again after the step, at the snapshot it left.
    before, after = json.loads(manifests["health_before"]), json.loads(manifests["health_after"])
    assert before["snapshot_id"] == manifests["snapshot_id_before"] != manifests["snapshot_id_after"]
    assert after["snapshot_id"] == manifests["snapshot_id_after"] == current_snapshot(spark, event_log)
    assert after["snapshots"] == before["snapshots"] + 1
    assert manifests["lease_holder"] == "hist-im"
    # The skipped expiry before it went out with the pre-CALL flush, the CALL's row right after it.
    assert len(inserts(run)) == 2, inserts(run)


def test_a_maintain_post_hook_writes_its_rows_in_one_insert(spark: SparkSession, built: DbtProject) -> None:
    """Nothing due (the kill switch skips every operation): one INSERT of four rows; the table,
    cached by dbt after the first post-hook that found or created it, costs no other statement."""
    run = built("run", "--select", "event_log", "--vars",
                "{batch: 3, maintain_after_run: true, dbt_iceberg_maint_enabled: false, "
                "dbt_iceberg_maint_run_id: hist-hook}")
    results = list(parse_result_lines(run.log_messages))
    assert [r.status for r in results] == ["skipped"] * 4
    rows = history(spark, built, "hist-hook")
    assert_rows_match(rows, results, "maintain")
    assert {r["node"] for r in rows} == {f"{PROJECT}.event_log"}
    # Besides the INSERT, at most the table's creation when no earlier test of the module made it.
    assert any(built.schema + ".event_log" in sql for sql in cache_fill(run)), sent(run)
    others = [sql for sql in history_statements(run) if sql not in inserts(run)]
    assert len(inserts(run)) == 1 and all(sql.startswith("create table if not exists") for sql in others[:1]) \
        and len(others) <= 1, history_statements(run)
    assert {r["invocation_id"] for r in rows} == {r["invocation_id"] for r in rows[:1]}


def test_a_procedure_run_operation_writes_its_row(spark: SparkSession, built: DbtProject) -> None:
    event_log = built.table("event_log")
    spark.sql(f"insert into {event_log} values (9203, 'view', date'2026-11-01', 1.00, 9)")
    run = built("run-operation", "dbt_iceberg_maint.rewrite_manifests", "--args",
                json.dumps({"relation": f"{built.schema}.event_log"}),
                run_id="hist-proc")
    [result] = parse_result_lines(run.log_messages)
    [row] = history(spark, built, "hist-proc")
    assert_rows_match([row], [result], "rewrite_manifests")
    assert row["node"] == f"{PROJECT}.event_log" and row["lease_holder"] == "hist-proc"
    before, after = json.loads(row["health_before"]), json.loads(row["health_after"])
    assert (before["snapshot_id"], after["snapshot_id"]) == (row["snapshot_id_before"], row["snapshot_id_after"])
    assert after["snapshot_id"] == current_snapshot(spark, event_log) != before["snapshot_id"]
    # A dry run writes no row.
    built("run-operation", "dbt_iceberg_maint.rewrite_manifests", "--args",
          json.dumps({"relation": f"{built.schema}.event_log", "dry_run": True}),
          run_id="hist-proc-dry")
    assert history(spark, built, "hist-proc-dry") == []


def test_execute_maintenance_steps_writes_a_row_per_step(spark: SparkSession, built: DbtProject) -> None:
    """The fleet engine's path (dbt-iceberg-maint maintain runs its steps through it)."""
    table = f"{built.schema}.event_log"
    spark.sql(f"insert into {built.table('event_log')} values (9204, 'view', date'2026-11-01', 1.00, 9)")
    steps = [{"table": table, "operation": "expire_snapshots", "status": "skipped", "reason": "not due", "sql": None},
             {"table": table, "operation": "rewrite_manifests", "status": "planned", "reason": "due",
              "sql": f"CALL system.rewrite_manifests(table => '{table}')"}]
    run = built("run-operation", "dbt_iceberg_maint.execute_maintenance_steps", "--args", json.dumps({"steps": steps}),
                run_id="hist-steps")
    results = list(parse_result_lines(run.log_messages))
    rows = history(spark, built, "hist-steps")
    assert_rows_match(rows, results, "execute_maintenance_steps")
    assert [r["status"] for r in rows] == ["skipped", "success"]
    assert rows[0]["node"] == rows[1]["node"] == f"{PROJECT}.event_log"  # found from the table name
    assert rows[1]["snapshot_id_after"] == current_snapshot(spark, built.table("event_log"))


def test_a_failed_step_has_its_row(spark: SparkSession, built: DbtProject) -> None:
    event_log = built.table("event_log")
    spark.sql(f"alter table {event_log} set tblproperties ('gc.enabled'='false')")
    try:
        run = built("run-operation", "iceberg_maintenance", "--args", json.dumps(
            {"select": "event_log", "operations": ["expire_snapshots"], "force": True}),
                    run_id="hist-failed", expect_success=False)
    finally:
        spark.sql(f"alter table {event_log} unset tblproperties ('gc.enabled')")
    assert not run.success
    [row] = history(spark, built, "hist-failed")
    assert (row["operation"], row["status"]) == ("expire_snapshots", "failed")
    assert "GC is disabled" in row["reason"]


def test_the_disabled_var_sends_no_history_statement(spark: SparkSession, built: DbtProject) -> None:
    count = f"select count(*) from {built.table(HISTORY)}"
    spark.sql(f"refresh table {built.table(HISTORY)}")
    rows_before = spark.sql(count).collect()[0][0]
    off = "dbt_iceberg_maint_history_enabled: false, dbt_iceberg_maint_run_id: hist-off"
    spark.sql(f"insert into {built.table('event_log')} values (9205, 'view', date'2026-11-01', 1.00, 9)")
    runs = [built("run-operation", "iceberg_maintenance", "--args", json.dumps(
                {"select": "event_log", "operations": ["rewrite_manifests", "expire_snapshots"], "force": True}),
                  "--vars", "{" + off + "}"),
            built("run-operation", "dbt_iceberg_maint.rewrite_manifests", "--args",
                  json.dumps({"relation": f"{built.schema}.event_log"}), "--vars", "{" + off + "}"),
            built("run", "--select", "event_log", "--vars", "{batch: 3, maintain_after_run: true, " + off + "}")]
    for run in runs:
        statuses = {r.status for r in parse_result_lines(run.log_messages)}
        assert "success" in statuses or run.args[0] == "run", statuses  # maintenance ran
        assert history_statements(run) == [] and history_markers(run) == []
        # No health read after an executed step either: nothing queries a table's snapshots after its CALL.
        statements = sent(run)
        calls = [i for i, sql in enumerate(statements) if sql.startswith("CALL ")]
        assert calls or run.args[0] == "run", statements
        after_first_call = statements[calls[0] + 1:] if calls else []
        assert not any(".snapshots" in later for later in after_first_call), statements
    spark.sql(f"refresh table {built.table(HISTORY)}")
    assert spark.sql(count).collect()[0][0] == rows_before


def test_a_history_that_cannot_be_written_does_not_fail_maintenance(spark: SparkSession, built: DbtProject) -> None:
    """A table of the history's name without its columns, and a history schema that does not
    exist: maintenance runs and succeeds, the history line says why nothing was written."""
    event_log = built.table("event_log")
    spark.sql(f"create table if not exists {built.table('not_history')} (x int) using iceberg")
    cases = {"{dbt_iceberg_maint_history_table: not_history}": "exists without the history column(s) run_id",
             "{dbt_iceberg_maint_history_schema: no_such_schema}": "history schema no_such_schema does not exist"}
    for vars, problem in cases.items():
        spark.sql(f"insert into {event_log} values (9206, 'view', date'2026-11-01', 1.00, 9)")
        before = current_snapshot(spark, event_log)
        run = built("run-operation", "iceberg_maintenance", "--args", json.dumps(
            {"select": "event_log", "operations": ["rewrite_manifests"], "force": True}), "--vars", vars)
        [result] = parse_result_lines(run.log_messages)
        assert result.status == "success" and current_snapshot(spark, event_log) != before
        [marker] = history_markers(run)
        assert marker["written"] is False and marker["rows"] == 1 and problem in marker["problem"], marker
        assert not [sql for sql in history_statements(run) + history_statements(run, "not_history")
                    if sql.startswith(("insert", "create"))], sent(run)
    assert spark.sql(f"select count(*) from {built.table('not_history')}").collect()[0][0] == 0
    assert [f.name for f in spark.table(built.table("not_history")).schema.fields] == ["x"]


def test_a_run_stopped_midway_keeps_every_row_written_before_once(spark: SparkSession, built: DbtProject) -> None:
    """The third step's CALL fails at run time (a codec Parquet does not know), which stops the
    macro (dbt's Jinja cannot catch it): the two steps before it have their rows, once; the
    failed step and the one after it have none."""
    events, event_log = built.table("events"), built.table("event_log")
    spark.sql(f"insert into {events} select * from {events} limit 1")  # a second manifest, a change to compact
    steps = [
        {"table": f"{built.schema}.events", "operation": "rewrite_manifests", "status": "planned", "reason": "due",
         "sql": f"CALL system.rewrite_manifests(table => '{built.schema}.events')"},
        {"table": f"{built.schema}.events", "operation": "expire_snapshots", "status": "skipped", "reason": "not due",
         "sql": None},
        {"table": f"{built.schema}.event_log", "operation": "rewrite_data_files", "status": "planned",
         "reason": "due", "sql": f"CALL system.rewrite_data_files(table => '{built.schema}.event_log', "
                                 "options => map('rewrite-all', 'true'))"},
        {"table": f"{built.schema}.event_log", "operation": "rewrite_manifests", "status": "skipped",
         "reason": "not due", "sql": None}]
    spark.sql(f"alter table {event_log} set tblproperties ('write.parquet.compression-codec'='no-such-codec')")
    try:
        run = built("run-operation", "dbt_iceberg_maint.execute_maintenance_steps", "--args",
                    json.dumps({"steps": steps}), run_id="hist-midway",
                    expect_success=False)
    finally:
        spark.sql(f"alter table {event_log} unset tblproperties ('write.parquet.compression-codec')")
        # The stopped run left event_log's lease taken (docs/leases.md): give it back.
        built("run-operation", "dbt_iceberg_maint.break_lease", "--args",
              json.dumps({"relation": f"{built.schema}.event_log"}))
    assert not run.success
    assert [r.operation for r in parse_result_lines(run.log_messages)] == ["rewrite_manifests", "expire_snapshots"]
    rows = history(spark, built, "hist-midway")
    assert [(r["table_name"].rsplit(".", 1)[-1], r["operation"], r["status"]) for r in rows] == [
        ("events", "rewrite_manifests", "success"), ("events", "expire_snapshots", "skipped")]


def test_create_history_table_up_front(spark: SparkSession, built: DbtProject) -> None:
    """Before jobs that start together on a fresh schema (a lost creation race fails a run on a
    PostgreSQL JDBC catalog): created once, found the next time; a table without the columns is
    reported, not changed."""
    spark.sql(f"create namespace if not exists local.{built.schema}_ops")
    vars = "{dbt_iceberg_maint_history_schema: " + built.schema + "_ops}"
    for _ in range(2):
        run = built("run-operation", "dbt_iceberg_maint.create_history_table", "--vars", vars)
        assert history_markers(run) == [{"table": f"{built.schema}_ops.{HISTORY}", "path": "create_history_table",
                                         "rows": 0, "written": True, "problem": None}]
    names = [row.name for row in spark.table(f"local.{built.schema}_ops.{HISTORY}").schema]
    assert names == [c.strip() for c in COLUMNS.split(",")]
    spark.sql(f"create table if not exists {built.table('not_history')} (x int) using iceberg")
    bad = built("run-operation", "dbt_iceberg_maint.create_history_table", "--vars",
                "{dbt_iceberg_maint_history_table: not_history}")
    [marker] = history_markers(bad)
    assert marker["written"] is False and "exists without the history column(s)" in marker["problem"]
    off = built("run-operation", "dbt_iceberg_maint.create_history_table", "--vars",
                "{dbt_iceberg_maint_history_enabled: false}")
    assert history_markers(off) == [] and history_statements(off) == []


def test_the_package_models_summarise_the_history(spark: SparkSession, built: DbtProject) -> None:
    """iceberg_maint_runs and iceberg_maint_table_daily, built with their var, equal what the
    rows of the runs above say."""
    run = built("run", "--select", "package:dbt_iceberg_maint", "--vars", "{dbt_iceberg_maint_history_models: true}")
    assert sorted(node.name for node in run.nodes) == ["iceberg_maint_runs", "iceberg_maint_table_daily"]
    [summary] = spark.sql(f"select * from {built.table('iceberg_maint_runs')} where run_id = 'hist-im'").collect()
    rows = history(spark, built, "hist-im")
    manifests = next(json.loads(r["output"]) for r in rows if r["operation"] == "rewrite_manifests")
    assert (summary["steps"], summary["succeeded"], summary["skipped"], summary["failed"], summary["tables"]) == (
        len(rows), sum(r["status"] == "success" for r in rows), sum(r["status"] == "skipped" for r in rows), 0, 1)
    assert summary["manifests_rewritten"] == manifests["rewritten_manifests_count"] > 0
    assert summary["paths"] == "iceberg_maintenance" and summary["procedure_ms"] == sum(r["duration_ms"] for r in rows)
    runs_table = built.table("iceberg_maint_runs")
    assert spark.sql(f"select failed from {runs_table} where run_id = 'hist-failed'").collect()[0][0] == 1
    # The table's day: every run of the module, and its figures after the last executed step.
    table = f"{built.schema}.event_log"
    [day] = spark.sql(f"select * from {built.table('iceberg_maint_table_daily')} where table_name = '{table}' "
                      "order by day desc limit 1").collect()
    same_day = f"from {built.table(HISTORY)} where table_name = '{table}' and to_date(started_at) = date'{day['day']}'"
    runs, compactions = spark.sql(
        f"select count(distinct run_id), count_if(status = 'success' and operation = 'rewrite_data_files') {same_day}"
    ).collect()[0]
    last_after = spark.sql(f"select max_by(health_after, ended_at) {same_day} and health_after is not null"
                           ).collect()[0][0]
    assert (day["runs"], day["compactions"], day["node"]) == (runs, compactions, f"{PROJECT}.event_log")
    assert day["data_files"] == json.loads(last_after)["data_files"] and day["snapshots"] >= 1


def test_steps_keep_their_lease_for_the_runs_next_step_which_takes_it_up(
        spark: SparkSession, built: DbtProject) -> None:
    """`keep_leases`: a step's lease stays held after it and is logged (ICEBERG_MAINT_KEPT); the
    run's next step on the table, handed it (`leases`, as the fleet engine does), neither claims nor
    reads the log again and releases it: one claim and one release for both. A handed lease that
    has expired is claimed afresh; another run's lease is refused, changing nothing."""
    table = f"{built.schema}.event_log"
    expire = {"table": table, "operation": "expire_snapshots", "status": "planned", "reason": "due",
              "sql": f"CALL system.expire_snapshots(table => '{table}', older_than => TIMESTAMP '2000-01-01 00:00:00', "
                     "retain_last => 1)"}
    log = built.table("iceberg_maint_leases")
    named = f"{built.schema}.iceberg_maint_leases"  # as the steps' table names it
    claim = f"insert into {named} values ('event_log', 'claim', "
    release = f"insert into {named} values ('event_log', 'release', "
    read = f"select l.table_name, l.event, l.claim_id, l.holder, l.path, l.at_ms, l.expires_ms, " \
           f"e.sequence_number as seq from {named} l "

    def run(run_id: str, expect_success: bool = True, **extra: Any) -> DbtInvocation:
        return built("run-operation", "dbt_iceberg_maint.execute_maintenance_steps", "--args",
                     json.dumps({"steps": [expire], **extra}), run_id=run_id, expect_success=expect_success)

    def counts(invocation: DbtInvocation) -> tuple[int, int, int]:
        statements = sent(invocation)
        return tuple(sum(s.startswith(start) for s in statements) for start in (claim, read, release))  # type: ignore[return-value]

    def events(claim_id: str) -> list[str]:
        spark.sql(f"refresh table {log}")
        return [r.event for r in spark.sql(f"select event from {log} where claim_id = '{claim_id}' "
                                           "order by at_ms, event").collect()]

    first = run("kept-run", keep_leases=True)
    assert [r.status for r in parse_result_lines(first.log_messages)] == ["success"]
    assert counts(first) == (1, 1, 0)
    [kept] = markers(first.log_messages, KEPT_MARKER)
    [lease] = kept["leases"]
    assert (lease["table"], lease["holder"], lease["path"]) == (table, "kept-run", "execute_maintenance_steps")
    assert events(lease["claim_id"]) == ["claim"]  # still held

    second = run("kept-run", leases=[lease])
    assert [r.status for r in parse_result_lines(second.log_messages)] == ["success"]
    assert counts(second) == (0, 0, 1)
    assert f"refresh table {table}" in sent(second)  # another worker's session may cache the table
    assert markers(second.log_messages, KEPT_MARKER) == []
    assert events(lease["claim_id"]) == ["claim", "release"]
    assert [r["lease_holder"] for r in history(spark, built, "kept-run")] == ["kept-run", "kept-run"]

    lapsed = run("kept-run", leases=[dict(lease, renewed_ms=0, expires_ms=1)])
    assert [r.status for r in parse_result_lines(lapsed.log_messages)] == ["success"]
    assert counts(lapsed) == (1, 1, 1)  # claimed afresh, then released

    before = current_snapshot(spark, built.table("event_log"))
    refused = run("other-run", expect_success=False, leases=[lease])
    text = " ".join(refused.log_messages) + str(refused.exception)
    assert (f"execute_maintenance_steps: argument `leases` contains a lease of {table} held by \"kept-run\"; only "
            "this run (other-run) can be handed its own leases") in text, text
    assert sent(refused) == []
    assert current_snapshot(spark, built.table("event_log")) == before
    assert history(spark, built, "other-run") == []


def test_leases_are_claimed_in_one_commit_taken_up_and_released_in_one(
        spark: SparkSession, built: DbtProject) -> None:
    """claim_leases (the fleet engine's batches): the leases of two tables claimed in one INSERT (one
    commit, one sequence number for both rows) and one read, logged as kept; a table another run
    holds is left out. The steps take them up without a claim of their own and, deferring their
    history (`defer_history`), log their rows instead of writing them; one claim_leases with
    `release` and `history_rows` ends both leases in one INSERT and writes both rows in one more.
    Bad input is refused, changing nothing."""
    schema = built.schema
    log = built.table("iceberg_maint_leases")
    named = f"{schema}.iceberg_maint_leases"
    tables = [f"{schema}.event_log", f"{schema}.events"]

    def claim(run_id: str, expect_success: bool = True, **args: Any) -> DbtInvocation:
        return built("run-operation", "dbt_iceberg_maint.claim_leases", "--args", json.dumps(args), run_id=run_id,
                     expect_success=expect_success)

    def rows(holder: str) -> list[tuple[str, str, int]]:
        spark.sql(f"refresh table {log}")
        return [(r.table_name, r.event, r.seq) for r in spark.sql(
            f"select l.table_name, l.event, e.sequence_number as seq from {log} l join {log}.entries e "
            f"on l._file = e.data_file.file_path where e.status < 2 and l.holder = '{holder}' "
            "order by seq, l.table_name").collect()]

    # Another run holds a third table's lease: the batch leaves it out.
    other = f"{schema}.batch_held"
    spark.sql(f"create table if not exists {built.table('batch_held')} (id bigint) using iceberg")
    held = built("run-operation", "iceberg_maint_lease_contend", "--args",
                 json.dumps({"table": other, "start_ms": 0, "release": False}), run_id="batch-other")
    assert held.success and markers(held.log_messages, "ICEBERG_MAINT_CASE")[0]["held"]

    claimed = claim("batch-run", tables=[*tables, other])
    statements = sent(claimed)
    assert sum(s.startswith(f"insert into {named} values ") for s in statements) == 1
    assert sum(s.startswith("select l.table_name, l.event") for s in statements) == 1
    [kept] = markers(claimed.log_messages, KEPT_MARKER)
    assert sorted(lease["table"] for lease in kept["leases"]) == tables  # not the held one
    claims = rows("batch-run")
    assert sorted(t for t, _, _ in claims) == ["batch_held", "event_log", "events"]
    assert len({seq for _, _, seq in claims}) == 1  # one commit

    steps = [{"table": t, "operation": "expire_snapshots", "status": "planned", "reason": "due",
              "sql": f"CALL system.expire_snapshots(table => '{t}', older_than => TIMESTAMP '2000-01-01 00:00:00', "
                     "retain_last => 1)"} for t in tables]
    ran = built("run-operation", "dbt_iceberg_maint.execute_maintenance_steps", "--args",
                json.dumps({"steps": steps, "leases": kept["leases"], "keep_leases": True, "defer_history": True}),
                run_id="batch-run")
    results = parse_result_lines(ran.log_messages)
    assert [r.status for r in results] == ["success", "success"]
    assert not [s for s in sent(ran) if s.startswith(f"insert into {named} ") or s.startswith("select l.table_name")]
    [still] = markers(ran.log_messages, KEPT_MARKER)
    # No history statement at all, nor a health read after the steps: each step logged its row,
    # its health after left to the caller (the fleet engine reads it from the metadata file).
    assert history_statements(ran) == [] and history_markers(ran) == []
    assert not [s for s in sent(ran) if ".snapshots" in s]
    logged = [row for line in markers(ran.log_messages, HISTORY_ROWS_MARKER) for row in line["rows"]]
    assert [(r["table_name"], r["status"]) for r in logged] == [(t, "success") for t in tables]
    assert [(r["health_after"], r["snapshot_id_after"]) for r in logged] == [(None, None)] * 2
    assert history(spark, built, "batch-run") == []

    released = claim("batch-run", tables=[], release=still["leases"], history_rows=logged, history_checked=True)
    assert sum(s.startswith(f"insert into {named} values ") for s in sent(released)) == 1
    assert len(inserts(released)) == 1 and len(history_statements(released)) == 1  # checked: no checks
    assert [m["rows"] for m in history_markers(released)] == [2]
    written = history(spark, built, "batch-run")
    assert_rows_match(written, list(results), "execute_maintenance_steps")
    assert [(w["invocation_id"], w["health_after"], w["lease_holder"]) for w in written] == [
        (r["invocation_id"], r["health_after"], "batch-run") for r in logged]
    after = rows("batch-run")
    ends = [(t, seq) for t, event, seq in after if event == "release"]
    assert sorted(t for t, _ in ends) == ["event_log", "events"] and len({seq for _, seq in ends}) == 1
    assert markers(released.log_messages, KEPT_MARKER) == [{"leases": []}]

    before = current_snapshot(spark, built.table("event_log"))
    for args, said in (({"tables": "x"}, 'argument `tables` is "x"'),
                       ({"tables": ["event_log"]}, 'argument `tables` contains "event_log"'),
                       ({"tables": [tables[0], tables[0]]}, f'argument `tables` contains "{tables[0]}"'),
                       ({"tables": [], "release": [dict(still["leases"][0], holder="x")]},
                        'argument `release` contains a lease of'),
                       ({"tables": [tables[0]], "history_rows": [dict(logged[0], run_id="batch-bad", status="")]},
                        "argument `history_rows` row 1 column status is \"\"; expected a non-empty string")):
        refused = claim("batch-bad", expect_success=False, **args)
        text = " ".join(refused.log_messages) + str(refused.exception)
        assert f"claim_leases: {said}" in text, text
        assert sent(refused) == []
    assert rows("batch-bad") == [] and rows("batch-run") == after
    assert history(spark, built, "batch-bad") == [] and history(spark, built, "batch-run") == written
    assert current_snapshot(spark, built.table("event_log")) == before


def test_one_invocations_tables_claim_their_leases_in_one_commit(
        spark: SparkSession, built: DbtProject) -> None:
    """Steps of several tables in one invocation (iceberg_maintenance's plan, a whole plan through
    execute_maintenance_steps): their leases are claimed in one INSERT (one commit) and one read,
    each taken up by its table's first step and released after its last. A table another run holds
    is left out of the batch, claims on its own and is skipped, naming the holder."""
    schema = built.schema
    log = built.table("iceberg_maint_leases")
    named = f"{schema}.iceberg_maint_leases"
    held_table = f"{schema}.batch_steps_held"
    spark.sql(f"create table if not exists {built.table('batch_steps_held')} (id bigint) using iceberg")
    held = built("run-operation", "iceberg_maint_lease_contend", "--args",
                 json.dumps({"table": held_table, "start_ms": 0, "release": False}), run_id="steps-other")
    assert held.success and markers(held.log_messages, "ICEBERG_MAINT_CASE")[0]["held"]

    tables = [f"{schema}.event_log", held_table, f"{schema}.events"]
    steps = [{"table": t, "operation": "expire_snapshots", "status": "planned", "reason": "due",
              "sql": f"CALL system.expire_snapshots(table => '{t}', older_than => TIMESTAMP '2000-01-01 00:00:00', "
                     "retain_last => 1)"} for t in tables for _ in range(2)]
    ran = built("run-operation", "dbt_iceberg_maint.execute_maintenance_steps", "--args",
                json.dumps({"steps": steps}), run_id="steps-batch")
    results = parse_result_lines(ran.log_messages)
    assert [(r.table, r.status) for r in results] == [
        (tables[0], "success"), (tables[0], "success"), (held_table, "skipped"), (held_table, "skipped"),
        (tables[2], "success"), (tables[2], "success")]
    assert all((r.reason or "").startswith("lease held by steps-other ") for r in results if r.status == "skipped")

    statements = sent(ran)
    appends = [s for s in statements if s.startswith(f"insert into {named} values ")]
    reads = [s for s in statements if s.startswith("select l.table_name, l.event")]
    # The batch's claim (three rows), event_log's release, the held table's own claim, events' release.
    assert [(s.count("'claim'"), s.count("'release'")) for s in appends] == [(3, 0), (0, 1), (1, 0), (0, 1)], appends
    assert len(reads) == 2

    spark.sql(f"refresh table {log}")
    rows = [(r.table_name, r.event, r.seq) for r in spark.sql(
        f"select l.table_name, l.event, e.sequence_number as seq from {log} l join {log}.entries e "
        "on l._file = e.data_file.file_path where e.status < 2 and l.holder = 'steps-batch' "
        "order by seq, l.table_name").collect()]
    claims = [(t, seq) for t, event, seq in rows if event == "claim"]
    releases = [(t, seq) for t, event, seq in rows if event == "release"]
    assert sorted(t for t, _ in claims) == ["batch_steps_held", "batch_steps_held", "event_log", "events"]
    assert len({seq for t, seq in claims if t != "batch_steps_held"}) == 1  # one commit for the batch
    assert sorted(t for t, _ in releases) == ["event_log", "events"]
    assert [r["lease_holder"] for r in history(spark, built, "steps-batch") if r["status"] == "success"] == [
        "steps-batch"] * 4


def test_a_bad_history_checked_is_refused_and_changes_nothing(spark: SparkSession, built: DbtProject) -> None:
    # The history table exists (as the module's earlier tests leave it), so that "no row" is read, not
    # a missing table, when this test runs alone.
    assert built("run-operation", "dbt_iceberg_maint.create_history_table").success
    table = f"{built.schema}.event_log"
    before = current_snapshot(spark, built.table("event_log"))
    steps = [{"table": table, "operation": "rewrite_manifests", "status": "planned", "reason": "due",
              "sql": f"CALL system.rewrite_manifests(table => '{table}')"}]
    run = built("run-operation", "dbt_iceberg_maint.execute_maintenance_steps", "--args",
                json.dumps({"steps": steps, "history_checked": "yes"}),
                run_id="hist-bad-arg", expect_success=False)
    assert not run.success
    assert "execute_maintenance_steps: argument `history_checked` is yes; expected true or false" in " ".join(
        run.log_messages) + str(run.exception), run.log_messages
    assert current_snapshot(spark, built.table("event_log")) == before
    assert history(spark, built, "hist-bad-arg") == []


def test_steps_check_the_lease_log_and_the_catalog_once_and_take_what_the_run_checked(
        spark: SparkSession, built: DbtProject) -> None:
    """One invocation's steps create their namespace's lease log and run the Nessie check once
    (not once per step) and log what they found; given that (`checked`, as the fleet engine passes
    it to its run's later steps), they send neither. A bad `checked` is refused, changing nothing."""
    tables = [f"{built.schema}.event_log", f"{built.schema}.events"]
    steps = [{"table": t, "operation": "expire_snapshots", "status": "planned", "reason": "due",
              "sql": f"CALL system.expire_snapshots(table => '{t}', older_than => TIMESTAMP '2000-01-01 00:00:00', "
                     "retain_last => 1)"} for t in tables]

    def run(run_id: str, **extra: Any) -> DbtInvocation:
        return built("run-operation", "dbt_iceberg_maint.execute_maintenance_steps", "--args",
                     json.dumps({"steps": steps, **extra}), run_id=run_id)

    def checks_sent(invocation: DbtInvocation) -> tuple[int, int]:
        statements = sent(invocation)
        create = f"create table if not exists {built.schema}.iceberg_maint_leases "
        return (sum(s.startswith(create) for s in statements),
                sum(s.strip() == "select current_catalog()" for s in statements))

    first = run("checked-first")
    assert [r.status for r in parse_result_lines(first.log_messages)] == ["success", "success"]
    assert checks_sent(first) == (1, 1)
    [found] = markers(first.log_messages, CHECKED_MARKER)
    assert found == {"lease_logs": [f"{built.schema}.iceberg_maint_leases"], "catalogs": [""]}

    later = run("checked-later", checked=found)
    assert [r.status for r in parse_result_lines(later.log_messages)] == ["success", "success"]
    assert checks_sent(later) == (0, 0)
    assert len([s for s in sent(later) if s.startswith("CALL system.expire_snapshots")]) == 2

    before = current_snapshot(spark, built.table("event_log"))
    for bad, said in (("yes", "is \"yes\""), ({"lease_logs": "x"}, "lease_logs is \"x\""),
                      ({"nessie": []}, "is {\"nessie\": []}")):
        refused = built("run-operation", "dbt_iceberg_maint.execute_maintenance_steps", "--args",
                        json.dumps({"steps": steps, "checked": bad}), run_id="checked-bad", expect_success=False)
        assert not refused.success
        text = " ".join(refused.log_messages) + str(refused.exception)
        assert f"execute_maintenance_steps: argument `checked` {said}; expected none or a mapping with keys " \
               "lease_logs and catalogs, each a list of names" in text, text
        assert sent(refused) == []
    assert current_snapshot(spark, built.table("event_log")) == before
    assert history(spark, built, "checked-bad") == []
