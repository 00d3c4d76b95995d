"""Maintenance plans from metadata: the I/O shell around the policy engine
(dbt_iceberg_maint/policy/), which decides the steps from the table facts read lazily, tier by
tier (facts.py), for the models the project selects (project.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from dbt_iceberg_maint.errors import PolicyError, TableMissingError, TableNotIcebergError, TableReadError, UsageError
from dbt_iceberg_maint.metadata.catalog_tables import MetadataCatalog
from dbt_iceberg_maint.metadata.facts import LazyTable
from dbt_iceberg_maint.metadata.project import ModelTarget
from dbt_iceberg_maint.metadata.reader import concurrently
from dbt_iceberg_maint.policy import engine
from dbt_iceberg_maint.policy.sql import raise_if_errors

if TYPE_CHECKING:
    from pyiceberg.table import Table


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
                     ) -> tuple[list[PlannedOperation], LazyTable | None]:
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
        facts = LazyTable(table, reference_ms, int(mb * 1024 * 1024) if mb else None, now)
    steps = engine.plan_steps(target.ref, requested, policy, facts, now, project_enabled=project_enabled,
                              force=force, as_of=at, required=target.named, table_format=table_format)
    # Nothing is due on a table that does not exist (a named one's steps are failed, not due).
    plan = [PlannedOperation(step.table, step.operation, step.status != "skipped" and facts is not None,
                             "dry_run" if step.status == "planned" else step.status, step.reason or "", step.sql,
                             target.model) for step in steps]
    return plan, facts


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
