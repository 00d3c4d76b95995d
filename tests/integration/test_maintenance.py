"""maintain() and the iceberg_maintenance run-operation on the integration project, end to end."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.maintenance.results import MaintenanceResult, parse_result_lines
from dbt_iceberg_maint.maintenance.run import MaintenancePlan, run_maintenance
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT, DbtInvocation, invoke_dbt
from lab.equality import normalise_reason
from tests.expect import first

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration
CATALOGS = ("embedded", "hive_metastore")

ORDER = ["rewrite_data_files", "expire_snapshots", "remove_orphan_files", "rewrite_manifests"]


def current_snapshot(spark: SparkSession, table: str) -> int:
    return spark.sql(f"select snapshot_id from {table}.snapshots order by committed_at desc limit 1").collect()[0][0]


def by_table(results: tuple[MaintenanceResult, ...], table: str) -> dict[str, MaintenanceResult]:
    return {r.operation: r for r in results if r.table.endswith("." + table)}


def maintenance(dbt_project: DbtProject, expect_success: bool = True, vars: str | None = None, **args: object):
    command = ["run-operation", "iceberg_maintenance", "--args", json.dumps(args)]
    if vars:
        command += ["--vars", vars]
    invocation = dbt_project(*command, expect_success=expect_success)
    return invocation, parse_result_lines(invocation.log_messages)


@pytest.fixture(scope="module")
def built(spark: SparkSession, dbt_project: DbtProject) -> DbtProject:
    return build_project(spark, dbt_project)


def build_project(spark: SparkSession, dbt_project: DbtProject) -> DbtProject:
    """Three batches: many small files, several snapshots and manifests per table."""
    dbt_project("seed")
    for batch in (1, 2, 3):
        dbt_project("run", "--select", "events", "event_log", batch=batch)
    # event_log declares commit_retry.num_retries 20; reconcile it as a maintenance job would.
    dbt_project(
        "run-operation",
        "dbt_iceberg_maint.apply_table_properties",
        "--args",
        json.dumps({"relation": f"{dbt_project.schema}.event_log"}),
    )
    props = dict(spark.sql(f"show tblproperties {dbt_project.table('event_log')}").collect())
    assert props.get("commit.retry.num-retries") == "20"
    return dbt_project


def test_dry_run_prints_the_plan_and_changes_nothing(spark: SparkSession, built: DbtProject) -> None:
    tables = {name: built.table(name) for name in ("events", "event_log")}
    before = {name: current_snapshot(spark, table) for name, table in tables.items()}

    invocation, results = maintenance(built, dry_run=True, force=True)

    log = invocation.log_messages
    assert any(m.startswith("iceberg_maintenance: 3 Iceberg table(s)") for m in log)  # user_summary too
    # Whether each table exists: one listing of their schema, not two statements per table.
    sent = [e.msg.lower() for e in invocation.events if e.name == "SQLQuery"]
    assert sum(f"show namespaces like '{built.schema}'" in s for s in sent) == 1, sent
    assert sum(f"show tables in {built.schema}" in s for s in sent) == 1, sent
    event_log = by_table(results, "event_log")
    assert list(event_log) == ORDER
    assert {r.status for r in event_log.values()} == {"dry_run"}
    assert event_log["rewrite_data_files"].sql.startswith(
        f"CALL system.rewrite_data_files(table => '{built.schema}.event_log'"
    )
    assert "'partial-progress.max-failed-commits', '0'" in event_log["rewrite_data_files"].sql
    assert "'target-file-size-bytes', '67108864'" in event_log["rewrite_data_files"].sql
    # events compacts only cold partitions, and nothing is cold yet.
    assert by_table(results, "events")["rewrite_data_files"].status == "skipped"
    assert "quiet for 6 h" in by_table(results, "events")["rewrite_data_files"].reason
    assert {r.status for r in by_table(results, "user_summary").values()} == {"skipped"}
    assert {name: current_snapshot(spark, table) for name, table in tables.items()} == before


def test_thresholds_decide_what_runs_and_the_data_survives(spark: SparkSession, built: DbtProject) -> None:
    event_log = built.table("event_log")
    rows = spark.sql(f"select count(*), sum(hash(event_id, amount, loaded_batch)) from {event_log}").collect()[0]
    files_before = spark.sql(f"select count(*) from {event_log}.data_files").collect()[0][0]

    invocation, results = maintenance(built, select="tag:maintained")

    assert invocation.success
    log = " ".join(invocation.log_messages)
    # "i of N" over the steps that run, in the plan's order (event_log first).
    ran = [r for r in results if r.status == "success"]
    assert f"1 of {len(ran)} {built.schema}.event_log rewrite_data_files" in log
    assert f"{len(ran)} of {len(ran)} {built.schema}.events rewrite_manifests" in log
    assert "iceberg_maintenance summary: 2 table(s), 8 operation(s)" in log
    done = by_table(results, "event_log")
    assert list(done) == ORDER
    assert done["rewrite_data_files"].status == "success"
    assert done["rewrite_data_files"].metrics["rewritten_data_files_count"] > 0
    assert spark.sql(f"select count(*) from {event_log}.data_files").collect()[0][0] < files_before
    assert tuple(
        spark.sql(f"select count(*), sum(hash(event_id, amount, loaded_batch)) from {event_log}").collect()[0]
    ) == tuple(rows)
    # Snapshots are minutes old, the policy expires after 1 h.
    assert done["expire_snapshots"].status == "skipped"
    assert "not older than 1 h" in done["expire_snapshots"].reason
    # The table is minutes old: no file in it can be older than the orphan window, nothing is listed.
    assert done["remove_orphan_files"].status == "skipped"
    assert "younger than older_than_hours" in done["remove_orphan_files"].reason
    # Three appends left three data manifests: at the policy's min_manifests 3.
    assert done["rewrite_manifests"].status == "success", done["rewrite_manifests"].reason
    assert done["rewrite_manifests"].reason == "3 data manifests, >= threshold of 3"
    assert spark.sql(f"select count(*) from {event_log}.manifests").collect()[0][0] == 1


def test_expire_snapshots_runs_when_due(spark: SparkSession, built: DbtProject) -> None:
    event_log = built.table("event_log")
    rows = spark.sql(f"select count(*), sum(hash(event_id, amount, loaded_batch)) from {event_log}").collect()
    newest = [
        r[0] for r in spark.sql(f"select snapshot_id from {event_log}.snapshots order by committed_at desc").collect()
    ]
    assert len(newest) > 2
    # Judged as of an hour from now: every snapshot is then older than 0.5 h, however fast the
    # machine runs dbt (no sleep).
    as_of = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")

    invocation = built(
        "run-operation",
        "dbt_iceberg_maint.maintain",
        "--args",
        json.dumps(
            {
                "relation": f"{built.schema}.event_log",
                "operations": ["expire_snapshots"],
                "as_of": as_of,
                "policy": {"expire_snapshots": {"older_than_hours": 0.5}},
            }
        ),
    )

    [result] = parse_result_lines(invocation.log_messages)
    assert (result.operation, result.status) == ("expire_snapshots", "success"), result.reason
    assert result.reason.startswith(f"{len(newest)} snapshots (> retain_last 2), oldest ")
    cutoff = (datetime.strptime(as_of, "%Y-%m-%dT%H:%M:%SZ") - timedelta(hours=0.5)).strftime("%F %T")
    assert f"older_than => TIMESTAMP '{cutoff}Z'" in result.sql  # the cut-off is fixed by as_of
    assert result.metrics["deleted_manifest_lists_count"] == len(newest) - 2
    # The model's retain_last 2 keeps the two newest.
    assert [
        r[0] for r in spark.sql(f"select snapshot_id from {event_log}.snapshots order by committed_at desc").collect()
    ] == newest[:2]
    assert spark.sql(f"select count(*), sum(hash(event_id, amount, loaded_batch)) from {event_log}").collect() == rows


def test_a_failing_operation_does_not_stop_the_following_ones(spark: SparkSession, built: DbtProject) -> None:
    event_log = built.table("event_log")
    for event_id in (9001, 9002):  # two more manifests for rewrite_manifests to merge
        spark.sql(f"insert into {event_log} values ({event_id}, 'view', date'2026-11-01', 1.00, 9)")
    spark.sql(f"alter table {event_log} set tblproperties ('gc.enabled'='false')")
    try:
        invocation, results = maintenance(built, expect_success=False, select="event_log", force=True)
    finally:
        spark.sql(f"alter table {event_log} unset tblproperties ('gc.enabled')")

    assert not invocation.success  # the run-operation fails after its summary
    done = by_table(results, "event_log")
    assert list(done) == ORDER
    assert done["expire_snapshots"].status == "failed"
    assert "GC is disabled" in done["expire_snapshots"].reason
    assert done["remove_orphan_files"].status == "failed"
    assert done["rewrite_manifests"].status == "success"  # ran after the failures
    assert done["rewrite_manifests"].metrics["rewritten_manifests_count"] >= 2
    assert spark.sql(f"select count(*) from {event_log}.manifests").collect()[0][0] == 1
    log = " ".join(invocation.log_messages) + (invocation.exception or "")
    assert "4 operation(s): 2 success, 0 skipped, 0 dry_run, 2 failed" in log
    assert "2 operation(s) failed" in log


def test_one_statement_reads_the_summaries_of_a_schemas_tables_and_each_plan_is_its_own(
        spark: SparkSession, built: DbtProject) -> None:
    """iceberg_maintenance reads the snapshot summaries of the tables it plans in one statement (a
    UNION ALL of their snapshots tables), then their data manifests likewise, and decides for each
    table what maintain() decides for it alone, from that table's own queries."""
    # Without the manifests' recorded checks (earlier tests may have left them; put back after),
    # both tables' plans decide rewrite_manifests from their data manifests.
    checked = "dbt-iceberg-maint.checked-snapshot.rewrite_manifests"
    recorded = {}
    for name in ("event_log", "events"):
        rows = spark.sql(f"show tblproperties {built.table(name)} ('{checked}')").collect()
        recorded[name] = rows[0][1] if rows and rows[0][1].isdigit() else None
        spark.sql(f"alter table {built.table(name)} unset tblproperties if exists ('{checked}')")
    try:
        plans_match_their_own(built)
    finally:
        for name, value in recorded.items():
            if value is not None:
                spark.sql(f"alter table {built.table(name)} set tblproperties ('{checked}' = '{value}')")


def plans_match_their_own(built: DbtProject) -> None:
    # Judged two days ahead (as_of), so that the expiries are due and the figures fixed.
    as_of = (datetime.now(timezone.utc) + timedelta(hours=48)).strftime("%Y-%m-%dT%H:%M:%SZ")
    invocation, results = maintenance(built, dry_run=True, as_of=as_of)
    assert {"dry_run", "skipped"} <= {r.status for r in results}, results

    sent = [e.msg.lower() for e in invocation.events if e.name == "SQLQuery"]
    summaries = [s for s in sent if "count(*) as snapshots" in s]
    assert len(summaries) == 1, summaries
    read = sorted(set(re.findall(r"from ([\w.]+)\.snapshots\b", summaries[0])))
    # Every table whose policy is enabled (event_log, events; user_summary's is not).
    enabled = {r.table.lower() for r in results if not (r.reason or "").startswith("maintenance disabled")}
    assert read == sorted(enabled) and len(read) == 2, (read, results)
    # The tables' data manifests (rewrite_manifests is decided for both) likewise, in one statement.
    counted = [s for s in sent if "as data_manifests" in s]
    assert len(counted) == 1 and sorted(set(re.findall(r"from ([\w.]+)\.manifests\b", counted[0]))) == read, counted
    for table in read:
        operations = [r.operation for r in results if r.table.lower() == table]
        alone = built("run-operation", "dbt_iceberg_maint.maintain", "--args", json.dumps(
            {"relation": table, "operations": operations, "dry_run": True, "as_of": as_of}))
        own = [e.msg.lower() for e in alone.events if e.name == "SQLQuery"]
        assert sum("count(*) as snapshots" in s for s in own) == 1 and " union all " not in " ".join(own), own
        assert sum("as data_manifests" in s for s in own) == 1, own
        expected = [(r.operation, r.status, normalise_reason(r.reason), r.sql)
                    for r in parse_result_lines(alone.log_messages)]
        assert [(r.operation, r.status, normalise_reason(r.reason), r.sql)
                for r in results if r.table.lower() == table] == expected, table


def test_kill_switch_var_skips_everything(spark: SparkSession, built: DbtProject) -> None:
    before = current_snapshot(spark, built.table("event_log"))
    _, results = maintenance(
        built, vars="{dbt_iceberg_maint_enabled: false}", select=["event_log", "events"], force=True
    )
    assert len(results) == 8
    assert {r.status for r in results} == {"skipped"}
    assert {r.reason for r in results} == {"maintenance disabled by var dbt_iceberg_maint_enabled: false"}
    assert current_snapshot(spark, built.table("event_log")) == before


def test_unknown_selection_or_operation_is_refused(spark: SparkSession, built: DbtProject) -> None:
    before = current_snapshot(spark, built.table("event_log"))
    invocation, results = maintenance(built, expect_success=False, select="nope")
    assert "argument `select` contains 'nope'" in " ".join(invocation.log_messages) + (invocation.exception or "")
    invocation, results2 = maintenance(built, expect_success=False, operations=["vacuum"])
    assert "argument `operations` contains 'vacuum'" in " ".join(invocation.log_messages) + (invocation.exception or "")
    assert results == results2 == ()
    assert current_snapshot(spark, built.table("event_log")) == before


MISSING = "table {table} does not exist (a typo, or its model not built yet?)"


@pytest.mark.parametrize("relation", ["{schema}.not_built_yet", "no_such_schema.events"])
def test_a_missing_table_in_a_named_catalog_fails_the_run_operation(built: DbtProject, relation: str) -> None:
    """A mistyped relation once exited 0 with every operation skipped: nothing was done that was
    asked. Every operation is failed, with what happened, and the invocation fails."""
    invocation = built(
        "run-operation",
        "dbt_iceberg_maint.maintain",
        "--vars",
        "{dbt_iceberg_maint_catalog: local}",
        "--args",
        json.dumps({"relation": relation.format(schema=built.schema)}),
        expect_success=False,
    )
    table = "local." + relation.format(schema=built.schema)
    results = parse_result_lines(invocation.log_messages)
    assert [r.operation for r in results] == ORDER
    assert {(r.table, r.status, r.reason) for r in results} == {(table, "failed", MISSING.format(table=table))}
    assert not invocation.success
    assert (f"maintain: 4 operation(s) failed on {table}: {', '.join(ORDER)}: {MISSING.format(table=table)}"
            in " ".join(invocation.log_messages) + (invocation.exception or ""))


@pytest.mark.parametrize("relation", ["{schema}.not_built_yet", "no_such_schema.events"])
def test_a_missing_table_in_the_current_catalog_fails_the_run_operation(built: DbtProject, relation: str) -> None:
    table = relation.format(schema=built.schema)
    invocation = built("run-operation", "dbt_iceberg_maint.maintain", "--args", json.dumps({"relation": table}),
                       expect_success=False)
    results = parse_result_lines(invocation.log_messages)
    assert [r.operation for r in results] == ORDER
    assert {(r.status, r.reason) for r in results} == {("failed", MISSING.format(table=table))}
    assert not invocation.success


def test_a_model_not_built_yet_fails_when_named_and_is_skipped_by_default(built: DbtProject) -> None:
    """iceberg_maintenance: a model `select` names must have its table; one picked by default
    (every Iceberg model) or by a tag may simply not be built yet. cli_checked is enabled by the
    var and never built in this module."""
    scenario = "{cli_scenario: true}"
    named, results = maintenance(built, expect_success=False, vars=scenario, select=["event_log", "cli_checked"],
                                 operations=["rewrite_manifests"], dry_run=True)
    table = f"{built.schema}.cli_checked"
    assert [(r.table, r.status, r.reason) for r in results if r.table == table] == [
        (table, "failed", MISSING.format(table=table))]
    assert by_table(results, "event_log")["rewrite_manifests"].status in {"dry_run", "skipped"}
    assert not named.success
    _, everything = maintenance(built, vars=scenario, operations=["rewrite_manifests"], dry_run=True)
    assert [(r.status, r.reason) for r in everything if r.table == table] == [
        ("skipped", "table does not exist (model not built yet?)")]


def test_run_operation_checks_one_table_without_listing_its_schema(built: DbtProject) -> None:
    """Outside a node dbt's relation cache is empty: adapter.get_relation would list the schema
    and, on Iceberg's v2 catalogs, describe every table in it. Two SHOW statements instead, and
    a forced compaction plan reads no table properties."""
    invocation, results = maintenance(built, select="event_log", operations=["rewrite_data_files"], force=True,
                                      dry_run=True)
    assert [(r.operation, r.status) for r in results] == [("rewrite_data_files", "dry_run")]
    sent = [e.msg.lower() for e in invocation.events if e.name == "SQLQuery"]
    assert not [s for s in sent if "show table extended" in s or "describe table extended" in s], sent
    assert sum(f"show namespaces like '{built.schema}'" in s for s in sent) == 1, sent
    assert sum(f"show tables in {built.schema} like 'event_log'" in s for s in sent) == 1, sent
    assert not [s for s in sent if "show tblproperties" in s], sent  # gc.enabled matters to expire/orphans only


def test_maintain_as_a_post_hook(spark: SparkSession, built: DbtProject) -> None:
    run = built("run", "--vars", "{maintain_after_run: true}", "--select", "event_log", batch=4)
    results = parse_result_lines(run.log_messages)
    assert [r.operation for r in results] == ORDER
    assert all(r.table.endswith(".event_log") for r in results)
    assert {r.status for r in results} <= {"success", "skipped"}
    assert first(results, "a result line").status == "success"  # batch 4 added small files to compact
    assert (
        spark.sql(f"select count(*) from {built.table('event_log')}").collect()[0][0] == 137
    )  # + the two inserted above


def test_maintain_as_a_post_hook_sees_the_table_its_first_build_created(
    built: DbtProject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """dbt adds a new table to its relation cache only after the post-hooks: the first build's
    maintain() must still find it (it once skipped every operation: "table does not exist")."""
    from tests.conftest import DbtProject as Project

    fresh = Project(schema=f"{built.schema}_first", folder=tmp_path_factory.mktemp("first_build"))
    fresh("seed", "--select", "raw_events")
    run = fresh("run", "--vars", "{maintain_after_run: true}", "--select", "event_log", batch=1)
    results = parse_result_lines(run.log_messages)
    assert [r.operation for r in results] == ORDER
    assert all(r.table == f"{fresh.schema}.event_log" for r in results)
    assert [r.reason for r in results if "does not exist" in (r.reason or "")] == []
    expire = next(r for r in results if r.operation == "expire_snapshots")
    assert (expire.status, expire.reason) == ("skipped", "only 1 snapshots, not more than retain_last 2")


def test_a_procedure_macro_and_table_health_as_post_hooks(spark: SparkSession, built: DbtProject) -> None:
    """Inside a node they render to nothing (dbt would run a returned dict as SQL) and log."""
    run = built("run", "--vars", "{procedure_post_hook: true}", "--select", "user_summary")

    manifests, health = parse_result_lines(run.log_messages)
    assert manifests.table == health.table == f"{built.schema}.user_summary"
    assert (manifests.operation, manifests.status) == ("rewrite_manifests", "success")
    assert manifests.sql == f"CALL system.rewrite_manifests(table => '{built.schema}.user_summary')"
    assert set(manifests.metrics) == {"rewritten_manifests_count", "added_manifests_count"}
    assert (health.operation, health.status) == ("table_health", "success")
    assert health.metrics["records"] == 20 and health.metrics["data_files"] >= 1
    assert spark.sql(f"select count(*) from {built.table('user_summary')}").collect()[0][0] == 20


def test_cold_scoped_compaction_is_due_only_for_small_files_in_cold_partitions(
    spark: SparkSession, built: DbtProject
) -> None:
    """Small files only in a partition writers still touch: compaction is not due (its `where`
    could not select them); once that partition has gone quiet too, it is."""
    table = built.table("cold_scope")
    spark.sql(f"create table {table} (id bigint, part string) using iceberg partitioned by (part)")
    spark.sql(f"insert into {table} values (1, 'quiet')")
    for i in range(3):
        spark.sql(f"insert into {table} values ({10 + i}, 'busy')")
    updated = dict(spark.sql(f"select partition.part, unix_micros(last_updated_at) from {table}.partitions").collect())
    assert updated["quiet"] < updated["busy"]
    quiet_for_1_h = {"compaction": {"cold_partitions_hours": 1, "min_input_files": 3}}

    def as_of(micros: int) -> str:
        return datetime.fromtimestamp(micros / 1e6, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")

    def maintain_compaction(reference: str) -> MaintenanceResult:
        invocation = built(
            "run-operation",
            "dbt_iceberg_maint.maintain",
            "--args",
            json.dumps(
                {
                    "relation": f"{built.schema}.cold_scope",
                    "operations": ["compaction"],
                    "policy": quiet_for_1_h,
                    "as_of": reference,
                }
            ),
        )
        [result] = parse_result_lines(invocation.log_messages)
        return result

    # Fixed points in time: an hour after a moment between the two partitions' last writes only
    # 'quiet' is cold; an hour after the last write both are.
    busy = maintain_compaction(as_of((updated["quiet"] + updated["busy"]) // 2 + 3600 * 10**6))
    assert (busy.status, busy.reason) == ("skipped", "no cold partition has >= 3 small files (largest: 1)")
    quiet = maintain_compaction(as_of(updated["busy"] + 1 + 3600 * 10**6))
    assert (quiet.status, quiet.reason) == ("success", "a cold partition has 3 small files, >= min_input_files 3")
    assert quiet.metrics["rewritten_data_files_count"] == 3
    files = dict(spark.sql(f"select partition.part, count(*) from {table}.data_files group by 1").collect())
    assert files == {"quiet": 1, "busy": 1}
    assert spark.sql(f"select count(*) from {table}").collect()[0][0] == 4


def test_the_maintain_command_replays_the_logged_plan_after_a_run_time_failure(
    spark: SparkSession, built: DbtProject
) -> None:
    """Spark rejects event_log's compaction at run time (a codec Parquet does not know), which
    stops the run-operation: dbt's Jinja cannot catch it. Iceberg's partial-progress message
    cannot tell that failed rewrite from a lost commit, so `dbt-iceberg-maint maintain` re-runs
    the compaction once with failed commits tolerated: its files fail to rewrite again, so the
    failure is deterministic and nothing more is run for it. Then it replays the rest of the
    LOGGED plan as recorded, even though the table changed meanwhile (a fresh plan would now
    decide rewrite_manifests differently)."""
    event_log = built.table("event_log")
    for event_id in (9101, 9102):  # two small files in one partition: compaction has work to do
        spark.sql(f"insert into {event_log} values ({event_id}, 'view', date'2026-11-02', 1.00, 9)")
    spark.sql(f"call local.system.rewrite_manifests('{built.schema}.event_log')")  # 1 manifest: not due
    checksum = f"select count(*), sum(hash(event_id, amount, loaded_batch)) from {event_log}"
    spark.sql(f"alter table {event_log} set tblproperties ('write.parquet.compression-codec'='no-such-codec')")
    invocations: list[DbtInvocation] = []

    def invoke(args: Sequence[str]) -> DbtInvocation:
        replay = args[1] == "dbt_iceberg_maint.execute_maintenance_steps" and "settled" not in json.loads(args[3])
        if replay:  # before the replay: new manifests, a snapshot
            spark.sql(f"alter table {event_log} unset tblproperties ('write.parquet.compression-codec')")
            for event_id in (9103, 9104, 9105):
                spark.sql(f"insert into {event_log} values ({event_id}, 'view', date'2026-11-03', 1.00, 9)")
        invocations.append(invoke_dbt(args, project_dir=INTEGRATION_PROJECT, env=built.env))
        return invocations[-1]

    try:
        report = run_maintenance(select=["event_log", "events"], invoke=invoke)
    finally:
        spark.sql(f"alter table {event_log} unset tblproperties ('write.parquet.compression-codec')")
    rows = spark.sql(checksum).collect()

    plan = MaintenancePlan.from_log(invocations[0].log_messages)
    assert plan is not None
    done = [(r.table.rsplit(".", 1)[-1], r.operation, r.status) for r in report.results]
    assert done == [
        (
            s.table.rsplit(".", 1)[-1],
            s.operation,
            "failed" if i == 0 else {"planned": "success"}.get(s.status, s.status),
        )
        for i, s in enumerate(plan.steps)
    ]
    assert done[0] == ("event_log", "rewrite_data_files", "failed")
    assert ("event_log", "rewrite_manifests", "skipped") in done  # as logged, although 4 manifests exist now
    # Every replayed step ran the SQL the plan recorded, with the plan's reason.
    for result, step in zip(report.results[1:], plan.steps[1:], strict=True):
        assert (result.sql, result.reason) == (step.sql, step.reason)
    # The failed compaction's lease is given back unless a replayed step on event_log re-enters it
    # (which steps are due depends on what the module's earlier tests left).
    replays_event_log = any(s.table == plan.steps[0].table and s.status == "planned" for s in plan.steps[1:])
    give_back = [] if replays_event_log else ["dbt_iceberg_maint.break_lease"]
    assert [i.args[1] for i in invocations] == [
        "dbt_iceberg_maint.iceberg_maintenance",
        "dbt_iceberg_maint.maintain",  # the compaction re-run once, failed commits tolerated
        *give_back,
        "dbt_iceberg_maint.execute_maintenance_steps",
        "dbt_iceberg_maint.execute_maintenance_steps",  # the failed compaction's history row
    ]
    recorded = json.loads(invocations[-1].args[3])
    assert recorded["settled"] is True and [(s["table"], s["operation"], s["status"]) for s in recorded["steps"]] == [
        (plan.steps[0].table, "rewrite_data_files", "failed")] and invocations[-1].success
    # Under partial progress (the policy's default) Iceberg reports a group that failed to
    # rewrite as a failed commit; re-run once, the group failed to rewrite again: deterministic.
    failed = first(report.results, "the failed compaction's result")
    assert re.search(
        r"RuntimeException: partial-progress\.enabled is true but \d+ rewrite commits failed", failed.metrics["error"]
    ), failed.metrics["error"][:600]
    assert re.match(
        r"stopped the run-operation at run time \(rewrite_commit_conflict, undecided\): deterministic: re-run once "
        r"with failed commits tolerated, [1-9]\d* data file\(s\) failed to rewrite again", failed.reason
    ), failed.reason
    assert (failed.metrics["kind"], failed.metrics["retryable"]) == ("not_iceberg_conflict", False)
    assert failed.metrics["failed_commits"] >= 1
    assert failed.metrics["probe"]["metrics"]["failed_data_files_count"] > 0
    # The failed run, the re-run once, the give-back if any, the replay, the failed step's row.
    assert (report.invocations, report.exit_code) == (4 + len(give_back), 1)
    history = built.table("iceberg_maint_history")
    spark.sql(f"refresh table {history}")
    rows_of_failure = [r for r in spark.sql(f"select path, reason from {history} where status = 'failed' and "
                                            "operation = 'rewrite_data_files'").collect() if r[1] == failed.reason]
    assert [r[0] for r in rows_of_failure] == ["execute_maintenance_steps"], rows_of_failure
    # Nobody is left holding event_log's lease: its log's last event ends it.
    leases = built.table("iceberg_maint_leases")
    spark.sql(f"refresh table {leases}")
    events = [r[0] for r in spark.sql(f"select event from {leases} where table_name = 'event_log' order by at_ms")
              .collect()]
    assert events and events[-1] in ("release", "break"), events
    assert rows[0][0] == spark.sql(f"select count(*) from {event_log}").collect()[0][0]


def test_a_forced_compaction_rewrites_fewer_small_files_than_min_input_files(
    spark: SparkSession, built: DbtProject
) -> None:
    """force means it: a partition with 2 small files, policy min_input_files 5. Not due
    unforced; forced, the CALL runs with min-input-files 1 and Iceberg rewrites the 2 files (with
    the policy's 5 it would report success while rewriting nothing)."""
    table = built.table("forced_compaction")
    spark.sql(f"create table {table} (id bigint, part string) using iceberg partitioned by (part)")
    for batch in range(2):
        spark.sql(f"insert into {table} values ({batch}, 'a')")
    checksum = f"select count(*), sum(id) from {table}"
    before = spark.sql(checksum).collect()

    def compaction(force: bool) -> MaintenanceResult:
        invocation = built(
            "run-operation",
            "dbt_iceberg_maint.maintain",
            "--args",
            json.dumps({"relation": f"{built.schema}.forced_compaction", "operations": ["compaction"],
                        "policy": {"compaction": {"min_input_files": 5}}, "force": force}),
        )
        [result] = parse_result_lines(invocation.log_messages)
        return result

    unforced = compaction(force=False)
    assert (unforced.status, unforced.reason) == (
        "skipped", "the table has 2 data files, fewer than min_input_files 5: nothing to compact")
    forced = compaction(force=True)
    assert (forced.status, forced.reason) == ("success", "forced (thresholds ignored)")
    assert "'min-input-files', '1'" in forced.sql and "'min-input-files', '5'" not in forced.sql
    assert (forced.metrics["rewritten_data_files_count"], forced.metrics["added_data_files_count"]) == (2, 1)
    assert spark.sql(f"select count(*) from {table}.data_files").collect()[0][0] == 1
    assert spark.sql(checksum).collect() == before


def test_a_due_expiry_with_older_than_hours_0_expires_the_compactions_own_snapshots(
    spark: SparkSession, built: DbtProject
) -> None:
    """The plan is made before the compaction commits, yet expiry (older_than_hours 0: no age
    limit) runs after it and leaves only the newest retain_last snapshots, the compaction's
    commits included: snapshot counts do not grow after maintenance."""
    table = built.table("compact_then_expire")
    spark.sql(f"create table {table} (id bigint, part string) using iceberg partitioned by (part)")
    for batch in range(3):
        spark.sql(f"insert into {table} values ({batch}, 'a'), ({batch + 10}, 'b'), ({batch + 20}, 'c')")
    before = spark.sql(f"select count(*), sum(id) from {table}").collect()

    invocation = built(
        "run-operation",
        "dbt_iceberg_maint.maintain",
        "--args",
        json.dumps(
            {
                "relation": f"{built.schema}.compact_then_expire",
                "operations": ["compaction", "expire_snapshots"],
                "policy": {
                    "compaction": {"min_input_files": 3, "partial_progress": True},
                    "expire_snapshots": {"older_than_hours": 0, "retain_last": 3},
                },
            }
        ),
    )

    compaction, expiry = parse_result_lines(invocation.log_messages)
    assert (compaction.status, expiry.status) == ("success", "success"), (compaction.reason, expiry.reason)
    # At planning time there were only retain_last snapshots; the compaction planned first makes
    # the expiry due. Partial progress (asked for: `auto` would commit this small table once)
    # commits each of the 3 partition groups on its own
    # (Iceberg: one group per commit when there are fewer groups than max-commits 10), so
    # 3 + 3 snapshots exist when the expiry runs: the 3 older ones go, the compaction's stay.
    assert expiry.reason == (
        "3 snapshots plus those rewrite_data_files commits first "
        "(older_than_hours 0: only the newest retain_last 3 stay)"
    )
    assert compaction.metrics["rewritten_data_files_count"] == 9
    assert expiry.metrics["deleted_manifest_lists_count"] == 3
    assert [row[0] for row in spark.sql(f"select operation from {table}.snapshots").collect()] == ["replace"] * 3
    assert spark.sql(f"select count(*), sum(id) from {table}").collect() == before


def test_the_cost_gate_holds_due_work_on_a_table_maintained_recently(spark: SparkSession, built: DbtProject) -> None:
    """cost_gate.min_interval_hours: a table compacted moments ago is left alone, with the gate's
    reason, until the interval has passed (as_of); a bad gate value changes nothing."""
    table = built.table("gated")
    spark.sql(f"create table {table} (id bigint, part string) using iceberg partitioned by (part)")
    for batch in range(3):
        spark.sql(f"insert into {table} values ({batch}, 'a'), ({batch + 10}, 'b')")
    spark.sql(
        f"call system.rewrite_data_files(table => '{built.schema}.gated', options => map('min-input-files', '2'))"
    )
    compacted = current_snapshot(spark, table)

    def maintain(expect_success: bool = True, **args: object) -> DbtInvocation:
        arguments = {
            "relation": f"{built.schema}.gated",
            "operations": ["compaction", "rewrite_manifests"],
            "policy": {
                "compaction": {"min_input_files": 1},
                "rewrite_manifests": {"min_manifests": 1},
                "cost_gate": {"min_interval_hours": 24},
            },
            **args,
        }
        return built(
            "run-operation",
            "dbt_iceberg_maint.maintain",
            "--args",
            json.dumps(arguments),
            expect_success=expect_success,
        )

    gated = parse_result_lines(maintain().log_messages)
    assert [(r.operation, r.status) for r in gated] == [
        ("rewrite_data_files", "skipped"),
        ("rewrite_manifests", "skipped"),
    ]
    assert all(
        re.fullmatch(r"cost gate: last maintained 0\.\d h ago, less than min_interval_hours 24", r.reason)
        for r in gated
    ), [r.reason for r in gated]
    assert current_snapshot(spark, table) == compacted

    later = (datetime.now(timezone.utc) + timedelta(hours=48)).strftime("%Y-%m-%d %H:%M:%S")
    planned = parse_result_lines(maintain(dry_run=True, as_of=later).log_messages)
    assert [(r.operation, r.status) for r in planned] == [
        ("rewrite_data_files", "dry_run"),
        ("rewrite_manifests", "dry_run"),
    ]

    refused = built(
        "run-operation",
        "dbt_iceberg_maint.maintain",
        "--args",
        json.dumps({"relation": f"{built.schema}.gated", "policy": {"cost_gate": {"min_interval_hours": -1}}}),
        expect_success=False,
    )
    assert "policy cost_gate: argument `min_interval_hours` is -1; expected a number >= 0 or none" in str(
        refused.exception
    ) + " ".join(refused.log_messages)
    assert current_snapshot(spark, table) == compacted


def test_interval_hours_checks_each_operation_at_most_that_often(spark: SparkSession, built: DbtProject) -> None:
    """interval_hours: the first maintain() decides every operation and records, in one table
    property per operation with an interval, when it checked it (orphan removal: 12 h by default);
    the next one skips those operations without reading the table's health, saying when they were
    last checked; force ignores the record and leaves it alone; a failure records nothing."""
    table = built.table("checked")
    spark.sql(f"create table {table} (id bigint, part string) using iceberg partitioned by (part)")
    for batch in range(3):
        spark.sql(f"insert into {table} values ({batch}, 'a'), ({batch + 10}, 'b')")
    policy = {"compaction": {"min_input_files": 50, "interval_hours": 6}, "rewrite_manifests": {"min_manifests": 50}}

    def maintain(**args: object) -> DbtInvocation:
        arguments = {"relation": f"{built.schema}.checked",
                     "operations": ["compaction", "remove_orphan_files", "rewrite_manifests"], "policy": policy, **args}
        return built("run-operation", "dbt_iceberg_maint.maintain", "--args", json.dumps(arguments))

    def checked_at() -> dict[str, str]:
        return {k.rsplit(".", 1)[1]: v for k, v in spark.sql(f"show tblproperties {table}").collect()
                if k.startswith("dbt-iceberg-maint.checked-at.")}

    # Never swept and minutes old: orphan removal is not due, and no check is recorded for it
    # (the next run asks the table's age again).
    young = parse_result_lines(maintain(operations=["remove_orphan_files"]).log_messages)
    assert [(r.operation, r.status) for r in young] == [("remove_orphan_files", "skipped")], young
    assert "younger than older_than_hours 72" in (young[0].reason or ""), young
    assert checked_at() == {}
    # As on a table last swept 13 h ago: from here on its interval decides.
    swept = (datetime.now(timezone.utc) - timedelta(hours=13)).strftime("%Y-%m-%dT%H:%M:%SZ")
    spark.sql(f"alter table {table} set tblproperties ('dbt-iceberg-maint.checked-at.remove_orphan_files' = '{swept}')")

    first = maintain()
    first_run = parse_result_lines(first.log_messages)
    assert [(r.operation, r.status) for r in first_run] == [
        ("rewrite_data_files", "skipped"), ("remove_orphan_files", "success"), ("rewrite_manifests", "skipped")]
    # The snapshot summary's 6 data files decided the compaction: no file list was read.
    assert first_run[0].reason == "the table has 6 data files, fewer than min_input_files 50: nothing to compact"
    assert ".data_files" not in " ".join(e.msg.lower() for e in first.events if e.name == "SQLQuery")
    recorded = checked_at()
    # rewrite_manifests has no interval: nothing recorded for it, it is decided every time.
    assert sorted(recorded) == ["remove_orphan_files", "rewrite_data_files"], recorded
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", v) for v in recorded.values()), recorded
    snapshot = current_snapshot(spark, table)

    second = maintain()
    results = parse_result_lines(second.log_messages)
    assert [(r.operation, r.status) for r in results] == [
        ("rewrite_data_files", "skipped"), ("remove_orphan_files", "skipped"), ("rewrite_manifests", "skipped")]
    assert re.fullmatch(r"last checked 0\.\d+ h ago, within interval_hours 6", results[0].reason), results[0].reason
    assert re.fullmatch(r"last checked 0\.\d+ h ago, within interval_hours 12", results[1].reason), results[1].reason
    # rewrite_manifests has no interval: decided again, from the snapshot it was checked at, which
    # nothing followed (docs/macros.md, "Nothing written since").
    assert results[2].reason == (f"nothing written since its last check (snapshot {snapshot}): only compactions "
                                 "and rewrites since")
    # The snapshot summary and lineage were read: no manifest count, no file list, no CALL, no ALTER.
    sent = " ".join(e.msg.lower() for e in second.events if e.name == "SQLQuery")
    assert ".snapshots" in sent, sent
    assert ".manifests" not in sent and ".data_files" not in sent, sent
    assert "call " not in sent and "alter table" not in sent, sent
    assert checked_at() == recorded and current_snapshot(spark, table) == snapshot

    # Orphan removal alone (it reads no health) with its interval switched off: decided and run.
    alone = parse_result_lines(maintain(operations=["remove_orphan_files"],
                                        policy={"remove_orphan_files": {"interval_hours": 0}}).log_messages)
    assert [(r.operation, r.status) for r in alone] == [("remove_orphan_files", "success")], alone

    forced = parse_result_lines(maintain(force=True, operations=["remove_orphan_files"]).log_messages)
    assert [(r.operation, r.status) for r in forced] == [("remove_orphan_files", "success")]
    assert checked_at() == recorded


def test_maintenance_is_a_fixed_point_on_a_table_nothing_wrote_to(spark: SparkSession, built: DbtProject) -> None:
    """Compaction (not cold-scoped) and rewrite_manifests, whose answers only new data can change,
    record the snapshot they were checked at; while only their own rewrites follow it, the next
    run plans no CALL for them and reads no file list. A write makes them decide again."""
    table = built.table("fixed_point")
    spark.sql(f"create table {table} (id bigint, part string) using iceberg partitioned by (part)")
    for batch in range(4):
        spark.sql(f"insert into {table} values ({batch}, 'a')")
    # min_manifests 1: by its count alone rewrite_manifests would be due on every run.
    policy = {"compaction": {"min_input_files": 2}, "rewrite_manifests": {"min_manifests": 1}}

    def maintain() -> DbtInvocation:
        return built("run-operation", "dbt_iceberg_maint.maintain", "--args", json.dumps(
            {"relation": f"{built.schema}.fixed_point", "operations": ["compaction", "rewrite_manifests"],
             "policy": policy}))

    checked_at = current_snapshot(spark, table)
    first_run = parse_result_lines(maintain().log_messages)
    assert [(r.operation, r.status) for r in first_run] == [
        ("rewrite_data_files", "success"), ("rewrite_manifests", "success")], first_run
    properties = dict(spark.sql(f"show tblproperties {table}").collect())
    assert {k: v for k, v in properties.items() if k.startswith("dbt-iceberg-maint.checked-snapshot.")} == {
        "dbt-iceberg-maint.checked-snapshot.rewrite_data_files": str(checked_at),
        "dbt-iceberg-maint.checked-snapshot.rewrite_manifests": str(checked_at)}

    second = maintain()
    unchanged = (f"nothing written since its last check (snapshot {checked_at}): only compactions and rewrites "
                 "since")
    assert [(r.operation, r.status, r.reason) for r in parse_result_lines(second.log_messages)] == [
        ("rewrite_data_files", "skipped", unchanged), ("rewrite_manifests", "skipped", unchanged)]
    sent = " ".join(e.msg.lower() for e in second.events if e.name == "SQLQuery")
    assert "call " not in sent and ".data_files" not in sent and ".manifests" not in sent, sent
    # One scan of the snapshots table reads the summary and the lineage since the recorded check.
    assert sent.count(".snapshots") == 1 and ".refs" not in sent, sent

    spark.sql(f"insert into {table} values (9, 'a')")
    third = parse_result_lines(maintain().log_messages)
    assert [(r.operation, r.status) for r in third] == [
        ("rewrite_data_files", "success"), ("rewrite_manifests", "success")], third
    assert sorted(r[0] for r in spark.sql(f"select id from {table}").collect()) == [0, 1, 2, 3, 9]


def metadata_files_on_disk(spark: SparkSession, table: str) -> set[str]:
    """Every metadata.json in the table's metadata folder (the current file's)."""
    newest = f"select file from {table}.metadata_log_entries order by timestamp desc limit 1"
    current = spark.sql(newest).collect()[0][0]
    folder = Path(re.sub(r"^file:(//)?", "", current)).parent
    return {p.name for p in folder.glob("*.metadata.json")}


def test_retain_metadata_files_has_an_expiry_delete_the_older_metadata_files(
    spark: SparkSession, built: DbtProject
) -> None:
    """expire_snapshots never deletes a metadata.json; with `retain_metadata_files: 2` the expiry's
    recorded checks set Iceberg's delete-after-commit and previous-versions-max, so that commit
    leaves the current file and the 2 previous ones, and later commits keep it so."""
    table = built.table("metadata_retention")
    spark.sql(f"create table {table} (id bigint) using iceberg")
    for batch in range(6):
        spark.sql(f"insert into {table} values ({batch})")
    assert len(metadata_files_on_disk(spark, table)) == 7
    rows = spark.sql(f"select count(*), sum(id) from {table}").collect()

    def expire(retain: int | None) -> MaintenanceResult:
        section: dict[str, object] = {"older_than_hours": 0, "retain_last": 1}
        if retain is not None:
            section["retain_metadata_files"] = retain
        invocation = built("run-operation", "dbt_iceberg_maint.maintain", "--args", json.dumps(
            {"relation": f"{built.schema}.metadata_retention", "operations": ["expire_snapshots"],
             "policy": {"expire_snapshots": section}}))
        [result] = parse_result_lines(invocation.log_messages)
        assert (result.operation, result.status) == ("expire_snapshots", "success"), result.reason
        return result

    # Unset (the default): the table's properties are left alone and every metadata file stays.
    expire(None)
    properties = dict(spark.sql(f"show tblproperties {table}").collect())
    assert "write.metadata.previous-versions-max" not in properties
    assert "write.metadata.delete-after-commit.enabled" not in properties
    assert len(metadata_files_on_disk(spark, table)) == 8

    spark.sql(f"insert into {table} values (6)")
    expire(2)
    properties = dict(spark.sql(f"show tblproperties {table}").collect())
    assert properties["write.metadata.previous-versions-max"] == "2"
    assert properties["write.metadata.delete-after-commit.enabled"] == "true"
    logged = {Path(r[0]).name for r in spark.sql(f"select file from {table}.metadata_log_entries").collect()}
    assert len(logged) == 3
    assert metadata_files_on_disk(spark, table) == logged

    spark.sql(f"insert into {table} values (7)")
    assert len(metadata_files_on_disk(spark, table)) == 3
    assert spark.sql(f"select count(*), sum(id) from {table}").collect() == [
        (rows[0][0] + 2, rows[0][1] + 6 + 7)]
