"""`dbt-iceberg-maint health` and `plan` end to end on a real warehouse: text, JSON, HTML report
rendered in real headless chromium, per-table errors for unreadable metadata, exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from dbt_iceberg_maint.cli import main
from dbt_iceberg_maint.invoke import INTEGRATION_PROJECT
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
        dbt_project("run", "--vars", f"{{batch: {batch}}}")
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


def test_plan_reads_the_project_and_emits_args(lake: Path, dbt_project: DbtProject) -> None:
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
    emitted = runner.invoke(main, [*args[:-2], "--emit-args"], env=dbt_project.env)
    assert json.loads(emitted.output)["select"] == sorted(
        {p["model"].rsplit(".", 1)[-1] for p in plan if p["status"] == "dry_run"})
    # The var kill switch, as maintain() honours it; a bad --as-of is a usage error.
    off = runner.invoke(main, [*args, "--vars", "{dbt_iceberg_maint_enabled: false}"],
                        env=dbt_project.env)
    assert off.exit_code == 0, off.output
    assert {(p["status"], p["reason"]) for p in json.loads(off.output)} == {
        ("skipped", "maintenance disabled by var dbt_iceberg_maint_enabled: false")}
    bad = runner.invoke(main, [*args, "--as-of", "yesterday"], env=dbt_project.env)
    assert bad.exit_code == 2 and "--as-of is 'yesterday'" in bad.output
