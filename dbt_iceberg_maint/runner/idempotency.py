"""May a dbt node be re-run after a failure? (pure, no I/O)

A re-run is safe only if running the node twice leaves the same data as running it once,
*whatever happened to the first attempt*: a failure reported by dbt does not prove that nothing
was committed (a post-hook can fail after the model's write landed; a commit can end in an
unknown state). So the question is idempotency, decided from the manifest node:

- `table`, `view`, `materialized_view`, `ephemeral`: rebuilt from scratch, idempotent.
- `seed`: reloaded in full, idempotent. `test` / `unit_test`: read-only, idempotent.
- `snapshot`: compares the source with the current snapshot table, so a second run after a
  landed first run finds nothing new; idempotent.
- `incremental` + `merge` with a `unique_key`: re-merging the same rows updates them in place;
  idempotent. Without a `unique_key` dbt-spark merges `on false`, i.e. appends: not idempotent.
- `incremental` + `insert_overwrite` (and `microbatch`, which overwrites each batch's
  partitions): re-writing the same partitions replaces them; idempotent.
- `incremental` + `append` (dbt-spark's default strategy) or an unknown strategy: a re-run after
  a landed commit appends the rows again; not idempotent.
- Anything else (operations, sources, ...): not re-run.

`meta.iceberg_maint.idempotent: true|false` on the node overrides the inference either way,
e.g. for an append model whose `where` excludes rows already loaded (idempotent in practice), or
a merge model whose source is not deterministic (not idempotent).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dbt_iceberg_maint.errors import UsageError

REBUILT_MATERIALIZATIONS = frozenset({"table", "view", "materialized_view", "ephemeral"})
IDEMPOTENT_STRATEGIES = frozenset({"insert_overwrite", "microbatch"})
READ_ONLY_OR_RELOADED = {
    "seed": "a seed is reloaded in full",
    "test": "a test only reads",
    "unit_test": "a unit test only reads",
    "snapshot": "a snapshot only adds changes it has not recorded yet",
}
DEFAULT_INCREMENTAL_STRATEGY = "append"  # dbt-spark's default


@dataclass(frozen=True)
class Idempotency:
    """The verdict for one node and the reason, as shown in the runner's report."""

    idempotent: bool
    reason: str
    overridden: bool = False


def _config(node: Mapping[str, Any]) -> Mapping[str, Any]:
    config = node.get("config") or {}
    if not isinstance(config, Mapping):
        raise UsageError(f"node {node.get('unique_id')!r} has config {config!r}; expected a mapping")
    return config


def _override(node: Mapping[str, Any], config: Mapping[str, Any]) -> bool | None:
    meta = config.get("meta") or node.get("meta") or {}
    policy = meta.get("iceberg_maint") if isinstance(meta, Mapping) else None
    if not isinstance(policy, Mapping) or "idempotent" not in policy:
        return None
    value = policy["idempotent"]
    if not isinstance(value, bool):
        raise UsageError(
            f"invalid meta.iceberg_maint.idempotent value {value!r} on {node.get('unique_id')!r} "
            "(allowed: true/false)"
        )
    return value


def _has_unique_key(config: Mapping[str, Any]) -> bool:
    key = config.get("unique_key")
    if isinstance(key, str):
        return bool(key.strip())
    if isinstance(key, (list, tuple)):
        return any(isinstance(part, str) and part.strip() for part in key)
    return False


def _inferred(node: Mapping[str, Any], config: Mapping[str, Any]) -> Idempotency:
    resource_type = str(node.get("resource_type", ""))
    if resource_type in READ_ONLY_OR_RELOADED:
        return Idempotency(True, READ_ONLY_OR_RELOADED[resource_type])
    if resource_type != "model":
        return Idempotency(False, f"a {resource_type or 'node without resource type'} is never re-run")
    materialized = str(config.get("materialized") or "view")
    if materialized in REBUILT_MATERIALIZATIONS:
        return Idempotency(True, f"a {materialized} is rebuilt from scratch")
    if materialized != "incremental":
        return Idempotency(False, f"materialization {materialized!r} is not known to be idempotent")
    strategy = str(config.get("incremental_strategy") or DEFAULT_INCREMENTAL_STRATEGY)
    if strategy == "merge":
        if _has_unique_key(config):
            return Idempotency(True, "merge on a unique_key updates the same rows again")
        return Idempotency(False, "merge without a unique_key appends: a re-run could duplicate rows")
    if strategy in IDEMPOTENT_STRATEGIES:
        return Idempotency(True, f"{strategy} replaces the partitions it writes")
    if strategy == "append":
        return Idempotency(False, "append: a re-run after a landed commit duplicates rows")
    return Idempotency(False, f"incremental strategy {strategy!r} is not known to be idempotent")


def idempotency(node: Mapping[str, Any]) -> Idempotency:
    """Decide from a manifest node (manifest.json `nodes[...]` form) whether a re-run is safe."""
    config = _config(node)
    inferred = _inferred(node, config)
    override = _override(node, config)
    if override is None:
        return inferred
    return Idempotency(
        override,
        f"meta.iceberg_maint.idempotent: {str(override).lower()} (inferred: {inferred.reason})",
        overridden=True,
    )


def is_idempotent(node: Mapping[str, Any]) -> bool:
    """Shorthand for `idempotency(node).idempotent`."""
    return idempotency(node).idempotent
