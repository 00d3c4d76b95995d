"""Health records and maintenance plans from metadata: the I/O shell around the policy engine
(dbt_iceberg_maint/policy/), which decides the steps from the table facts read here, lazily,
tier by tier.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from dbt_iceberg_maint.errors import PolicyError, TableMissingError, TableNotIcebergError, TableReadError, UsageError
from dbt_iceberg_maint.metadata.catalog import MetadataCatalog
from dbt_iceberg_maint.metadata.cold import cold_scope
from dbt_iceberg_maint.metadata.reader import (
    EntryTier,
    SummaryTier,
    current_manifests,
    layout,
    now_ms,
    read_entries,
    read_manifest_tier,
    read_summary,
    small_file_threshold,
    table_age_hours,
    target_file_size,
)
from dbt_iceberg_maint.policy import engine
from dbt_iceberg_maint.policy.gate import SnapshotLike
from dbt_iceberg_maint.policy.operations import STATISTICS, ColdScope
from dbt_iceberg_maint.policy.selection import CatalogSelection, Shard, catalog_nodes, declared_relations, select_nodes
from dbt_iceberg_maint.policy.sql import TableRef, raise_if_errors

if TYPE_CHECKING:
    from pyiceberg.table import Table

T = TypeVar("T")
R = TypeVar("R")

HEALTH_FIELDS = ("table", "data_files", "small_files", "data_bytes", "delete_files", "records", "snapshots",
                 "oldest_snapshot_age_hours", "manifests", "data_manifests", "partitions",
                 "max_small_files_in_partition", "deletion_vectors", "max_partition_delete_ratio",
                 "target_file_size_bytes", "small_file_threshold_bytes")
# Beyond table_health's figures (Spark SQL shows no statistics files): whether the current snapshot
# lacks table / partition statistics (None: the table has no snapshot, or no partitions for the latter).
STATISTICS_FIELDS = ("statistics_stale", "partition_statistics_stale")


@dataclass(frozen=True)
class HealthRecord:
    """table_health's figures for one table, or the error that kept them from being read."""

    table: str
    figures: Mapping[str, Any] | None = None
    error: str | None = None
    # For the report: live data file sizes and small files per partition (largest first).
    file_sizes: tuple[int, ...] = field(default=(), repr=False)
    small_files_by_partition: tuple[tuple[str, int], ...] = field(default=(), repr=False)

    def to_dict(self) -> dict[str, Any]:
        if self.figures is None:
            return {"table": self.table, "error": self.error}
        return {**{key: self.figures[key] for key in HEALTH_FIELDS},
                **{key: self.figures.get(key) for key in STATISTICS_FIELDS}}


def concurrently(items: Sequence[T], work: Callable[[T], R], workers: int) -> list[R]:
    """Metadata reads are I/O bound: a thread pool overlaps them; order is kept."""
    if workers <= 1 or len(items) <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(work, items))


def health_figures(name: str, table: Table, target_override: int | None = None,
                   at_ms: int | None = None) -> tuple[dict[str, Any], EntryTier]:
    summary = read_summary(table)
    manifests = current_manifests(table)
    tier2 = read_manifest_tier(manifests)
    target = target_file_size(summary.properties, target_override)
    threshold = small_file_threshold(target)
    entries = read_entries(table, manifests, threshold)
    oldest = summary.oldest_snapshot_ms
    reference = now_ms() if at_ms is None else at_ms
    figures = {
        "table": name, "data_files": entries.data_files, "small_files": entries.small_files,
        "data_bytes": entries.data_bytes, "delete_files": entries.delete_files, "records": entries.records,
        "snapshots": len(summary.snapshots),
        "oldest_snapshot_age_hours": None if oldest is None else round((reference - oldest) / 3600000.0, 3),
        "manifests": tier2.manifests, "data_manifests": tier2.data_manifests, "partitions": entries.partitions,
        "max_small_files_in_partition": entries.max_small_files_in_partition,
        "deletion_vectors": entries.deletion_vectors,
        "max_partition_delete_ratio": round(entries.max_partition_delete_ratio, 4),
        "target_file_size_bytes": target, "small_file_threshold_bytes": threshold,
    }
    for key, operation in zip(STATISTICS_FIELDS, STATISTICS, strict=True):
        current = summary.snapshot_id
        applies = current is not None and (operation == "compute_table_stats" or partitioned(table))
        figures[key] = statistics_snapshot(table, operation, current) != current if applies else None
    return figures, entries


def read_health(catalog: MetadataCatalog, names: Sequence[str] | None = None, workers: int = 8,
                target_override: int | None = None) -> list[HealthRecord]:
    chosen = list(names) if names else catalog.list_tables()

    def one(name: str) -> HealthRecord:
        try:
            figures, entries = health_figures(name, catalog.load(name), target_override)
        except TableReadError as exc:
            return HealthRecord(name, error=str(exc))
        except Exception as exc:  # a corrupt manifest: per-table error, the others go on
            return HealthRecord(name, error=f"{name}: {type(exc).__name__}: {exc}")
        return HealthRecord(name, figures, None, entries.file_sizes, entries.small_files_by_partition)

    return concurrently(chosen, one, workers)


def partitioned(table: Table) -> bool:
    """Whether any partition spec of the table has a field (Spark's partitions metadata table then
    has a `partition` column, what the macros read)."""
    return any(spec.fields for spec in table.metadata.partition_specs)


def statistics_snapshot(table: Table, operation: str, current: int | None) -> int | None:
    """The snapshot the table's statistics files of `operation`'s kind are for: the current one
    when one of them is, else the newest listed (None: the table has none). Read from the table
    metadata (`statistics`, `partition-statistics`), exact where the macros know only what the plan
    recorded."""
    files = table.metadata.statistics if operation == "compute_table_stats" else table.metadata.partition_statistics
    ids = [int(f.snapshot_id) for f in files]
    if current is not None and current in ids:
        return current
    return ids[-1] if ids else None


# ---- plans ----

@dataclass(frozen=True)
class PlannedOperation:
    table: str
    operation: str
    due: bool
    status: str  # what maintain(dry_run=true) logs: dry_run, skipped or failed
    reason: str
    sql: str | None = None
    model: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ModelTarget:
    """One Iceberg model or source table of the project (`model`: the selector naming it): its
    table and raw meta.iceberg_maint policy. `named`: --select names it (not through a tag or a
    whole source), so its table must exist."""

    model: str
    ref: TableRef
    raw_policy: Any
    named: bool = False


class _LazyTable:
    """The policy engine's TableFacts of one table: each tier read once, on first use (tier 1,
    the snapshot summary, always; manifests and their entries only when a due rule needs them)."""

    def __init__(self, table: Table, reference_ms: int, target_override: int | None,
                 now: dt.datetime | None = None) -> None:
        self.table = table
        self.summary: SummaryTier = read_summary(table)
        self.reference_ms = reference_ms
        wall_clock = now or dt.datetime.now(dt.timezone.utc)
        self.now_ms = int(wall_clock.timestamp() * 1000)  # the orphan window's clock, never as_of
        self.checked = engine.checked_hours_ago(self.summary.properties, wall_clock)
        self.threshold = small_file_threshold(target_file_size(self.summary.properties, target_override))
        self._manifests: list[Any] | None = None
        self._entries: dict[tuple[int, bool], EntryTier] = {}
        self.tiers = {"summary"}

    def manifests(self) -> list[Any]:
        if self._manifests is None:
            self._manifests = current_manifests(self.table)
            self.tiers.add("manifest_list")
        return self._manifests

    def entries(self, data_only: bool) -> EntryTier:
        key = (self.threshold, data_only)
        if key not in self._entries:
            self._entries[key] = read_entries(self.table, self.manifests(), self.threshold, data_only=data_only)
            self.tiers.add("manifest_entries")
        return self._entries[key]

    def gc_enabled(self) -> bool:
        return str(self.summary.properties.get("gc.enabled", "true")).lower() != "false"

    def data_files(self) -> int | None:
        return self.summary.data_files

    def delete_files(self) -> int | None:
        return self.summary.delete_files

    def table_bytes(self) -> int | None:
        return self.summary.total_bytes

    def snapshots(self) -> list[SnapshotLike]:
        return list(self.summary.snapshots)

    def snapshots_now_ms(self) -> int:
        return self.reference_ms

    def location(self) -> str | None:
        return str(self.table.location())

    def checked_hours_ago(self, operation: str) -> float | None:
        return self.checked.get(operation)

    def unchanged_since_check(self, operation: str) -> int | None:
        text = self.summary.properties.get(engine.checked_snapshot_property(operation))
        if text is None or not text.isdigit():
            return None  # never checked, or an unreadable record: decide
        lineage = {s.snapshot_id: (s.parent_id, s.operation) for s in self.summary.snapshots}
        return int(text) if engine.unchanged_since(int(text), self.summary.snapshot_id, lineage) else None

    def health(self, operation: str) -> dict[str, Any]:
        """The health figures `operation`'s due rule reads (table_health's names)."""
        oldest = self.summary.oldest_snapshot_ms
        figures: dict[str, Any] = {
            "snapshots": len(self.summary.snapshots),
            "oldest_snapshot_age_hours": None if oldest is None else round((self.reference_ms - oldest) / 3600000.0, 3),
        }
        # Deletion vectors only when the summary counts delete files (or has no count), as the macros.
        deletes = self.summary.delete_files != 0
        if operation == "rewrite_data_files":
            # A cold scope read every entry already (the engine asks for it first): reuse that read.
            entries = self._entries.get((self.threshold, False)) or self.entries(data_only=not deletes)
            figures["max_small_files_in_partition"] = entries.max_small_files_in_partition
            if deletes:
                figures["max_partition_delete_ratio"] = entries.max_partition_delete_ratio
        elif operation == "rewrite_position_delete_files":
            count = self.summary.delete_files
            figures["delete_files"] = count if count is not None else self.entries(data_only=False).delete_files
            if deletes:
                figures["deletion_vectors"] = self.entries(data_only=False).deletion_vectors
        elif operation == "rewrite_manifests":
            figures["data_manifests"] = read_manifest_tier(self.manifests()).data_manifests
        elif operation == "remove_orphan_files" and self.checked.get(operation) is None:
            figures["table_age_hours"] = table_age_hours(self.table, self.now_ms)
        elif operation in STATISTICS:
            figures["snapshot_id"] = self.summary.snapshot_id
            figures[STATISTICS[operation][0]] = statistics_snapshot(self.table, operation, self.summary.snapshot_id)
            if operation == "compute_partition_stats":
                figures["partitioned"] = partitioned(self.table)
        return figures

    def figures(self, compacting: bool) -> dict[str, Any]:
        """What was read (None: that tier was not), plus the eligible files of a compaction."""
        summary = self.summary
        oldest = summary.oldest_snapshot_ms
        entries = self._entries.get((self.threshold, False)) or self._entries.get((self.threshold, True))
        if entries is None and compacting:
            entries = self.entries(data_only=True)
        deletes = self._entries.get((self.threshold, False))  # the delete figures need the delete manifests
        manifests = read_manifest_tier(self._manifests) if self._manifests is not None else None
        return {
            "snapshot_id": summary.snapshot_id,  # the snapshot the plan read (the fixed point's record)
            "snapshots": len(summary.snapshots),
            "oldest_snapshot_age_hours": None if oldest is None
            else round((self.reference_ms - oldest) / 3600000.0, 3),
            "data_files": summary.data_files, "delete_files": summary.delete_files,
            "data_bytes": summary.total_bytes,
            "small_files": None if entries is None else entries.small_files,
            "small_bytes": None if entries is None else entries.small_bytes,
            "max_small_files_in_partition": None if entries is None else entries.max_small_files_in_partition,
            "deletion_vectors": None if deletes is None else deletes.deletion_vectors,
            "max_partition_delete_ratio": None if deletes is None else round(deletes.max_partition_delete_ratio, 4),
            "manifests": None if manifests is None else manifests.manifests,
            "data_manifests": None if manifests is None else manifests.data_manifests,
            "eligible_files": entries.small_files if compacting and entries is not None else None,
            "eligible_bytes": entries.small_bytes if compacting and entries is not None else None,
            "tiers": sorted(self.tiers),
        }

    def cold_scope(self, hours: float) -> ColdScope:
        entries = self.entries(data_only=False)
        fields, columns = layout(self.table)
        return cold_scope(fields, columns, entries.partition_states, hours, self.reference_ms,
                          self.summary.oldest_snapshot_ms, entries.small_files,
                          delete_ratio=self.summary.delete_files != 0)


def plan_table(target: ModelTarget, table: Table | None, operations: Sequence[str] | None = None,
               project_enabled: bool = True, overrides: Any = None, at: dt.datetime | None = None,
               force: bool = False, table_format: str | None = None) -> tuple[list[PlannedOperation], set[str]]:
    """spark__maintain(dry_run=true), decided from metadata by the policy engine. Returns the plan
    and the tiers read. `at`: the plan's as_of (default now); the orphan window always uses now.
    `table_format`: the catalog's table is not Iceberg (`table` None): every operation skips it."""
    plan, facts = _plan_with_facts(target, table, operations, project_enabled, overrides, at, force, table_format)
    return plan, facts.tiers if facts is not None else set()


def plan_table_figures(target: ModelTarget, table: Table | None, operations: Sequence[str] | None = None,
                       project_enabled: bool = True, overrides: Any = None, at: dt.datetime | None = None,
                       force: bool = False, table_format: str | None = None
                       ) -> tuple[list[PlannedOperation], dict[str, Any]]:
    """plan_table, with the table's figures the plan read (table_health's names, None when that
    tier was not read) and, when a compaction is planned, its eligible files and bytes: the
    files below the small-file threshold (read for it when the plan did not need them)."""
    plan, facts = _plan_with_facts(target, table, operations, project_enabled, overrides, at, force, table_format)
    return plan, ({} if facts is None else facts.figures(compacting=any(
        p.operation == "rewrite_data_files" and p.status == "dry_run" for p in plan)))


def _plan_with_facts(target: ModelTarget, table: Table | None, operations: Sequence[str] | None,
                     project_enabled: bool, overrides: Any, at: dt.datetime | None,
                     force: bool, table_format: str | None = None
                     ) -> tuple[list[PlannedOperation], _LazyTable | None]:
    now = dt.datetime.now(dt.timezone.utc)
    reference_ms = int((at or now).timestamp() * 1000)
    name = target.ref.qualified
    requested = engine.requested_operations(operations)
    try:
        raise_if_errors(target.ref.errors())
        policy = engine.checked(target.raw_policy, overrides)
    except PolicyError as exc:
        return [PlannedOperation(name, op, False, "failed", str(exc), None, target.model) for op in requested], None
    facts = None
    if table is not None and project_enabled and policy["enabled"]:
        mb = policy["compaction"]["target_file_size_mb"]
        facts = _LazyTable(table, reference_ms, int(mb * 1024 * 1024) if mb else None, now)
    steps = engine.plan_steps(target.ref, requested, policy, facts, now, project_enabled=project_enabled,
                              force=force, as_of=at, required=target.named, table_format=table_format)
    # Nothing is due on a table that does not exist (a named one's steps are failed, not due).
    plan = [PlannedOperation(step.table, step.operation, step.status != "skipped" and facts is not None,
                             "dry_run" if step.status == "planned" else step.status, step.reason or "", step.sql,
                             target.model) for step in steps]
    return plan, facts


def iceberg_models(manifest: Mapping[str, Any], select: Sequence[str] | None = None,
                   shard: Shard | None = None) -> list[ModelTarget]:
    """iceberg_maintenance's selection (policy/selection.py): Iceberg models and sources with a
    policy, or what `select` names, narrowed to `shard`."""
    return [ModelTarget(node.label, TableRef(node.schema, node.identifier), node.raw_policy, named=node.named)
            for node in select_nodes(manifest, select, shard)]


def target_dir(project_dir: Path, env: Mapping[str, str] | None = None) -> Path:
    """dbt's target folder: DBT_TARGET_PATH when set (in `env` or the process), else `target`."""
    target_path = (env or {}).get("DBT_TARGET_PATH") or os.environ.get("DBT_TARGET_PATH")
    return project_dir / target_path if target_path else project_dir / "target"


def load_manifest(project_dir: Path, profiles_dir: Path | None, target: str | None, parse: bool = False,
                  env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """target/manifest.json, running `dbt parse` first when it is missing (or asked). The target
    folder is dbt's: DBT_TARGET_PATH when set (in `env` or the process), else `target`."""
    path = target_dir(project_dir, env) / "manifest.json"
    if parse or not path.is_file():
        from dbt_iceberg_maint.invoke import invoke_dbt

        args = ["parse", "--quiet"] + (["--target", target] if target else [])
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


CATALOG_POLICY_VAR = "dbt_iceberg_maint_catalog_policy"


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


def parse_as_of(as_of: str | None) -> dt.datetime | None:
    """--as-of: a UTC 'YYYY-MM-DD HH:MM:SS[.ffffff]' (or ISO 8601 with T and Z), as the macros take it."""
    if as_of is None:
        return None
    try:
        moment = dt.datetime.fromisoformat(as_of.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(f"--as-of is {as_of!r}; expected a UTC timestamp 'YYYY-MM-DD HH:MM:SS'") from exc
    return moment.replace(tzinfo=dt.timezone.utc) if moment.tzinfo is None else moment.astimezone(dt.timezone.utc)


def load_for_planning(catalog: MetadataCatalog, name: str) -> tuple[Table | None, str | None]:
    """The table to plan and its format: (None, None) when it does not exist, (None, the non-Iceberg
    format) when it is not an Iceberg table. An unreadable table raises TableReadError."""
    try:
        return catalog.load(name), None
    except TableMissingError:
        return None, None
    except TableNotIcebergError:
        return None, engine.UNKNOWN_NON_ICEBERG_FORMAT


def failed_plan(target: ModelTarget, operations: Sequence[str] | None, reason: str) -> list[PlannedOperation]:
    """Every requested operation of `target` failed with `reason` (a per-table error)."""
    return [PlannedOperation(target.ref.qualified, op, False, "failed", reason, None, target.model)
            for op in engine.requested_operations(operations)]


def plan_models(catalog: MetadataCatalog, targets: Iterable[ModelTarget], operations: Sequence[str] | None = None,
                project_enabled: bool = True, workers: int = 8,
                at: dt.datetime | None = None) -> list[PlannedOperation]:
    chosen = list(targets)

    def one(target: ModelTarget) -> list[PlannedOperation]:
        try:
            table, table_format = load_for_planning(catalog, target.ref.name)
        except TableReadError as exc:
            return failed_plan(target, operations, str(exc))
        try:
            return plan_table(target, table, operations, project_enabled, at=at, table_format=table_format)[0]
        except PolicyError as exc:  # a guard that needs the table (the orphan location), as the macro raises it
            return failed_plan(target, operations, str(exc))
        except Exception as exc:  # unreadable manifests: a per-table error
            return failed_plan(target, operations, f"{type(exc).__name__}: {exc}")

    return [item for rows in concurrently(chosen, one, workers) for item in rows]


def emit_args(plan: Sequence[PlannedOperation], operations: Sequence[str] | None = None) -> dict[str, Any] | None:
    """`--args` of `dbt run-operation iceberg_maintenance` for the models and sources with due work
    (a model by its name, a source table by source:<source>.<table>); None when nothing is due (an
    empty select would start a job that selects nothing). Catalog-only tables are no dbt node:
    iceberg_maintenance cannot select them, only the Python engine maintains them."""
    models = sorted({p.model if p.model.startswith("source:") else p.model.rsplit(".", 1)[-1]
                     for p in plan if p.status == "dry_run" and p.model and not p.model.startswith("catalog:")})
    if not models:
        return None
    args: dict[str, Any] = {"select": models}
    if operations:
        args["operations"] = list(operations)
    return args
