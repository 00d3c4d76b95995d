"""The catalog production clusters run: Spark's session catalog is Iceberg's `SparkSessionCatalog`
(type hive) on the suite's real Hive Metastore, so Hive and Iceberg tables share schemas and
two-part names; beside it a named `SparkCatalog` (type hive) on the same metastore. Every test runs
over both dbt-spark methods users have: dbt Cloud's path (`thrift`, a Spark Thrift Server) and
`session` (the profile's `session_hive` target: dbt and its own Spark application in one process,
dbt_iceberg_maint/fleet/worker.py). Table state is read back over thrift either way.

dbt builds a Hive (parquet) model and an Iceberg model side by side, each with the maintain()
post-hook; a Hive table made outside dbt is a source declaring a policy. The Hive tables are never
touched and never fail a run; maintenance says it skipped them and why, and maintains the Iceberg
tables beside them.

A maintenance night of the fleet engine runs on this metastore too (in the lab tier): sources on
the session catalog with a Hive table among them, a budget that leaves backlog, a resumed run on
two workers, and end health equal to the macro path's table by table; a step killed at its
timeout keeps its history row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbt_iceberg_maint.fleet import FleetReport, run_fleet
from dbt_iceberg_maint.fleet.workers import SubprocessWorker
from dbt_iceberg_maint.maintenance.results import MaintenanceResult, parse_result_lines
from dbt_iceberg_maint.metadata.catalog import config_from_options, open_catalog
from dbt_iceberg_maint.metadata.health import read_health
from dbt_iceberg_maint.metadata.planner import plan_models
from dbt_iceberg_maint.metadata.project import iceberg_models
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT, DbtInvocation, invoke_dbt
from dbt_iceberg_maint.runtime.spark import (
    DRIVER_JAVA_OPTIONS_ENV,
    ICEBERG_JAR_ENV,
    WAREHOUSE_ENV,
    log4j2_java_options,
    resolve_iceberg_runtime,
)
from dbt_iceberg_maint.runtime.thrift_server import ThriftServer, start_thrift_server
from lab.hive_metastore import HiveMetastore
from tests.conftest import CATALOG_URI_ENV, PACKAGES_PATH_ENV
from tests.thrift.conftest import ThriftDbtProject, ThriftSql, run_history, write_thrift_project

pytestmark = pytest.mark.integration

NAMED = "hms"  # the named SparkCatalog on the same metastore
HIVE_SCENARIO = "{hive_scenario: true, batch: %d}"
NOT_ICEBERG = "not an Iceberg table ("


@pytest.fixture(scope="module")
def hms_server(hive_metastore: HiveMetastore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThriftServer]:
    root = tmp_path_factory.mktemp("hms_thrift")
    session_catalog = {
        **hive_metastore.session_catalog_conf((root / "hive_warehouse").as_uri()),
        f"spark.sql.catalog.{NAMED}": "org.apache.iceberg.spark.SparkCatalog",
        f"spark.sql.catalog.{NAMED}.type": "hive",
        f"spark.sql.catalog.{NAMED}.uri": hive_metastore.uri,
        f"spark.sql.catalog.{NAMED}.cache-enabled": "false",
    }
    server = start_thrift_server(root / "warehouse", root / "state", catalog_name="spark_catalog",
                                 catalog_properties={"type": "hive", "uri": hive_metastore.uri},
                                 extra_conf=session_catalog, stop_with_parent=True)
    try:
        yield server
    finally:
        server.stop()


class SessionCatalogProject(ThriftDbtProject):
    def table(self, name: str) -> str:
        return f"{self.schema}.{name}"  # two-part names: the session catalog


class SessionMethodProject:
    """The project over `method: session` (the `session_hive` target): one worker process runs
    every invocation, so its Spark application starts once; each job parses with its own --vars."""

    def __init__(self, metastore: HiveMetastore, schema: str, folder: Path, packages: Path) -> None:
        self.schema = schema
        work = folder / "work"
        work.mkdir(parents=True)
        self.target_path = work / "target-0"  # the worker's own target folder
        env = {PACKAGES_PATH_ENV: str(packages), "DBT_ICEBERG_MAINT_TARGET": "session_hive",
               "DBT_ICEBERG_MAINT_SCHEMA": schema, CATALOG_URI_ENV: metastore.uri,
               WAREHOUSE_ENV: (folder / "hive_warehouse").as_uri(),
               ICEBERG_JAR_ENV: resolve_iceberg_runtime().jars[0], DRIVER_JAVA_OPTIONS_ENV: log4j2_java_options()}
        self.worker = SubprocessWorker(0, env, INTEGRATION_PROJECT, INTEGRATION_PROJECT, [], work, parse_once=False)

    def __call__(self, *args: str) -> DbtInvocation:
        ran = self.worker.run(args, timeout_s=600)
        assert ran.invocation is not None, f"dbt {' '.join(args)} over session: {ran.error or 'timed out'}"
        if not ran.invocation.success:
            raise AssertionError(f"dbt {' '.join(args)} over session failed: {ran.invocation.exception}\n"
                                 + "\n".join(ran.invocation.log_messages[-20:]))
        return ran.invocation

    def table(self, name: str) -> str:
        return f"{self.schema}.{name}"


Project = SessionCatalogProject | SessionMethodProject


@pytest.fixture(scope="module", params=["thrift", "session"])
def project(request: pytest.FixtureRequest, hms_server: ThriftServer, hive_metastore: HiveMetastore,
            installed_package: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    folder = tmp_path_factory.mktemp(f"dbt_hms_{request.param}")
    built: Project
    if request.param == "thrift":
        built = SessionCatalogProject(hms_server, "th_hms", folder, installed_package)
    else:
        built = SessionMethodProject(hive_metastore, "ss_hms", folder, installed_package)
    try:
        yield built
    finally:
        if isinstance(built, SessionMethodProject):
            built.worker.close()


@pytest.fixture(scope="module")
def sql(hms_server: ThriftServer) -> Iterator[ThriftSql]:
    connection = ThriftSql(hms_server)
    yield connection
    connection.close()


def results_of(invocation_messages: list[str]) -> dict[tuple[str, str], MaintenanceResult]:
    return {(r.table.rsplit(".", 1)[-1], r.operation): r for r in parse_result_lines(invocation_messages)}


def files_under(location: str) -> list[str]:
    root = Path(location.removeprefix("file:"))
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def location(sql: ThriftSql, table: str) -> str:
    return dict((r[0], r[1]) for r in sql.rows(f"describe table extended {table}"))["Location"]


@pytest.fixture(scope="module")
def side_by_side(project: Project, sql: ThriftSql) -> dict[str, object]:
    """The Hive source table (three small files), then two dbt runs of the scenario."""
    sql.execute(f"create database if not exists {project.schema}")
    landing = project.table("hive_landing_events")
    sql.execute(f"create table {landing} (id bigint, note string) using parquet")
    for batch in range(3):
        sql.execute(f"insert into {landing} values ({batch}, 'batch {batch}')")
    before = files_under(location(sql, landing))
    runs = [project("build", "--select", "raw_events", "path:models/hive_scenario", "--vars", HIVE_SCENARIO % batch)
            for batch in (1, 2)]
    return {"landing_files": before, "runs": runs}


def test_hive_and_iceberg_tables_share_the_schema_and_two_part_names(
    project: Project, sql: ThriftSql, side_by_side: dict[str, object]
) -> None:
    tables = {r[1] for r in sql.rows(f"show tables in {project.schema}")}
    assert {"hive_events", "iceberg_beside_hive", "hive_landing_events", "raw_events"} <= tables
    hive_properties = dict(sql.rows(f"show tblproperties {project.table('hive_events')}"))
    assert not hive_properties.get("format", "").startswith("iceberg"), hive_properties
    properties = dict(sql.rows(f"show tblproperties {project.table('iceberg_beside_hive')}"))
    assert properties["format"].startswith("iceberg/")
    # The named catalog sees the same Iceberg table, and only the Iceberg ones.
    named = {r[1] for r in sql.rows(f"show tables in {NAMED}.{project.schema}")}
    assert "iceberg_beside_hive" in named and "hive_events" not in named


def test_the_post_hook_leaves_the_hive_model_alone_and_maintains_the_iceberg_one(
    project: Project, sql: ThriftSql, side_by_side: dict[str, object]
) -> None:
    runs = side_by_side["runs"]
    assert isinstance(runs, list)
    for run in runs:
        results = results_of(run.log_messages)
        # A hook does nothing on a table that is not Iceberg: no result line, the reason at debug level.
        assert not [r for (table, _), r in results.items() if table == "hive_events"], results
        assert any(m.endswith(f"hive_events: {NOT_ICEBERG}parquet)") and "nothing to do for model." in m
                   for m in run.log_messages), run.log_messages
        iceberg = [r for (table, _), r in results.items() if table == "iceberg_beside_hive"]
        assert iceberg and all(r.status in ("success", "skipped") for r in iceberg), iceberg
    # The second run's post-hook expired the first batch's snapshot on the Iceberg table.
    second = results_of(runs[1].log_messages)
    assert second[("iceberg_beside_hive", "expire_snapshots")].status == "success"
    assert sql.scalar(f"select count(*) from {project.table('iceberg_beside_hive')}.snapshots") == 1
    rows = sql.scalar(f"select count(*) from {project.table('hive_events')}")
    assert rows == sql.scalar(f"select count(*) from {project.table('raw_events')} where batch <= 2")


def test_iceberg_maintenance_names_the_hive_tables_it_skipped_and_leaves_them_untouched(
    project: Project, sql: ThriftSql, side_by_side: dict[str, object]
) -> None:
    landing = project.table("hive_landing_events")
    invocation = project("run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--vars",
                         HIVE_SCENARIO % 2)
    text = "\n".join(invocation.log_messages)
    assert "table model(s) not built as Iceberg, never maintained: hive_events (file_format parquet)" in text
    results = results_of(invocation.log_messages)
    skipped = [r for (table, _), r in results.items() if table == "hive_landing_events"]
    assert skipped and all(r.status == "skipped" and r.reason is not None and r.reason.startswith(NOT_ICEBERG)
                           for r in skipped), skipped
    assert all(r.status != "failed" for r in results.values()), [r for r in results.values() if r.status == "failed"]
    assert ("iceberg_beside_hive", "rewrite_data_files") in results
    # Nothing of the Hive table changed: the same files, the same rows.
    assert files_under(location(sql, landing)) == side_by_side["landing_files"]
    assert sql.scalar(f"select count(*) from {landing}") == 3
    hive_history = sql.rows(f"select distinct reason from {project.schema}.iceberg_maint_history "
                            "where table_name like '%hive_landing_events'")
    assert hive_history and all(str(r[0]).startswith(NOT_ICEBERG) for r in hive_history), hive_history


def test_procedures_reach_the_named_hive_catalog(project: Project, sql: ThriftSql,
                                                 side_by_side: dict[str, object]) -> None:
    invocation = project("run-operation", "dbt_iceberg_maint.rewrite_manifests", "--args",
                         json.dumps({"relation": f"{NAMED}.{project.schema}.iceberg_beside_hive"}))
    [result] = parse_result_lines(invocation.log_messages)
    assert result.sql is not None and result.sql.startswith(f"CALL {NAMED}.system.rewrite_manifests(")
    assert result.status == "success", result.reason


def test_the_python_planner_skips_the_hive_source_as_the_macros_do(
    project: Project, hive_metastore: HiveMetastore, side_by_side: dict[str, object]
) -> None:
    """pyiceberg's Hive catalog refuses to load a Hive table as Iceberg: the planner (dbt-iceberg-maint
    plan, health, maintain) skips it with the reason the macros give."""
    invocation = project("run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--vars", HIVE_SCENARIO % 2,
                         "--args", json.dumps({"select": "source:hive_landing", "dry_run": True}))
    macro = {(r.operation, r.status, r.reason) for r in parse_result_lines(invocation.log_messages)}
    manifest = json.loads((project.target_path / "manifest.json").read_text())
    catalog = open_catalog(config_from_options(None, ["type=hive", f"uri={hive_metastore.uri}"], "spark_catalog"))
    planned = plan_models(catalog, iceberg_models(manifest, ["source:hive_landing"]))
    assert planned and {(p.operation, p.status, p.reason) for p in planned} == macro, (planned, macro)
    assert all(p.status == "skipped" and p.reason == f"{NOT_ICEBERG}no Iceberg metadata): never maintained"
               for p in planned)


# The fleet night's lake: the same tables in two schemas, one maintained by the fleet engine, the
# other by the macro path (iceberg_maintenance), each declared as a source with its policy.
NIGHT = {"fleet": "night_fleet", "macros": "night_macros"}
NIGHT_POLICY = ("{compaction: {min_input_files: 2, partial_progress: true}, "
                "expire_snapshots: {older_than_hours: 0, retain_last: 1}}")
# The worst table: its compaction commits each of its files on its own (partial progress, a
# metastore lock each), so the budget's window closes while it runs, whatever the machine's speed.
GATE_POLICY = ("{compaction: {min_input_files: 1, partial_progress: true, "
               "options: {max-file-group-size-bytes: '1', rewrite-all: 'true'}}, "
               "expire_snapshots: {older_than_hours: 0, retain_last: 1}}")
NIGHT_TABLES = ("gate", "n0", "n1", "n2")
GATE_FILES = 20
# A compaction that outlasts its step timeout by far: one metastore-locked commit per file.
NIGHT_SLOW, SLOW_FILES, SLOW_TIMEOUT_S = "slow", 150, 15
NIGHT_HIVE = "hive_feed"  # a Hive (parquet) table declared with a policy: never maintained
NIGHT_OPERATIONS = ["compaction", "expire_snapshots"]
# What maintenance changes in a table's health, compared table by table between the two paths.
HEALTH_KEYS = ("data_files", "delete_files", "small_files", "snapshots", "data_manifests")


@pytest.fixture(scope="module")
def night(hms_server: ThriftServer, sql: ThriftSql, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dbt project over thrift whose sources are both schemas' tables; the tables written by an
    ingestion job's small appends (three files, three snapshots each; the gate table 20 files)."""
    root = tmp_path_factory.mktemp("hms_night")
    write_thrift_project(root, "night", hms_server, f"{{dbt_iceberg_maint_history_schema: {NIGHT['fleet']}}}")
    sources = ""
    for name, schema in NIGHT.items():
        tables = "".join(f"      - name: {table}\n        meta: {{iceberg_maint: "
                         f"{GATE_POLICY if table == 'gate' else NIGHT_POLICY}}}\n"
                         for table in (*NIGHT_TABLES, NIGHT_HIVE))
        if name == "fleet":  # the step-timeout test's table
            tables += f"      - name: {NIGHT_SLOW}\n        meta: {{iceberg_maint: {GATE_POLICY}}}\n"
        sources += f"  - name: {name}\n    schema: {schema}\n    tables:\n{tables}"
        sql.execute(f"create database if not exists {schema}")
        for table in NIGHT_TABLES[1:]:
            sql.execute(f"create table {schema}.{table} (id bigint, kind string) using iceberg")
            for batch in range(3):
                sql.execute(f"insert into {schema}.{table} values ({batch}, 'a')")
        sql.execute(f"create table {schema}.gate (id bigint, kind string) using iceberg")
        sql.execute(f"insert into {schema}.gate select /*+ REPARTITION({GATE_FILES}) */ id, cast(id as string) "
                    f"from range({GATE_FILES * 50})")
        if name == "fleet":
            sql.execute(f"create table {schema}.{NIGHT_SLOW} (id bigint, kind string) using iceberg")
            sql.execute(f"insert into {schema}.{NIGHT_SLOW} select /*+ REPARTITION({SLOW_FILES}) */ id, "
                        f"cast(id as string) from range({SLOW_FILES * 50})")
        sql.execute(f"create table {schema}.{NIGHT_HIVE} (id bigint, kind string) using parquet")
        for batch in range(3):
            sql.execute(f"insert into {schema}.{NIGHT_HIVE} values ({batch}, 'a')")
    (root / "models" / "sources.yml").write_text(f"sources:\n{sources}")
    assert invoke_dbt(["deps", "--quiet"], root, root).success
    return root


@pytest.mark.lab  # a budget's window against a slow compaction, two fleet workers, a second Spark client
def test_a_fleet_night_with_a_budget_ends_as_healthy_as_the_macro_path(
        night: Path, sql: ThriftSql, hive_metastore: HiveMetastore, tmp_path: Path) -> None:
    catalog = config_from_options(None, ["type=hive", f"uri={hive_metastore.uri}"], "spark_catalog")
    selected = [f"source:fleet.{table}" for table in (*NIGHT_TABLES, NIGHT_HIVE)]
    hive = f"{NIGHT['fleet']}.{NIGHT_HIVE}"
    hive_files = files_under(location(sql, hive))
    rows = {t: sql.scalar(f"select count(*) from {NIGHT['fleet']}.{t}") for t in (*NIGHT_TABLES, NIGHT_HIVE)}

    def run(**options: object) -> FleetReport:
        return run_fleet(selected, NIGHT_OPERATIONS, project_dir=night, profiles_dir=night, catalog=catalog,
                         **options)  # type: ignore[arg-type]

    planned = run(dry_run=True)
    # A window that closes while the first step (the gate table's slow compaction) runs: it
    # finishes, the rest is backlog; the Hive table is skipped with the macros' reason.
    cut = run(budget_s=planned.planning_s + 3.0)
    by_key = {(r.table.rsplit(".", 1)[-1], r.operation): r for r in cut.outcomes}
    assert by_key[("gate", "rewrite_data_files")].status == "success", cut.to_json()
    backlog = [r for r in cut.outcomes if r.status == "backlog"]
    assert backlog and not [r for r in cut.outcomes if r.status == "failed"], cut.to_json()
    assert all(r.status == "skipped" and (r.reason or "").startswith(NOT_ICEBERG)
               for (table, _), r in by_key.items() if table == NIGHT_HIVE), cut.to_json()
    report = tmp_path / "cut.json"
    report.write_text(cut.to_json())
    # The next run resumes it on two workers (two Spark clients taking the leases on the metastore).
    done = run(concurrency=2, resume=report)
    assert done.exit_code == 0 and done.run_id == cut.run_id, done.to_json()
    ran = {(r.table, r.operation) for r in (*cut.outcomes, *done.outcomes) if r.status == "success"}
    assert ran == {(f"{NIGHT['fleet']}.{t}", op) for t in NIGHT_TABLES
                   for op in ("rewrite_data_files", "expire_snapshots")}, (cut.to_json(), done.to_json())
    # Every step of both runs has its history row, the backlog and the Hive table's skips too.
    written = sorted(run_history(sql, NIGHT['fleet'], cut.run_id))
    assert written == sorted((o.table, o.operation, "skipped" if o.status == "backlog" else o.status, o.reason)
                             for o in (*cut.outcomes, *done.outcomes)), written

    # The macro path on the other schema's same tables.
    macros = invoke_dbt(["run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args", json.dumps(
        {"select": "source:macros", "operations": NIGHT_OPERATIONS})], night, night)
    assert macros.success, macros.exception
    assert {(r.table.rsplit(".", 1)[-1], r.operation) for r in parse_result_lines(macros.log_messages)
            if r.status == "success"} == {(t, op) for t in NIGHT_TABLES for op in ("rewrite_data_files",
                                                                                 "expire_snapshots")}
    metadata = open_catalog(catalog)
    for table in NIGHT_TABLES:
        fleet_health, macro_health = read_health(metadata, [f"{NIGHT['fleet']}.{table}", f"{NIGHT['macros']}.{table}"])
        assert fleet_health.figures is not None and macro_health.figures is not None, (fleet_health, macro_health)
        assert {k: fleet_health.figures.get(k) for k in HEALTH_KEYS} == {
            k: macro_health.figures.get(k) for k in HEALTH_KEYS}, table
        # The gate table's files were each a group of their own: rewritten one by one, as many as before.
        assert (fleet_health.figures["data_files"], fleet_health.figures["snapshots"]) == (
            GATE_FILES if table == "gate" else 1, 1), table
        assert sql.scalar(f"select count(*) from {NIGHT['fleet']}.{table}") == rows[table]
    # The Hive table: the same files, the same rows.
    assert files_under(location(sql, hive)) == hive_files
    assert sql.scalar(f"select count(*) from {hive}") == rows[NIGHT_HIVE]


@pytest.mark.lab  # a step timeout against a slow compaction on a shared server
def test_a_fleet_step_killed_at_its_timeout_has_its_history_row_and_loses_no_row(
        night: Path, sql: ThriftSql, hive_metastore: HiveMetastore) -> None:
    catalog = config_from_options(None, ["type=hive", f"uri={hive_metastore.uri}"], "spark_catalog")
    table = f"{NIGHT['fleet']}.{NIGHT_SLOW}"
    rows = sql.scalar(f"select count(*) from {table}")
    report = run_fleet([f"source:fleet.{NIGHT_SLOW}"], NIGHT_OPERATIONS, project_dir=night, profiles_dir=night,
                       catalog=catalog, step_timeout_s=f"{SLOW_TIMEOUT_S}s")
    by_operation = {r.operation: r for r in report.outcomes}
    stopped = by_operation["rewrite_data_files"]
    assert (stopped.status, stopped.kind) == ("failed", "timeout"), report.to_json()
    assert by_operation["expire_snapshots"].status == "skipped", report.to_json()
    assert report.exit_code == 1
    # The killed step's row and the skipped one's, written by the engine once the run ended.
    written = sorted(run_history(sql, NIGHT['fleet'], report.run_id))
    assert written == sorted((o.table, o.operation, o.status, o.reason) for o in report.outcomes), written
    # The CALL may go on in the server after its client was killed: whatever it committed, every row is there.
    sql.execute(f"refresh table {table}")
    assert sql.scalar(f"select count(*) from {table}") == rows

