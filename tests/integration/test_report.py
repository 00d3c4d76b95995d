"""`dbt-iceberg-maint report` on real Spark: real maintenance runs write the history (a
compaction, two failed expiries in a row), the command reads it through the profile's catalog,
its figures equal the rows, its estimates equal what expire_snapshots and a remove_orphan_files
dry run then do, and its HTML page renders in real headless chromium (docs/report.md)."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from dbt_iceberg_maint.cli import main
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT
from lab.chromium import dump_dom, screenshot
from tests.integration.test_maintenance import build_project

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

HISTORY = "iceberg_maint_history"


@pytest.fixture(scope="module")
def maintained(spark: SparkSession, dbt_project: DbtProject) -> DbtProject:
    """A compaction and a manifest rewrite (run rep-1), then an expiry that fails twice (rep-2,
    rep-3: gc.enabled=false), all on event_log."""
    built = build_project(spark, dbt_project)
    built("run-operation", "iceberg_maintenance", "--args", json.dumps(
        {"select": "event_log", "operations": ["rewrite_data_files", "rewrite_manifests"], "force": True}),
          run_id="rep-1")
    event_log = built.table("event_log")
    spark.sql(f"alter table {event_log} set tblproperties ('gc.enabled'='false')")
    try:
        for run_id in ("rep-2", "rep-3"):
            built("run-operation", "iceberg_maintenance", "--args", json.dumps(
                {"select": "event_log", "operations": ["expire_snapshots"], "force": True}),
                  run_id=run_id, expect_success=False)
    finally:
        spark.sql(f"alter table {event_log} unset tblproperties ('gc.enabled')")
    # A file no snapshot references, two days old: what remove_orphan_files would delete.
    data_file = spark.sql(f"select file_path from {event_log}.files limit 1").collect()[0][0]
    orphan = Path(data_file.removeprefix("file:")).parent / "planted-orphan.parquet"
    orphan.write_bytes(b"orphan bytes")
    two_days_ago = (dt.datetime.now() - dt.timedelta(days=2)).timestamp()
    os.utime(orphan, (two_days_ago, two_days_ago))
    return built


def report(project: DbtProject, out: Path, *args: str) -> tuple[int, str]:
    env = {**project.env, "DBT_ICEBERG_MAINT_WAREHOUSE": os.environ["DBT_ICEBERG_MAINT_WAREHOUSE"]}
    result = CliRunner().invoke(main, ["report", "--project-dir", str(INTEGRATION_PROJECT), "--profiles-dir",
                                       str(INTEGRATION_PROJECT), "--out", str(out), *args], env=env)
    return result.exit_code, result.output


def history_rows(spark: SparkSession, project: DbtProject) -> list[dict[str, Any]]:
    spark.sql(f"refresh table {project.table(HISTORY)}")
    return [r.asDict() for r in spark.sql(f"select * from {project.table(HISTORY)}").collect()]


def test_report_figures_equal_the_history_and_the_page_renders(spark: SparkSession, maintained: DbtProject,
                                                                tmp_path: Path) -> None:
    out = tmp_path / "report"
    code, output = report(maintained, out, "--output", "json", "--days", "2", "--expire-older-than-hours", "0",
                          "--expire-retain-last", "1", "--orphan-older-than-hours", "24")
    assert code == 0, output
    document = json.loads(output)
    assert document == json.loads((out / "report.json").read_text())
    rows = history_rows(spark, maintained)
    table = f"{maintained.schema}.event_log"
    assert document["history_table"] == f"{maintained.schema}.{HISTORY}" and document["rows"] == len(rows)
    # Every run's figures are its rows' (the runs of this module: rep-1..3, plus any a post-hook wrote).
    runs = {r["run_id"]: r for r in document["runs"]}
    assert set(runs) == {r["run_id"] for r in rows} >= {"rep-1", "rep-2", "rep-3"}
    for run_id, figures in runs.items():
        mine = [r for r in rows if r["run_id"] == run_id]
        outputs = [json.loads(r["output"] or "{}") for r in mine]
        assert (figures["steps"], figures["succeeded"], figures["failed"], figures["skipped"],
                figures["procedure_ms"]) == (len(mine), sum(r["status"] == "success" for r in mine),
                                             sum(r["status"] == "failed" for r in mine),
                                             sum(r["status"] == "skipped" for r in mine),
                                             sum(r["duration_ms"] for r in mine)), run_id
        assert figures["bytes_compacted"] == sum(o.get("rewritten_bytes_count", 0) for o, r in zip(
            outputs, mine, strict=True) if r["operation"] == "rewrite_data_files")
        assert figures["manifests_rewritten"] == sum(o.get("rewritten_manifests_count", 0) for o in outputs)
    assert runs["rep-1"]["bytes_compacted"] > 0 and runs["rep-1"]["data_files_rewritten"] > 0
    # The two failed expiries are a streak of two, and the backlog of the last run.
    [event_log] = [t for t in document["tables"] if t["table"] == table]
    assert [(s["operation"], s["runs_in_a_row"], s["kinds"], s["last_run_id"]) for s in event_log["streaks"]] == [
        ("expire_snapshots", 2, ["failed"], "rep-3")]
    assert [(b["table"], b["operation"], b["kind"]) for b in document["backlog"]] == [
        (table, "expire_snapshots", "failed")]
    assert document["last_run_id"] == "rep-3" and event_log["rank"] == 1 and event_log["failed_steps"] == 2
    # Its figures now are the table's; the trend ends with them.
    files = spark.sql(f"select count(*) from {maintained.table('event_log')}.files").collect()[0][0]
    snapshots = spark.sql(f"select count(*) from {maintained.table('event_log')}.snapshots").collect()[0][0]
    assert (event_log["current"]["data_files"], event_log["current"]["snapshots"]) == (files, snapshots)
    assert event_log["trend"][-1]["source"] == "now" and len(event_log["trend"]) >= 3

    check_estimates(spark, maintained, event_log["estimates"], dt.datetime.fromisoformat(document["generated_at"]))
    check_page(out, document, table)


def check_estimates(spark: SparkSession, project: DbtProject, estimates: dict[str, Any], at: dt.datetime) -> None:
    """The report's estimates (expiry: older than now, retain 1; orphans: older than 24 h, the
    procedure's shortest interval) equal what the procedures then do."""
    name = project.table("event_log")
    stamp = at.strftime("%Y-%m-%d %H:%M:%S.%f")
    day_before = (at - dt.timedelta(hours=24)).strftime("%Y-%m-%d %H:%M:%S.%f")
    assert estimates["error"] is None and estimates["expiring_snapshots"] >= 1, estimates
    assert estimates["orphan_files"] == 1 and estimates["orphan_bytes"] == len(b"orphan bytes"), estimates
    orphans = spark.sql(f"call local.system.remove_orphan_files(table => '{project.schema}.event_log', "
                        f"older_than => timestamp '{day_before}', dry_run => true)").collect()
    assert [Path(r[0]).name for r in orphans] == ["planted-orphan.parquet"]
    [expired] = spark.sql(f"call local.system.expire_snapshots(table => '{project.schema}.event_log', "
                          f"older_than => timestamp '{stamp}', retain_last => 1)").collect()
    deleted = sum(v for k, v in expired.asDict().items() if k.startswith("deleted_"))
    assert deleted == estimates["expire_files"] > 0, (expired, estimates)
    assert spark.sql(f"select count(*) from {name}.snapshots").collect()[0][0] == 1


def check_page(out: Path, document: dict[str, Any], table: str) -> None:
    page = (out / "report.html").read_text()
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == sorted(document["charts"]) and {"ranking.png", "runs.png"} <= set(pngs)
    assert page.count("data:image/png;base64,") == len(pngs) and "<script" not in page
    dom = dump_dom(out / "report.html")
    for text in (table, "Worst tables first", "Backlog of the last run", "Failure and skip streaks", "rep-3"):
        assert text in dom, text
    shot = screenshot(out / "report.html", out / "screenshot.png", width=1280, height=2000)
    from PIL import Image

    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 2000) and len(image.getcolors(maxcolors=1 << 20) or []) > 100


def test_a_missing_history_table_says_which_and_why(maintained: DbtProject, tmp_path: Path) -> None:
    code, output = report(maintained, tmp_path, "--history-table", f"{maintained.schema}.no_history")
    assert code == 1 and f"table {maintained.schema}.no_history does not exist" in output, output
    assert "dbt_iceberg_maint_history_enabled" in output


def test_estimates_assume_each_models_own_policy_unless_an_option_sets_it(maintained: DbtProject,
                                                                          tmp_path: Path) -> None:
    """event_log's policy (integration_tests/dbt_project.yml): expire_snapshots older_than_hours 1,
    retain_last 2; remove_orphan_files not set, so the package default 72 h. An option given
    holds for every table; the others still come from the policy."""
    table = f"{maintained.schema}.event_log"

    def settings(*args: str) -> tuple[Any, ...]:
        code, output = report(maintained, tmp_path / "-".join(args or ("policy",)), "--output", "json", *args)
        assert code == 0, output
        [found] = [t["estimates"] for t in json.loads(output)["tables"] if t["table"] == table]
        assert found["error"] is None, found
        return found["expire_older_than_hours"], found["expire_retain_last"], found["orphan_older_than_hours"]

    assert settings() == (1, 2, 72)
    assert settings("--expire-retain-last", "4") == (1, 4, 72)
