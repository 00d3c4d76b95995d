"""The re-run selection, resolved by dbt's own selector: exactly the planned nodes.

A tiny project parsed by dbt (no Spark, no JVM): `dbt ls` with the runner's re-run arguments
lists what a re-run would execute.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from dbt_iceberg_maint.runner import NodeOutcome, plan_reruns, rerun_args
from dbt_iceberg_maint.runtime.invoke import ManifestGraph, invoke_dbt

CONFLICT = (
    "Runtime Error in model {name} (models/{name}.sql)\n  An error occurred while calling o48.sql.\n"
    "  : org.apache.iceberg.exceptions.ValidationException: "
    "Missing required files to delete: file:/wh/{name}/data/00000-1.parquet"
)
FILES = {
    "dbt_project.yml": "name: proj\nversion: '1.0'\nconfig-version: 2\nprofile: proj\n",
    "packages.yml": "packages:\n  - local: pkg\n",
    "profiles.yml": "proj:\n  target: dev\n  outputs:\n    dev: {type: spark, method: session, host: NA, schema: s}\n",
    # models/events.sql is fqn [proj, events]; models/events/ holds [proj, events, events_log].
    "models/events.sql": "{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id') }}\n"
                         "select 1 as id",
    "models/events/events_log.sql": "{{ config(materialized='incremental', incremental_strategy='append') }}\n"
                                    "select 2 as id",
    "models/staged.sql": "{{ config(materialized='ephemeral') }}\nselect * from {{ ref('events') }}",
    "models/daily.sql": "select count(*) as n from {{ ref('staged') }}",
    "models/schema.yml": "models:\n  - name: events\n    columns:\n      - name: id\n        data_tests: [not_null]\n"
                         "unit_tests:\n  - name: dedups\n    model: events\n    given: []\n"
                         "    expect: {rows: [{id: 1}]}\n",
    # An installed package: `path:` cannot name its files.
    "pkg/dbt_project.yml": "name: pkgx\nversion: '1.0'\nconfig-version: 2\n",
    "pkg/models/runs.sql": "{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id') }}\n"
                           "select 1 as id",
    "pkg/models/runs/history.sql": "select 1 as id",
    "pkg/models/stats.sql": "{{ config(materialized='incremental', incremental_strategy='merge', unique_key='id') }}\n"
                            "select 1 as id",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("selection_project")
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")
    assert invoke_dbt(["deps", "--quiet"], root, root).success
    return root


@pytest.fixture(scope="module")
def manifest(project: Path) -> ManifestGraph:
    invocation = invoke_dbt(["parse"], project, project, read_manifest=True)
    assert invocation.success, invocation.exception
    assert invocation.manifest is not None
    return invocation.manifest


def dbt_selects(project: Path, selection: Sequence[str]) -> set[str]:
    """The unique_ids dbt resolves `selection` (dbt arguments after the command) to."""
    from dbt.cli.main import dbtRunner

    result = dbtRunner().invoke(["ls", "--quiet", "--project-dir", str(project), "--profiles-dir", str(project),
                                 "--output", "json", "--output-keys", "unique_id", *selection])
    assert result.success, result.exception
    return {json.loads(line)["unique_id"] for line in result.result}


def uid(manifest: ManifestGraph, name: str) -> str:
    return next(key for key, node in manifest.nodes.items() if node["name"] == name)


def test_the_manifest_holds_the_whole_project_with_ephemeral_models_and_unit_tests(manifest: ManifestGraph) -> None:
    assert manifest.project_name == "proj"
    assert {"model.proj.staged", "unit_test.proj.events.dedups", "model.pkgx.history"} <= set(manifest.nodes)
    assert manifest.nodes["model.proj.daily"]["depends_on"] == {"nodes": ["model.proj.staged"]}


def test_a_build_re_run_selects_exactly_the_planned_nodes(project: Path, manifest: ManifestGraph) -> None:
    # events lost a conflict; its unit test passed; events_log (an append) succeeded; daily
    # (through the ephemeral staged) and the data test were skipped.
    not_null = uid(manifest, "not_null_events_id")
    outcomes = [
        NodeOutcome("unit_test.proj.events.dedups", "pass"),
        NodeOutcome("model.proj.events", "error", CONFLICT.format(name="events")),
        NodeOutcome("model.proj.events_log", "success"),
        NodeOutcome(not_null, "skipped"),
        NodeOutcome("model.proj.daily", "skipped"),
    ]
    plan = plan_reruns(outcomes, manifest.nodes, root_project=manifest.project_name)
    assert set(plan.selected) == {"model.proj.events", not_null, "model.proj.daily"}
    args = rerun_args("build", ["--select", "path:models"], plan)
    assert dbt_selects(project, args[1:]) == set(plan.selected)
    # What the bare fqn selector (dbt matches fqn prefixes) would have re-run besides.
    assert dbt_selects(project, ["--select", "fqn:proj.events"]) - set(plan.selected) == {
        "model.proj.events_log", "unit_test.proj.events.dedups"}


def test_a_package_model_is_selected_by_package_or_refused(project: Path, manifest: ManifestGraph) -> None:
    outcomes = [NodeOutcome("model.pkgx.stats", "error", CONFLICT.format(name="stats")),
                NodeOutcome("model.pkgx.runs", "error", CONFLICT.format(name="runs"))]
    plan = plan_reruns(outcomes, manifest.nodes, root_project=manifest.project_name)
    assert plan.selected == ("model.pkgx.stats",)
    assert dbt_selects(project, rerun_args("run", [], plan)[1:]) == {"model.pkgx.stats"}
    # pkg/models/runs/history.sql extends runs' fqn: no selector names runs alone.
    assert "fqn:pkgx.runs also selects model.pkgx.history" in plan.decisions["model.pkgx.runs"].reason
    assert dbt_selects(project, ["--select", "fqn:pkgx.runs,resource_type:model,package:pkgx"]) == {
        "model.pkgx.runs", "model.pkgx.history"}
