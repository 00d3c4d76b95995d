"""`dbt-iceberg-maint` as a command, end to end: click's CliRunner in-process, real dbt, real Spark.

- `run --command build`: a MERGE that loses a real catalog race is re-run, a failing data test
  is reported and not re-run; exit code, `--output json`, `--report`.
- `classify` on the real structured (JSON) dbt.log of that run.
- `maintain`: exit 0, 1 (an operation failed for real: `gc.enabled=false`), 2 (usage errors).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner, Result

from dbt_iceberg_maint.cli import main
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT
from tests.expect import first, json_document
from tests.integration.concurrency import HADOOP_CATALOG, RACE_CATALOG, join_all, lose_catalog_race, other_job

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration
# The lost commit race staged here is the Hadoop catalog's (tests/integration/concurrency.py).
CATALOG_PROPERTIES = HADOOP_CATALOG

TIMEOUT_SECONDS = 180.0
PROJECT = ["--project-dir", str(INTEGRATION_PROJECT)]


def cli(dbt_project: DbtProject, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=dict(dbt_project.env), catch_exceptions=False)



@pytest.fixture(scope="module")
def built(dbt_project: DbtProject) -> DbtProject:
    dbt_project("seed", "--select", "raw_events")
    dbt_project("run", "--select", "event_log", "cli_merge", "cli_checked", "--vars", "{cli_scenario: true, batch: 1}")
    dbt_project("run", "--select", "event_log", batch=2)
    return dbt_project


@pytest.fixture(scope="module")
def build_run(
    spark: SparkSession, warehouse: Path, built: DbtProject, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Result, Path, Path]]:
    tmp = tmp_path_factory.mktemp("cli_run")
    job = other_job(spark, warehouse, tmp)
    metadata = warehouse.resolve() / built.schema / "cli_merge" / "metadata"
    race = lose_catalog_race(spark, job, metadata, f"{RACE_CATALOG}.{built.schema}.cli_merge",
                             name="cli_merge", timeout_seconds=TIMEOUT_SECONDS)
    report, logs = tmp / "report.json", tmp / "logs"
    try:
        result = cli(
            built, "run", "--command", "build", "--max-attempts", "2", "--backoff-seconds", "0",
            "--output", "json", "--report", str(report), *PROJECT,
            "--select", "cli_merge", "cli_checked", "--vars", "{cli_scenario: true, batch: 2}",
            "--log-path", str(logs), "--log-format-file", "json",
        )
    finally:
        join_all([race], TIMEOUT_SECONDS)
    race.check()
    yield result, report, logs


def nodes_by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {node["name"]: node for node in document["nodes"]}


def test_run_build_re_runs_the_lost_race_and_reports_the_failing_test(
    build_run: tuple[Result, Path, Path], spark: SparkSession, built: DbtProject
) -> None:
    result, report, _ = build_run
    assert result.exit_code == 1, result.output  # the data test still fails
    document = json_document(result.stdout)
    assert json.loads(report.read_text()) == document
    assert document["success"] is False and document["attempts"] == 2
    nodes = nodes_by_name(document)
    merge = nodes["cli_merge"]
    assert merge["kinds"] == ["commit_failed", None] and merge["final_status"] == "success"
    assert "already exists" in first(merge["history"], "an attempt of cli_merge")["message"]
    [test] = [n for n in document["nodes"] if n["resource_type"] == "test"]
    assert test["name"].startswith("accepted_values_cli_checked_event_type")
    assert test["final_status"] == "fail" and test["kinds"] == ["not_iceberg_conflict"]
    assert test["not_rerun_reason"].startswith("not_iceberg_conflict")
    # The re-run merged batch 2 once: one row per event id, all from batch 2, plus the race's row.
    row = spark.sql(
        f"select count(*) as n, count(distinct event_id) as ids, sum(if(loaded_batch = 2, 1, 0)) as b2 "
        f"from {built.table('cli_merge')}"
    ).collect()[0]
    raw_events = built.table("raw_events")
    raw = spark.sql(f"select count(distinct event_id) from {raw_events} where batch <= 2").collect()[0][0]
    assert (row["n"], row["ids"], row["b2"]) == (raw + 1, raw + 1, raw)


def test_classify_reads_the_real_json_dbt_log(build_run: tuple[Result, Path, Path], built: DbtProject) -> None:
    _, _, logs = build_run
    log = logs / "dbt.log"
    first_line = log.read_text().splitlines()[0]
    assert json.loads(first_line)["info"]["name"]  # really dbt's structured log
    result = cli(built, "classify", "--output", "json", str(log))
    assert result.exit_code == 0, result.output
    rows = json_document(result.stdout)
    kinds = {(row["source"], row["kind"]) for row in rows}
    assert any("cli_merge" in source and kind == "commit_failed" for source, kind in kinds), kinds
    assert any("accepted_values" in source and kind == "not_iceberg_conflict" for source, kind in kinds), kinds
    assert {kind for _, kind in kinds} == {"commit_failed", "not_iceberg_conflict"}


def test_maintain_command_succeeds_with_json_output_and_report(
    built: DbtProject, tmp_path: Path, spark: SparkSession
) -> None:
    report = tmp_path / "maintenance.json"
    result = cli(built, "maintain", "--select", "event_log", "--operation", "rewrite_manifests", "--force",
                 "--output", "json", "--report", str(report), *PROJECT)
    assert result.exit_code == 0, result.output
    document = json_document(result.stdout)
    assert json.loads(report.read_text()) == document
    [record] = document["results"]
    assert (record["operation"], record["status"]) == ("rewrite_manifests", "success")
    assert record["table"].endswith(f"{built.schema}.event_log")
    assert document["counts"]["success"] == 1 and document["counts"]["failed"] == 0


def test_a_fleet_run_creates_its_lease_log_checks_its_catalog_and_takes_the_lease_once(
        built: DbtProject, spark: SparkSession) -> None:
    """The fleet engine (`--concurrency 1`) over a table's expiry and orphan removal, one step (one
    dbt invocation) each, both behind the Nessie check: the namespace's lease log is created (by the
    batch claim before the first step) and the catalog checked by the first step only; the second
    is told what the first found. The table's lease is claimed and its log read once, by the batch
    claim (claim_leases); both steps take it up and keep it, and the run releases it at its end:
    one claim, one read and one release for the table (dbt.log holds every statement the run
    sent)."""
    log = Path(built.env["DBT_LOG_PATH"]) / "dbt.log"
    start = log.stat().st_size if log.is_file() else 0
    result = cli(built, "maintain", "--select", "event_log", "--operation", "expire_snapshots", "--operation",
                 "remove_orphan_files", "--force", "--concurrency", "1", "--output", "json", *PROJECT)
    assert result.exit_code == 0, result.output
    steps = json_document(result.stdout)["results"]
    assert [(r["operation"], r["status"]) for r in steps] == [("expire_snapshots", "success"),
                                                             ("remove_orphan_files", "success")]
    with log.open(encoding="utf-8", errors="replace") as text:
        text.seek(start)
        records = re.split(r"\n(?=\x1b\[0m\d\d:\d\d:\d\d)", text.read())
    # dbt logs each statement as `On <connection>: /* query comment */ SQL`.
    sent = [re.sub(r"^.*?\]: On [^:]+: (/\*.*?\*/)?\s*", "", r, flags=re.S) for r in records
            if re.search(r"\]: On [^:]+: ", r)]

    def count(start: str) -> int:
        return sum(sql.startswith(start) for sql in sent)

    assert count("CALL system.expire_snapshots(") == 1 and count("CALL system.remove_orphan_files(") == 1
    assert count(f"create table if not exists {built.schema}.iceberg_maint_leases ") == 1
    assert count("select current_catalog()") == 1
    append = f"insert into {built.schema}.iceberg_maint_leases values ('event_log', "
    assert (count(append + "'claim'"), count(append + "'renew'"), count(append + "'release'")) == (1, 0, 1)
    assert count(f"select l.table_name, l.event, l.claim_id, l.holder, l.path, l.at_ms, l.expires_ms, "
                 f"e.sequence_number as seq from {built.schema}.iceberg_maint_leases l ") == 1
    # The log says the same: this run's one claim, then its release (nobody holds the lease).
    leases = built.table("iceberg_maint_leases")
    spark.sql(f"refresh table {leases}")
    events = spark.sql(f"select event, claim_id, path from {leases} where table_name = 'event_log' "
                       f"and holder = '{json_document(result.stdout)['run_id']}' order by at_ms").collect()
    assert [(e.event, e.path) for e in events] == [("claim", "claim_leases"), ("release", "claim_leases")]
    assert events[0].claim_id == events[1].claim_id
    # Each step logged its history row instead of writing it, and sent no health read: the engine
    # read the health after it from the metadata file and wrote both rows in one INSERT, with the
    # release at the run's end.
    assert count(f"insert into {built.schema}.iceberg_maint_history ") == 1
    assert count("select count(*) as snapshots") == 0
    history = built.table("iceberg_maint_history")
    spark.sql(f"refresh table {history}")
    rows = spark.sql(f"select operation, status, path, health_before, health_after, snapshot_id_after "
                     f"from {history} where run_id = '{json_document(result.stdout)['run_id']}' "
                     "order by started_at").collect()
    assert [(r.operation, r.status, r.path) for r in rows] == [
        ("expire_snapshots", "success", "execute_maintenance_steps"),
        ("remove_orphan_files", "success", "execute_maintenance_steps")]
    first, second = (json.loads(r.health_after) for r in rows)
    assert rows[1].health_before == rows[0].health_after and rows[1].snapshot_id_after == second["snapshot_id"]
    # What Spark's snapshots table says of the table now (nothing wrote it since): the same figures.
    table = built.table("event_log")
    current = int(dict(spark.sql(f"show tblproperties {table}").collect())["current-snapshot-id"])
    summaries = {r.snapshot_id: r.summary for r in spark.sql(f"select snapshot_id, summary from {table}.snapshots")
                 .collect()}
    assert {key: second[key] for key in ("snapshots", "snapshot_id", "data_files", "delete_files")} == {
        "snapshots": len(summaries), "snapshot_id": current,
        "data_files": int(summaries[current]["total-data-files"]),
        "delete_files": int(summaries[current]["total-delete-files"])}
    assert first["snapshot_id"] == second["snapshot_id"] and second["oldest_snapshot_age_hours"] >= 0


def test_a_fleet_expiry_sets_the_catalog_policys_metadata_file_retention(
        built: DbtProject, spark: SparkSession, warehouse: Path) -> None:
    """`retain_metadata_files` through the fleet engine: a catalog-only table's expiry records its
    check with Iceberg's delete-after-commit and previous-versions-max, so that commit leaves its
    metadata folder the current metadata.json and one previous."""
    table = built.table("cli_retention")
    spark.sql(f"create table {table} (id bigint) using iceberg")
    for i in range(4):
        spark.sql(f"insert into {table} values ({i})")
    metadata = warehouse.resolve() / built.schema / "cli_retention" / "metadata"
    assert len(list(metadata.glob("*.metadata.json"))) == 5
    policy = ("{dbt_iceberg_maint_catalog_policy: {expire_snapshots: {older_than_hours: 0, retain_last: 1, "
              "retain_metadata_files: 1}, compaction: false, remove_orphan_files: false, rewrite_manifests: false}}")
    result = cli(built, "maintain", "--select", "event_log", "--operation", "expire_snapshots", "--include-catalog",
                 f"{built.schema}.cli_retention", "--concurrency", "1", "--output", "json", *PROJECT, "--vars", policy)
    assert result.exit_code == 0, result.output
    steps = {r["table"]: r for r in json_document(result.stdout)["results"]}
    assert steps[f"{built.schema}.cli_retention"]["status"] == "success", steps
    properties = dict(spark.sql(f"show tblproperties {table}").collect())
    assert properties["write.metadata.previous-versions-max"] == "1", properties
    assert properties["write.metadata.delete-after-commit.enabled"] == "true", properties
    assert len(list(metadata.glob("*.metadata.json"))) == 2
    assert spark.sql(f"select sum(id) from {table}").collect()[0][0] == 6


def test_maintain_command_exits_1_when_an_operation_fails(built: DbtProject, spark: SparkSession) -> None:
    table = built.table("event_log")
    spark.sql(f"alter table {table} set tblproperties ('gc.enabled' = 'false')")
    try:
        result = cli(built, "maintain", "--select", "event_log", "--operation", "expire_snapshots", "--force",
                     *PROJECT)
    finally:
        spark.sql(f"alter table {table} set tblproperties ('gc.enabled' = 'true')")
    assert result.exit_code == 1, result.output
    assert "1 operation(s) failed" in result.output
    assert "expire_snapshots" in result.output


def test_maintain_plan_and_health_on_a_table_that_does_not_exist_say_so_and_exit_1(built: DbtProject) -> None:
    """events is a model of the project but never built in this module: its table does not exist.
    Named explicitly, that is a failure (exit 1, the command line itself was valid), not a quiet
    success with every operation skipped."""
    table = f"{built.schema}.events"
    missing = f"table {table} does not exist"
    maintain = cli(built, "maintain", "--select", "events", "--operation", "rewrite_manifests", *PROJECT)
    assert maintain.exit_code == 1, maintain.output
    assert missing in maintain.stdout and "1 operation(s) failed" in maintain.stdout
    plan = cli(built, "plan", "--select", "events", "--operation", "rewrite_manifests", "--output", "json", *PROJECT)
    assert plan.exit_code == 1, plan.output
    [row] = json_document(plan.stdout)
    assert (row["table"], row["status"], row["due"]) == (table, "failed", False)
    assert row["reason"].startswith(missing)
    health = cli(built, "health", table, "--output", "json", *PROJECT)
    assert health.exit_code == 1, health.output
    [record] = json_document(health.stdout)
    assert record["error"].startswith(missing), record
    assert "1 of 1 table(s) could not be read" in cli(built, "health", table, *PROJECT).stdout


def test_maintain_on_a_mistyped_model_is_a_usage_error_with_dbts_message_alone(built: DbtProject) -> None:
    result = cli(built, "maintain", "--select", "evnts", *PROJECT)
    assert result.exit_code == 2, result.output
    assert "argument `select` contains 'evnts', which is not an enabled Iceberg model" in result.stderr
    assert "Traceback" not in result.stderr and "Flushing usage events" not in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["maintain", "--operation", "vacuum"], "'vacuum' is not one of"),
        (["maintain", "--select", "event_log", "--target", "session", "--force"],
         "--force after the dbt arguments would go to dbt"),
        (["run", "--max-attempts", "0"], "0 is not in the range x>=1"),
    ],
    ids=["unknown_operation", "own_option_after_dbt_args", "max_attempts_below_one"],
)
def test_usage_errors_exit_2_and_run_nothing(built: DbtProject, args: list[str], message: str) -> None:
    result = cli(built, args[0], *PROJECT, *args[1:])
    assert result.exit_code == 2, result.output
    assert message in result.output
