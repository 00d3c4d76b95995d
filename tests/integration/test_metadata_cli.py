"""`dbt-iceberg-maint health` and `plan` end to end on a real warehouse: text, JSON, HTML report
rendered in real headless chromium, per-table errors for unreadable metadata, exit codes."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from dbt_iceberg_maint.cli import main
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT
from lab.chromium import screenshot

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration
# Per-table errors of unreadable Hadoop metadata (version-hint.text): a Hadoop catalog's warehouse.
CATALOG_PROPERTIES = {"type": "hadoop"}


@pytest.fixture(scope="module")
def lake(spark: SparkSession, warehouse: Path, dbt_project: DbtProject) -> Path:
    """The integration project's models, built twice (small files), plus broken table metadata."""
    dbt_project("seed")
    for batch in (1, 2):
        dbt_project("run", batch=batch)
    schema = warehouse / dbt_project.schema
    (schema / "corrupt" / "metadata").mkdir(parents=True)
    (schema / "corrupt" / "metadata" / "version-hint.text").write_text("1")
    (schema / "corrupt" / "metadata" / "v1.metadata.json").write_text('{"format-version": 2, ')
    (schema / "not_iceberg" / "metadata").mkdir(parents=True)
    return warehouse


def test_health_text_json_and_per_table_errors(lake: Path, dbt_project: DbtProject, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["health", "--warehouse", str(lake), "--output", "json"])
    assert result.exit_code == 1, result.output  # two unreadable tables, the others fine
    records = {r["table"]: r for r in json.loads(result.output)}
    schema = dbt_project.schema
    assert set(records) >= {f"{schema}.events", f"{schema}.event_log", f"{schema}.corrupt", f"{schema}.not_iceberg"}
    assert "error" in records[f"{schema}.corrupt"] and "error" in records[f"{schema}.not_iceberg"]
    assert "version-hint" in records[f"{schema}.not_iceberg"]["error"]
    event_log = records[f"{schema}.event_log"]
    assert event_log["data_files"] >= 2 and event_log["snapshots"] == 2
    only = runner.invoke(main, ["health", f"{schema}.event_log", "--warehouse", str(lake)])
    assert only.exit_code == 0, only.output
    first_cells = [line.split("│")[1].strip() for line in only.output.splitlines() if line.startswith("│")]
    assert first_cells == [f"{schema}.event_log"]  # the output layer's table: one row
    bad = runner.invoke(main, ["health", "--catalog-property", "type=jdbc", "--catalog-property", "url=x"])
    assert bad.exit_code == 2 and "catalog property url is not supported for type=jdbc" in bad.output


def test_html_report_renders_in_chromium(lake: Path, dbt_project: DbtProject, spark: SparkSession,
                                         tmp_path: Path) -> None:
    runner = CliRunner()
    before = tmp_path / "before.json"
    assert runner.invoke(main, ["health", "--warehouse", str(lake), "--output", "json", "--report",
                                str(before)]).exit_code == 1
    spark.sql(f"call local.system.rewrite_data_files(table => '{dbt_project.schema}.event_log', "
              "options => map('min-input-files', '2'))")
    report = tmp_path / "health.html"
    result = runner.invoke(main, ["health", "--warehouse", str(lake), "--output", "html", "--report", str(report),
                                  "--compare", str(before)])
    assert result.exit_code == 1, result.output
    page = report.read_text()
    assert "before / after" in page and 'class="changed"' in page and "<svg" in page
    assert report.with_suffix(".png").stat().st_size > 5000
    shot = screenshot(report, tmp_path / "shot.png")
    from PIL import Image

    image = Image.open(shot).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20) or []
    assert image.size == (1200, 1600) and len(colours) > 50  # text, bars and tables, not a blank page
    print(f"screenshot: {shot}")


def test_plan_reads_the_project_and_emits_args(lake: Path, dbt_project: DbtProject, spark: SparkSession) -> None:
    # As if event_log was last swept for orphans 13 h ago: its interval (12 h) decides, not its age.
    swept = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=13)).strftime("%Y-%m-%dT%H:%M:%SZ")
    spark.sql(f"alter table {dbt_project.table('event_log')} "
              f"set tblproperties ('dbt-iceberg-maint.checked-at.remove_orphan_files' = '{swept}')")
    runner = CliRunner()
    args = ["plan", "--warehouse", str(lake), "--project-dir", str(INTEGRATION_PROJECT), "--output", "json"]
    result = runner.invoke(main, args, env=dbt_project.env)  # the module's schema and dbt target folder
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    by_key = {(p["model"].rsplit(".", 1)[-1], p["operation"]): p for p in plan}
    assert by_key[("user_summary", "rewrite_data_files")]["reason"] == (
        "maintenance disabled by meta.iceberg_maint.enabled: false")
    assert by_key[("events", "rewrite_data_files")]["reason"].startswith("no partition has been quiet for 6 h")
    assert by_key[("event_log", "remove_orphan_files")]["status"] == "dry_run"
    # events was never swept and is minutes old, younger than the orphan window: no sweep planned.
    orphans = by_key[("events", "remove_orphan_files")]
    assert orphans["status"] == "skipped" and "younger than older_than_hours 72" in orphans["reason"], orphans
    emitted = runner.invoke(main, [*args[:-2], "--emit-args"], env=dbt_project.env)
    assert json.loads(emitted.output)["select"] == sorted(
        {p["model"].rsplit(".", 1)[-1] for p in plan if p["status"] == "dry_run"})
    # The var kill switch, as maintain() honours it; a bad --as-of is a usage error. The project is
    # parsed with the vars: lease_scenario enables models the manifest on disk does not have.
    off_vars = "{dbt_iceberg_maint_enabled: false, lease_scenario: true}"
    off = runner.invoke(main, [*args, "--vars", off_vars], env=dbt_project.env)
    assert off.exit_code == 0, off.output
    assert {(p["status"], p["reason"]) for p in json.loads(off.output)} == {
        ("skipped", "maintenance disabled by var dbt_iceberg_maint_enabled: false")}
    assert {"lease_t1", "lease_t4"} <= {p["model"].rsplit(".", 1)[-1] for p in json.loads(off.output)}
    assert not any(p["model"].endswith(".lease_t1") for p in plan)  # not without the var
    # Nothing due: no `{"select": []}` for a job that would select nothing; stderr says why.
    idle = runner.invoke(main, [*args[:-2], "--emit-args", "--vars", off_vars], env=dbt_project.env)
    assert (idle.exit_code, idle.stdout) == (0, ""), idle.output
    assert "no model or source has due work (0 operation(s) due on 0 table(s);" in idle.stderr, idle.stderr
    bad = runner.invoke(main, [*args, "--as-of", "yesterday"], env=dbt_project.env)
    assert bad.exit_code == 2 and "--as-of is 'yesterday'" in bad.output


def test_plan_includes_catalog_only_tables_by_pattern(lake: Path, dbt_project: DbtProject,
                                                      spark: SparkSession) -> None:
    """A table Spark wrote that no dbt node declares is planned with the var's policy; matched models
    left to their own policy and tables nobody covers are reported; a pattern that matches nothing
    is a usage error (it was a footer line and exit 0: issue 55)."""
    schema = dbt_project.schema
    raw = f"local.{schema}.raw_clicks"
    spark.sql(f"create table {raw} (id bigint) using iceberg")
    for i in range(6):
        spark.sql(f"insert into {raw} values ({i})")
    runner = CliRunner()
    args = ["plan", "--warehouse", str(lake), "--project-dir", str(INTEGRATION_PROJECT), "--output", "json",
            "--select", "events", "--operation", "compaction", "--operation", "expire_snapshots",
            "--include-catalog", f"{schema}.raw_*", "--include-catalog", f"{schema}.event*"]
    policy = "{dbt_iceberg_maint_catalog_policy: {compaction: {min_input_files: 5}, expire_snapshots: false}}"
    result = runner.invoke(main, [*args, "--vars", policy], env=dbt_project.env)
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    raw_rows = {p["operation"]: p for p in plan if p["model"] == f"catalog:{schema}.raw_clicks"}
    assert raw_rows["rewrite_data_files"]["status"] == "dry_run", raw_rows
    assert raw_rows["rewrite_data_files"]["sql"].startswith(
        f"CALL system.rewrite_data_files(table => '{schema}.raw_clicks'")
    assert raw_rows["expire_snapshots"]["status"] == "skipped", raw_rows  # the var's policy switched it off
    # events and event_log are dbt models: left to their own policy (events is selected, event_log not).
    models = {p["model"] for p in plan}
    assert models - {f"catalog:{schema}.raw_clicks"} == {"iceberg_maint_integration_tests.events"}, models
    note = result.stderr
    assert "1 catalog-only table(s) taken" in note and "matching no table" not in note, note
    # Every other matched table is a model or a seed of the project (events, event_log, raw_*).
    modelled = sorted(f"{schema}.{d.name}" for d in (lake / schema).iterdir()
                      if d.name.startswith(("event", "raw_")) and d.name != "raw_clicks" and (d / "metadata").is_dir())
    assert {f"{schema}.events", f"{schema}.event_log"} < set(modelled), modelled
    assert f"{len(modelled)} matched table(s) left to their dbt model or source: {', '.join(modelled)};" in note, note
    assert f"{schema}.corrupt" in note.split("no pattern covers:")[1], note
    # Catalog-only tables are no dbt node: --emit-args never names them. raw_clicks is the only
    # table with due work here, so no dbt node has any: nothing is emitted.
    emitted = runner.invoke(main, [*args, "--emit-args", "--vars", policy], env=dbt_project.env)
    assert not any(p["status"] == "dry_run" for p in plan if not p["model"].startswith("catalog:")), plan
    assert (emitted.exit_code, emitted.stdout) == (0, ""), emitted.output
    assert "no model or source has due work" in emitted.stderr, emitted.stderr
    # Bad input: a malformed pattern, one that matches no table, or a bad policy is a usage error naming it.
    bad = runner.invoke(main, [*args, "--include-catalog", "no_dot"], env=dbt_project.env)
    assert bad.exit_code == 2 and "--include-catalog 'no_dot'" in bad.output, bad.output
    nowhere = runner.invoke(main, [*args, "--include-catalog", "nowhere.*", "--vars", policy], env=dbt_project.env)
    assert nowhere.exit_code == 2 and nowhere.stdout == "", nowhere.output
    assert nowhere.stderr.splitlines() == ["error: --include-catalog 'nowhere.*' matches no table of catalog local"]
    refused = runner.invoke(main, [*args, "--vars", "{dbt_iceberg_maint_catalog_policy: {compaction: 3}}"],
                            env=dbt_project.env)
    assert refused.exit_code == 2 and "var dbt_iceberg_maint_catalog_policy" in refused.output, refused.output
