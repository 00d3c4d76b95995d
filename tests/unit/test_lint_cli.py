"""`dbt-iceberg-maint lint` on real tiny dbt projects: dbt parse runs in-process and connects to
nothing, so these need no Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from dbt_iceberg_maint.cli import main

PROFILE = """lint_tiny:
  target: dev
  outputs:
    dev: {type: spark, method: session, host: NA, schema: analytics}
"""
PROJECT = """name: lint_tiny
version: "1.0"
config-version: 2
profile: lint_tiny
models:
  lint_tiny:
    +file_format: iceberg
"""
MERGE_MODEL = """{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id',
    partition_by=['days(ts)'], meta={'iceberg_maint': {'compaction': {'cold_partitions_hours': 6}%s}}) }}
select 1 as id, current_timestamp() as ts
"""


def make_project(root: Path, policy_extra: str = "", extra_model: str | None = None) -> Path:
    root.mkdir()
    (root / "dbt_project.yml").write_text(PROJECT)
    (root / "profiles.yml").write_text(PROFILE)
    (root / "models").mkdir()
    (root / "models" / "events.sql").write_text(MERGE_MODEL % policy_extra)
    if extra_model is not None:
        (root / "models" / "extra.sql").write_text(extra_model)
    return root


def lint(*args: str) -> Result:
    return CliRunner().invoke(main, ["lint", *args])


def test_warnings_only_exit_0_and_json_lists_the_findings(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    result = lint("--project-dir", str(project), "--output", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [{
        "rule": "merge_without_partition_predicate", "severity": "warning", "node": "model.lint_tiny.events",
        "message": json.loads(result.output)[0]["message"],
        "suggestion": json.loads(result.output)[0]["suggestion"],
    }]
    assert json.loads(result.output)[0]["suggestion"].startswith(
        'incremental_predicates: ["DBT_INTERNAL_DEST.ts >= date_sub(current_date(), 3)"]')
    assert not (project / "target").exists()  # dbt parse wrote to a temporary target path


def test_an_error_finding_exits_1_and_silencing_is_reported_in_text(tmp_path: Path) -> None:
    policy = (", 'remove_orphan_files': {'older_than_hours': 6}, 'lint_ignore': "
              "{'merge_without_partition_predicate': 'one writer per table, nightly'}")
    project = make_project(tmp_path / "p", policy)
    result = lint("--project-dir", str(project))
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert lines[0] == "model.lint_tiny.events"
    assert lines[1].startswith("  error   invalid_policy: remove_orphan_files: argument `older_than_hours` is 6; it "
                               "must be at least 24")
    assert lines[-1] == ("1 model(s) checked: 1 error, 0 warnings, 0 infos; "
                         "1 silenced by meta.iceberg_maint.lint_ignore")


def test_a_project_dbt_cannot_parse_is_a_usage_error_with_dbts_message(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", extra_model="select {{ ref('no_such_model') }}.x")
    result = lint("--project-dir", str(project))
    assert result.exit_code == 2
    assert "error: dbt parse failed for project" in result.output
    assert "no_such_model" in result.output  # dbt's own message


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--vars", "{lint: [unclosed"], "error: dbt parse failed for project"),
        (["--target", "nope"], "nope"),
    ],
)
def test_bad_dbt_arguments_are_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    project = make_project(tmp_path / "p")
    result = lint("--project-dir", str(project), *args)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_an_invalid_lint_ignore_and_unreadable_run_results_are_usage_errors(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", ", 'lint_ignore': {'no_such_rule': 'why'}")
    result = lint("--project-dir", str(project))
    assert result.exit_code == 2
    assert "names unknown rule 'no_such_rule'; allowed: compaction_not_cold_scoped" in result.output
    broken = tmp_path / "run_results.json"
    broken.write_text("{not json")
    result = lint("--project-dir", str(project), "--run-results", str(broken))
    assert result.exit_code == 2
    assert f"error: --run-results {broken}: cannot read it as JSON" in result.output


def test_run_results_add_observed_durations_to_the_orphan_rule(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", ", 'lint_ignore': {'merge_without_partition_predicate': 'one writer'}")
    runs = []
    for hours in (2, 40):
        path = tmp_path / f"run_results_{hours}.json"
        path.write_text(json.dumps({"results": [{"unique_id": "model.lint_tiny.events", "status": "success",
                                                 "execution_time": hours * 3600.0}]}))
        runs += ["--run-results", str(path)]
    result = lint("--project-dir", str(project), "--output", "json", *runs)
    assert result.exit_code == 1, result.output
    [finding] = json.loads(result.output)
    assert (finding["rule"], finding["severity"]) == ("orphan_window_too_short", "error")
    assert finding["message"].startswith("remove_orphan_files.older_than_hours is 72 but events ran 40.0 h")
    assert finding["suggestion"].startswith("meta.iceberg_maint.remove_orphan_files.older_than_hours: 80 ")


def test_a_typo_in_dbt_project_yml_is_reported_once_where_it_is(tmp_path: Path) -> None:
    """Real dbt parse: dbt_project.yml's +meta reaches every model below it; its two typos are two
    findings naming the place, the models inheriting them and the key meant."""
    root = tmp_path / "p"
    (root / "models" / "staging").mkdir(parents=True)
    (root / "dbt_project.yml").write_text(PROJECT + """    +materialized: table
    staging:
      +meta:
        iceberg_maint: {compactoin: {min_input_files: 2}, expire_snapshots: {retain_lst: 3}}
""")
    (root / "profiles.yml").write_text(PROFILE)
    for name in ("a", "b", "c", "d"):
        (root / "models" / "staging" / f"{name}.sql").write_text("select 1 as id")
    result = lint("--project-dir", str(root), "--output", "json")
    assert result.exit_code == 1, result.output
    found = json.loads(result.output)
    assert [(f["rule"], f["node"]) for f in found] == [("invalid_policy", "model.lint_tiny.a")] * 2, found
    where = ("configured in dbt_project.yml `models: lint_tiny: staging: +meta: iceberg_maint`, inherited by 4 "
             "Iceberg models (a, b, c and 1 more)")
    assert all(where in f["message"] for f in found), found
    assert "`compactoin` (did you mean `compaction`?)" in found[0]["message"]
    assert "`retain_lst` (did you mean `retain_last`?)" in found[1]["message"]
