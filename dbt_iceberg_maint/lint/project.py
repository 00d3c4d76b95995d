"""The typed project model the lint rules read, built from dbt's manifest.json (pure, no I/O).

Only what the rules need: per model its materialization, strategy, unique key, incremental
predicates, partition fields, table format, hooks, `meta.iceberg_maint` policy (checked and
resolved by the policy engine, dbt_iceberg_maint/policy/, as the macros check and resolve it) and
the columns its SELECT produces (or why they could not be read); plus the
project-level hooks and, from run_results.json files, observed run durations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dbt_iceberg_maint.errors import UsageError
from dbt_iceberg_maint.lint.sql import PartitionField, Projection, Unreadable, model_projection, partition_field
from dbt_iceberg_maint.policy import engine
from dbt_iceberg_maint.policy.selection import declared_policy

POLICY_KEY = "iceberg_maint"
IGNORE_KEY = "lint_ignore"
MAINTAINED_MATERIALIZATIONS = frozenset({"table", "incremental"})
DEFAULT_STRATEGY = "append"  # dbt-spark's default incremental strategy
DECLARED_PROPERTY_KEYS = ("isolation_level", "commit_retry", "properties")


@dataclass(frozen=True)
class Section:
    """One operation's policy section after defaults and kill switches."""

    enabled: bool
    settings: Mapping[str, Any] = field(default_factory=dict)

    def get(self, key: str) -> Any:
        return self.settings.get(key)


@dataclass(frozen=True)
class Policy:
    """`meta.iceberg_maint` resolved and checked by the policy engine."""

    errors: tuple[str, ...]  # what the macros refuse (the maintenance run fails on it)
    enabled: bool
    compaction: Section
    rewrite_position_delete_files: Section
    remove_orphan_files: Section
    declared_properties: tuple[str, ...]  # which of DECLARED_PROPERTY_KEYS the model sets
    merge_isolation: str | None  # the declared write.merge.isolation-level, if any
    ignored: Mapping[str, str]  # lint_ignore: rule -> reason

    @classmethod
    def from_meta(cls, raw: Any, node_id: str, known_rules: Iterable[str]) -> Policy:
        errors = engine.shape_errors(raw)
        resolved = engine.resolved(raw)
        if not errors:
            errors = engine.errors(resolved)
        if isinstance(raw, bool):
            raw = {"enabled": raw}
        if not isinstance(raw, Mapping):
            raw = {}  # its shape error is reported; the other rules read the defaults

        def section(name: str) -> Section:
            return Section(resolved[name]["enabled"] is not False, resolved[name])

        return cls(
            errors=tuple(errors),
            enabled=resolved["enabled"] is not False,
            compaction=section("compaction"),
            rewrite_position_delete_files=section("rewrite_position_delete_files"),
            remove_orphan_files=section("remove_orphan_files"),
            declared_properties=tuple(key for key in DECLARED_PROPERTY_KEYS if raw.get(key)),
            merge_isolation=_merge_isolation(raw.get("isolation_level")),
            ignored=_ignored(raw.get(IGNORE_KEY), node_id, frozenset(known_rules)),
        )


def _merge_isolation(value: Any) -> str | None:
    if isinstance(value, Mapping):
        value = value.get("merge")
    return value.lower() if isinstance(value, str) else None


def _ignored(value: Any, node_id: str, known_rules: frozenset[str]) -> Mapping[str, str]:
    """`lint_ignore: {rule: reason}`, validated: a known rule name and a non-empty reason each."""
    where = f"meta.{POLICY_KEY}.{IGNORE_KEY} of {node_id}"
    if value is None:
        return {}
    allowed = ", ".join(sorted(known_rules))
    if not isinstance(value, Mapping):
        raise UsageError(f"{where} is {value!r}; expected a mapping of rule name to reason (rules: {allowed})")
    ignored = {}
    for rule, reason in value.items():
        if rule not in known_rules:
            raise UsageError(f"{where} names unknown rule {rule!r}; allowed: {allowed}")
        if not isinstance(reason, str) or not reason.strip():
            raise UsageError(f"{where}: rule {rule!r} has reason {reason!r}; expected a non-empty text saying why")
        ignored[str(rule)] = reason.strip()
    return ignored


@dataclass(frozen=True)
class Model:
    unique_id: str
    name: str
    relation: str  # schema.alias, lower case: models with the same relation write one table
    materialized: str
    strategy: str | None  # incremental models only
    unique_key: tuple[str, ...]
    incremental_predicates: tuple[str, ...]
    partition_fields: tuple[PartitionField, ...]
    iceberg: bool
    hooks: tuple[str, ...]  # pre- and post-hook Jinja texts
    policy: Policy
    projection: Projection | None  # None: the output columns could not be read (`unreadable` says why)
    unreadable: str | None
    declared_columns: Mapping[str, str | None]  # YAML columns: name -> data_type
    policy_source: str = ""  # where its meta.iceberg_maint is configured ("": unknown); inheriting models share it

    @property
    def maintained(self) -> bool:
        """Covered by iceberg_maintenance / maintain(): an Iceberg table or incremental model
        whose policy does not switch maintenance off."""
        return self.iceberg and self.materialized in MAINTAINED_MATERIALIZATIONS and self.policy.enabled

    def column_type(self, name: str) -> str | None:
        declared = self.declared_columns.get(name)
        if declared:
            return declared.lower()
        return self.projection.types.get(name) if self.projection else None


@dataclass(frozen=True)
class Project:
    name: str | None
    models: tuple[Model, ...]
    project_hooks: tuple[str, ...]  # on-run-start / on-run-end Jinja texts
    # Source tables that declare meta.iceberg_maint (iceberg_maintenance maintains them): unique_id -> policy.
    source_policies: tuple[tuple[str, Policy], ...] = ()

    def writers_of(self, relation: str) -> tuple[Model, ...]:
        return tuple(m for m in self.models if m.relation == relation)


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, (list, tuple)):
        return tuple(str(v) for v in value if isinstance(v, str) and v.strip())
    return ()


def _hook_texts(config: Mapping[str, Any]) -> tuple[str, ...]:
    texts = []
    for key in ("pre-hook", "post-hook", "pre_hook", "post_hook"):
        for hook in config.get(key) or ():
            text = hook.get("sql") if isinstance(hook, Mapping) else hook
            if isinstance(text, str):
                texts.append(text)
    return tuple(texts)


def policy_source(node: Mapping[str, Any], models_config: Mapping[str, Any]) -> str:
    """Where a model's meta.iceberg_maint is configured. dbt merges `meta` key by key, so the
    policy is one place's whole mapping: the deepest level of dbt_project.yml's `models:` along the
    model's fqn that declares it, when the model's policy is that one (inherited); else the model's
    own files (its config() call or properties), which dbt's manifest does not tell apart."""
    fqn = [str(part) for part in node.get("fqn") or ()]
    level: Any = models_config
    found: tuple[str, Any] | None = None
    for depth, part in enumerate(fqn[:-1] if fqn else ()):
        level = level.get(part) if isinstance(level, Mapping) else None
        if not isinstance(level, Mapping):
            break
        for key in ("+meta", "meta"):
            meta = level.get(key)
            if isinstance(meta, Mapping) and POLICY_KEY in meta:
                found = (f"dbt_project.yml `models: {': '.join(fqn[:depth + 1])}: {key}: {POLICY_KEY}`",
                         meta[POLICY_KEY])
    if found is not None and found[1] == declared_policy(node):
        return found[0]
    files = [str(path).split("://", 1)[-1] for path in (node.get("original_file_path"), node.get("patch_path"))
             if path]
    return f"the model's own config ({' or '.join(files)})" if files else ""


def model_from_node(node: Mapping[str, Any], known_rules: Iterable[str],
                    models_config: Mapping[str, Any] | None = None) -> Model:
    config = node.get("config") or {}
    unique_id = str(node.get("unique_id"))
    materialized = str(config.get("materialized") or "view")
    file_format = str(config.get("file_format") or "").lower()
    table_format = str(config.get("table_format") or "").lower()
    columns = node.get("columns") or {}
    projection = model_projection(str(node.get("raw_code") or ""))
    return Model(
        unique_id=unique_id,
        name=str(node.get("name")),
        relation=f"{node.get('schema') or ''}.{node.get('alias') or node.get('name')}".lower(),
        materialized=materialized,
        strategy=str(config.get("incremental_strategy") or DEFAULT_STRATEGY) if materialized == "incremental" else None,
        unique_key=_strings(config.get("unique_key")),
        incremental_predicates=_strings(config.get("incremental_predicates")),
        partition_fields=tuple(partition_field(p) for p in _strings(config.get("partition_by"))),
        iceberg="iceberg" in (file_format, table_format),
        hooks=_hook_texts(config),
        policy=Policy.from_meta(declared_policy(node), unique_id, known_rules),
        projection=projection if isinstance(projection, Projection) else None,
        unreadable=projection.reason if isinstance(projection, Unreadable) else None,
        declared_columns={str(name).lower(): (col or {}).get("data_type") for name, col in columns.items()},
        policy_source=policy_source(node, models_config or {}),
    )


def project_from_manifest(document: Mapping[str, Any], known_rules: Iterable[str],
                          models_config: Mapping[str, Any] | None = None) -> Project:
    """The project's enabled models (dbt leaves disabled ones out of `nodes`) and its hooks;
    `models_config`: the root dbt_project.yml's `models:` (where an inherited policy is set)."""
    rules = tuple(known_rules)
    nodes = [n for n in (document.get("nodes") or {}).values() if isinstance(n, Mapping)]
    models = tuple(
        model_from_node(n, rules, models_config) for n in sorted(nodes, key=lambda n: str(n.get("unique_id")))
        if n.get("resource_type") == "model"
    )
    hooks = tuple(str(n.get("raw_code") or "") for n in nodes if n.get("resource_type") == "operation")
    sources = [n for n in (document.get("sources") or {}).values() if isinstance(n, Mapping)]
    source_policies = tuple(
        (str(n.get("unique_id")), Policy.from_meta(declared_policy(n), str(n.get("unique_id")), rules))
        for n in sorted(sources, key=lambda n: str(n.get("unique_id")))
        if (n.get("config") or {}).get("enabled", True) and declared_policy(n) is not None
    )
    return Project(name=(document.get("metadata") or {}).get("project_name"), models=models, project_hooks=hooks,
                   source_policies=source_policies)


def run_durations(documents: Iterable[Mapping[str, Any]]) -> Mapping[str, float]:
    """The longest `execution_time` (seconds) per unique_id over run_results.json documents."""
    longest: dict[str, float] = {}
    for document in documents:
        results = document.get("results")
        if not isinstance(results, list):
            raise UsageError("a --run-results file has no `results` list; expected dbt's run_results.json")
        for result in results:
            if not isinstance(result, Mapping):
                continue
            uid, seconds = result.get("unique_id"), result.get("execution_time")
            if isinstance(uid, str) and isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
                longest[uid] = max(longest.get(uid, 0.0), float(seconds))
    return longest
