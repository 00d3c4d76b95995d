"""The dbt project's side of a plan: its manifest, its vars, and the Iceberg models, sources
and catalog tables a run selects (policy/selection.py decides; this reads the files)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.errors import PolicyError, UsageError
from dbt_iceberg_maint.metadata.catalog_tables import MetadataCatalog
from dbt_iceberg_maint.policy import engine
from dbt_iceberg_maint.policy.selection import CatalogSelection, Shard, catalog_nodes, declared_relations, select_nodes
from dbt_iceberg_maint.policy.sql import TableRef

CATALOG_POLICY_VAR = "dbt_iceberg_maint_catalog_policy"


@dataclass(frozen=True)
class ModelTarget:
    """One Iceberg model or source table of the project (`model`: the selector naming it): its
    table and raw meta.iceberg_maint policy. `named`: --select names it (not through a tag or a
    whole source), so its table must exist."""

    model: str
    ref: TableRef
    raw_policy: Any
    named: bool = False


def iceberg_models(manifest: Mapping[str, Any], select: Sequence[str] | None = None,
                   shard: Shard | None = None) -> list[ModelTarget]:
    """iceberg_maintenance's selection (policy/selection.py): Iceberg models and sources with a
    policy, or what `select` names, narrowed to `shard`."""
    return [ModelTarget(node.label, TableRef(node.schema, node.identifier), node.raw_policy, named=node.named)
            for node in select_nodes(manifest, select, shard)]


PARSE_STATE = "partial_parse.msgpack"  # dbt's partial-parse state, in its target folder


def target_dir(project_dir: Path, env: Mapping[str, str] | None = None) -> Path:
    """dbt's target folder: DBT_TARGET_PATH when set (in `env` or the process), else `target`."""
    target_path = (env or {}).get("DBT_TARGET_PATH") or os.environ.get("DBT_TARGET_PATH")
    return project_dir / target_path if target_path else project_dir / "target"


def load_manifest(project_dir: Path, profiles_dir: Path | None, target: str | None, parse: bool = False,
                  env: Mapping[str, str] | None = None, vars_yaml: str | None = None) -> dict[str, Any]:
    """target/manifest.json, running `dbt parse` first when it is missing (or asked). The target
    folder is dbt's: DBT_TARGET_PATH when set (in `env` or the process), else `target`. With
    `vars_yaml` (dbt's --vars) the project is always parsed with them: vars can enable models and
    set their configs, and the manifest on disk may come from a run with other vars."""
    path = target_dir(project_dir, env) / "manifest.json"
    if parse or vars_yaml is not None or not path.is_file():
        from dbt_iceberg_maint.runtime.invoke import invoke_dbt

        args = (["parse", "--quiet"] + (["--target", target] if target else [])
                + (["--vars", vars_yaml] if vars_yaml is not None else []))
        invocation = invoke_dbt(args, project_dir=project_dir, profiles_dir=profiles_dir, env=env)
        if not invocation.success:
            raise UsageError(f"dbt parse failed in {project_dir}: {invocation.exception}")
    try:
        document: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    return document


def project_var(project_dir: Path, vars_yaml: str | None, name: str) -> Any:
    """A dbt var as dbt resolves it for a run-operation: --vars, then the project's
    dbt_project.yml `vars:`; None when neither sets it."""
    import yaml  # type: ignore[import-untyped]

    def lookup(document: Any, where: str) -> Any:
        if document is None:
            return None
        if not isinstance(document, Mapping):
            raise UsageError(f"{where} is not a mapping of variables: {document!r}")
        return document.get(name)

    try:
        given = lookup(yaml.safe_load(vars_yaml) if vars_yaml else None, "--vars")
        project = project_dir / "dbt_project.yml"
        declared = lookup((yaml.safe_load(project.read_text()) or {}).get("vars") if project.is_file() else None,
                          f"{project} vars")
    except yaml.YAMLError as exc:
        raise UsageError(f"cannot read the dbt vars: {exc}") from exc
    return given if given is not None else declared


def project_enabled(project_dir: Path, vars_yaml: str | None) -> bool:
    """The var kill switch `dbt_iceberg_maint_enabled` (default true)."""
    value = project_var(project_dir, vars_yaml, "dbt_iceberg_maint_enabled")
    if value is not None and not isinstance(value, bool):
        raise UsageError(f"var dbt_iceberg_maint_enabled is {value!r}; expected true or false")
    return True if value is None else value


def catalog_targets(catalog: MetadataCatalog, manifest: Mapping[str, Any], patterns: Sequence[str],
                    raw_policy: Any = None, shard: Shard | None = None) -> tuple[list[ModelTarget], CatalogSelection]:
    """--include-catalog: the catalog's tables matching `patterns` that no node of the project
    declares, each with `raw_policy` (the var dbt_iceberg_maint_catalog_policy: the package's
    defaults when unset). A policy the engine refuses is a usage error before anything is read; a
    pattern that matches no table of the catalog is one after the catalog is listed."""
    policy = {} if raw_policy is None else raw_policy
    try:
        engine.checked(policy)
    except PolicyError as exc:
        raise UsageError(f"var {CATALOG_POLICY_VAR}: {exc}") from exc
    found = catalog_nodes(catalog.list_tables(), patterns, declared_relations(manifest), policy,
                          shard).check_matched(catalog.config.name)
    return [ModelTarget(node.label, TableRef(node.schema, node.identifier), node.raw_policy)
            for node in found.nodes], found

