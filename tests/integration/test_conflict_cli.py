"""`dbt-iceberg-maint run` end to end on real dbt + Spark: report file, JSON output, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dbt_iceberg_maint.cli import main
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT

pytestmark = pytest.mark.integration


@pytest.fixture()
def cli_env(warehouse: Path, installed_package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBT_ICEBERG_MAINT_SCHEMA", "it_conflict_cli")


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        main, ["run", "--project-dir", str(INTEGRATION_PROJECT), "--profiles-dir", str(INTEGRATION_PROJECT),
               "--backoff-seconds", "0", *args],
    )
    return result.exit_code, result.output


def test_sql_error_is_reported_not_re_run_and_exits_1(cli_env: None, tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    code, output = invoke("--command", "build", "--report", str(report_path), "--output", "json",
                          "--select", "raw_users", "conflict_sql_error", "--vars", "{conflict_scenario: true}")
    assert code == 1, output
    report = json.loads(report_path.read_text())
    assert json.loads(output[output.index("{"):]) == report
    nodes = {node["name"]: node for node in report["nodes"]}
    assert nodes["raw_users"]["final_status"] == "success" and nodes["raw_users"]["attempts"] == 1
    broken = nodes["conflict_sql_error"]
    assert (broken["final_status"], broken["attempts"], broken["kinds"]) == ("error", 1, ["not_iceberg_conflict"])
    assert broken["not_rerun_reason"].startswith("not_iceberg_conflict")
    assert report["attempts"] == 1 and report["success"] is False


def test_clean_run_exits_0_with_a_text_report(cli_env: None) -> None:
    code, output = invoke("--command", "build", "--select", "raw_users")
    assert code == 0, output
    assert "all nodes succeeded after 1 attempt(s)" in output


def test_dbt_rejecting_its_arguments_is_a_usage_error(cli_env: None) -> None:
    code, output = invoke("--no-such-dbt-flag")
    assert code == 2, output
    assert "no-such-dbt-flag" in output
