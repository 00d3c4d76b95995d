"""`dbt-iceberg-maint lint` of the integration project: the exact findings, from dbt parse (the
lint and conflict scenario models are enabled by vars, as in their own tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dbt_iceberg_maint.cli import main
from dbt_iceberg_maint.lint import run_lint
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT

pytestmark = pytest.mark.integration

PREFIX = "model.iceberg_maint_integration_tests."


def short(node: str) -> str:
    assert node.startswith(PREFIX)
    return node[len(PREFIX):]


def test_lint_of_the_project_as_the_demo_builds_it(installed_package: Path) -> None:
    result = CliRunner().invoke(main, ["lint", "--project-dir", str(INTEGRATION_PROJECT), "--output", "json"])
    assert result.exit_code == 0, result.output  # warnings and infos only
    findings = [(f["rule"], f["severity"], short(f["node"])) for f in json.loads(result.output)]
    assert findings == [
        ("compaction_not_cold_scoped", "warning", "event_log"),
        ("properties_never_reconciled", "warning", "event_log"),
        # events declares merge isolation snapshot and reconciles it with its post-hook
        ("merge_without_partition_predicate", "info", "events"),
    ]


def test_lint_of_the_project_with_the_lint_and_conflict_scenarios(installed_package: Path) -> None:
    result = run_lint(INTEGRATION_PROJECT, vars_yaml="{lint_scenario: true, conflict_scenario: true}")
    findings = [(f.rule, f.severity, short(f.node)) for f in result.findings]
    assert findings == [
        ("merge_without_partition_predicate", "warning", "conflict_merge"),
        ("compaction_not_cold_scoped", "warning", "conflict_merge"),
        ("merge_without_partition_predicate", "warning", "conflict_merge_unsafe"),
        ("compaction_not_cold_scoped", "warning", "conflict_merge_unsafe"),
        ("compaction_not_cold_scoped", "warning", "event_log"),
        ("properties_never_reconciled", "warning", "event_log"),
        ("merge_without_partition_predicate", "info", "events"),
        ("invalid_policy", "error", "lint_bad_policy"),
        ("invalid_where", "error", "lint_bad_policy"),
        ("invalid_where", "error", "lint_bad_policy"),
        ("merge_without_unique_key", "warning", "lint_unkeyed_merge"),
    ]
    assert result.exit_code == 1
    by_rule = {(f.rule, short(f.node)): f for f in result.findings}
    assert by_rule[("merge_without_partition_predicate", "conflict_merge")].suggestion.startswith(
        'incremental_predicates: ["DBT_INTERNAL_DEST.event_ts >= date_sub(current_date(), 3)"]')
    bad = [f.message for f in result.findings if short(f.node) == "lint_bad_policy"]
    # The macros' own refusal (the policy engine), then what only the lint sees (sqlglot, columns).
    assert bad[0].startswith("remove_orphan_files: argument `older_than_hours` is 12; it must be at least 24: ")
    assert bad[0].endswith("so the maintenance step fails after the model is built")
    assert bad[1].startswith("meta.iceberg_maint.compaction.where 'event_date <': sqlglot cannot parse it as "
                             "Spark SQL: ")  # then sqlglot's own message
    assert bad[1].endswith("; the maintenance run fails")
    assert bad[2] == (
        "meta.iceberg_maint.rewrite_position_delete_files.where 'event_day = current_date()': names event_day, "
        "which the model does not produce (columns: event_id, event_type, event_date, amount)")
    # lint_scoped_merge follows every rule; lint_bad_policy's undeclared-reconciliation is silenced
    assert "lint_scoped_merge" not in {short(f.node) for f in result.findings}
    [silenced] = result.silenced
    assert (silenced.finding.rule, short(silenced.finding.node)) == ("properties_never_reconciled", "lint_bad_policy")
    assert silenced.reason == "reconciled by the nightly apply_table_properties job"


def test_the_demo_step_prints_the_lint_of_its_project(installed_package: Path) -> None:
    from typing import Any, cast

    from rich.console import Console

    from dbt_iceberg_maint.cli.demo import DemoContext, step_lint

    console = Console(record=True, width=250, color_system=None)
    # The step only runs dbt parse: it needs no Spark session.
    step_lint(DemoContext(spark=cast(Any, None), console=console, project_dir=INTEGRATION_PROJECT, env={}))
    output = console.export_text()
    assert f"{PREFIX}event_log\n  warning compaction_not_cold_scoped: " in output
    assert "3 model(s) checked: 0 errors, 2 warnings, 1 info" in output
    assert "lint exit code: 0" in output
