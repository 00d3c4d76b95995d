"""The I/O around the pure rules: `dbt parse` in-process, manifest.json and run_results.json."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.errors import UsageError
from dbt_iceberg_maint.lint.project import project_from_manifest, run_durations
from dbt_iceberg_maint.lint.rules import RULES, LintResult, lint_project
from dbt_iceberg_maint.metadata.project import PARSE_STATE, target_dir
from dbt_iceberg_maint.runtime.invoke import default_profiles_dir, invoke_dbt


def parse_manifest(
    project_dir: Path,
    profiles_dir: Path | None = None,
    target: str | None = None,
    vars_yaml: str | None = None,
) -> Mapping[str, Any]:
    """manifest.json of `dbt parse` (no warehouse connection), written to a temporary target
    path so the project's own target/ is left alone. It starts from a copy of the project's
    partial-parse state when there is one: dbt then re-parses only what changed (and parses in
    full when the state does not fit: another profile, other vars, a new dbt). A project dbt
    cannot parse is a usage error carrying dbt's message."""
    project = project_dir.resolve()
    if not (project / "dbt_project.yml").is_file():
        raise UsageError(f"--project-dir {project_dir} has no dbt_project.yml; expected a dbt project directory")
    profiles = profiles_dir or default_profiles_dir(project, os.environ)
    with tempfile.TemporaryDirectory(prefix="dbt-iceberg-maint-lint-") as target_path:
        state = target_dir(project) / PARSE_STATE
        if state.is_file():
            shutil.copyfile(state, Path(target_path) / PARSE_STATE)
        args = ["parse", "--target-path", target_path, "--quiet"]
        if target:
            args += ["--target", target]
        if vars_yaml:
            args += ["--vars", vars_yaml]
        invocation = invoke_dbt(args, project, profiles)
        manifest = Path(target_path) / "manifest.json"
        if not invocation.success or not manifest.is_file():
            detail = invocation.exception or "; ".join(invocation.log_messages[-5:]) or "no manifest.json written"
            raise UsageError(f"dbt parse failed for project {project}: {detail}")
        document = json.loads(manifest.read_text())
    if not isinstance(document, Mapping):
        raise UsageError(f"dbt parse wrote an unreadable manifest.json for project {project}")
    return document


def read_run_results(paths: Sequence[Path]) -> Mapping[str, float]:
    documents = []
    for path in paths:
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"--run-results {path}: cannot read it as JSON ({exc})") from exc
        if not isinstance(document, Mapping):
            raise UsageError(f"--run-results {path}: expected dbt's run_results.json (a JSON object)")
        documents.append(document)
    return run_durations(documents)


def project_models_config(project_dir: Path) -> Mapping[str, Any]:
    """The root dbt_project.yml's `models:` tree: where a policy many models inherit is configured
    (the manifest keeps only each model's merged config)."""
    import yaml  # type: ignore[import-untyped]

    try:
        document = yaml.safe_load((project_dir / "dbt_project.yml").read_text())
    except (OSError, yaml.YAMLError):
        return {}  # dbt parse has read it already; without it findings name the models' own config
    models = document.get("models") if isinstance(document, Mapping) else None
    return models if isinstance(models, Mapping) else {}


def lint_manifest(document: Mapping[str, Any], durations: Mapping[str, float] | None = None,
                  models_config: Mapping[str, Any] | None = None) -> LintResult:
    return lint_project(project_from_manifest(document, RULES, models_config), durations)


def run_lint(
    project_dir: Path,
    profiles_dir: Path | None = None,
    target: str | None = None,
    vars_yaml: str | None = None,
    run_results: Sequence[Path] = (),
) -> LintResult:
    durations = read_run_results(run_results)  # bad files are refused before dbt runs
    return lint_manifest(parse_manifest(project_dir, profiles_dir, target, vars_yaml), durations,
                         project_models_config(project_dir))
