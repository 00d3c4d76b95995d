"""The maintenance policy: keys and defaults, validation, resolution, and the plan's steps.

The Python side of macros/internal/policy.sql, macros/internal/decisions.sql and the decision
part of macros/operations/get_maintenance_plan.sql (`_iceberg_maint_plan_steps`). The metadata
planner and the lint call this; the macros stay the reference for dbt Cloud, and the shared case
table (tests/policy_cases.yml) runs both sides on the same inputs.
"""

from __future__ import annotations

import copy
import datetime as dt
import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from dbt_iceberg_maint import protocol
from dbt_iceberg_maint.errors import PolicyError
from dbt_iceberg_maint.policy import checks
from dbt_iceberg_maint.policy.compaction import too_few_data_files
from dbt_iceberg_maint.policy.gate import SnapshotLike, gate_reason
from dbt_iceberg_maint.policy.operation_types import ColdScope, Decision, PlanContext
from dbt_iceberg_maint.policy.operations import OPERATIONS
from dbt_iceberg_maint.policy.sql import TableRef, raise_if_errors

COST_GATE_DEFAULTS: Mapping[str, Any] = {
    "enabled": True, "skip_unchanged": False, "min_new_records": None, "min_new_bytes": None,
    "min_interval_hours": None,
}
GC_DISABLED = ("Cannot {verb}: GC is disabled (deleting files may corrupt other tables); table property "
               "gc.enabled=false")


def section_of(operation: str) -> str:
    return OPERATIONS[operation].section


def defaults() -> dict[str, Any]:
    """`_iceberg_maint_policy_defaults`: each operation's section, then the cost gate (off)."""
    policy: dict[str, Any] = {"enabled": True}
    for name in protocol.OPERATIONS:
        policy[section_of(name)] = copy.deepcopy(dict(OPERATIONS[name].defaults))
    policy["cost_gate"] = dict(COST_GATE_DEFAULTS)
    return policy


def shape_errors(raw: Any, source: str = "meta.iceberg_maint") -> list[str]:
    """`_iceberg_maint_policy_shape_errors`: unknown sections/keys, wrong section types."""
    if raw is None or isinstance(raw, bool):
        return []
    if not isinstance(raw, Mapping):
        return [f"{source} is {raw}; expected a mapping, or true/false to switch maintenance on/off"]
    known = defaults()
    allowed = [*known, *protocol.POLICY_OTHER_KEYS]
    errors: list[str] = []
    for key, value in raw.items():
        if key not in allowed:
            errors.append(unknown_key(source, key, allowed))
        elif key == "enabled":
            errors += checks.boolean(source, "enabled", value)
        elif isinstance(known.get(key), dict) and value is not None:
            if not isinstance(value, (Mapping, bool)):
                errors.append(f"{source}.{key} is {value}; expected a mapping of settings or true/false")
            elif isinstance(value, Mapping):
                errors += [unknown_key(f"{source}.{key}", name, list(known[key]))
                           for name in value if name not in known[key]]
                errors += checks.boolean(f"{source}.{key}", "enabled", value.get("enabled"))
    return errors


def unknown_key(owner: str, key: Any, allowed: Sequence[str]) -> str:
    """`_iceberg_maint_unknown_key_error`: the key, the closest allowed one (difflib's
    get_close_matches; the macros compute the same ratio) and every allowed key."""
    closest = difflib.get_close_matches(key, allowed, n=1) if isinstance(key, str) else []
    hint = f" (did you mean `{closest[0]}`?)" if closest else ""
    return f"{owner} has unknown key `{key}`{hint}; allowed keys: {', '.join(allowed)}"


def resolved(raw: Any, overrides: Any = None) -> dict[str, Any]:
    """`_iceberg_maint_resolved_policy`: defaults < model policy < overrides; a section given as
    true/false switches that operation, a whole policy of true/false switches maintenance."""
    layers = [{"enabled": layer} if isinstance(layer, bool) else layer
              for layer in (raw, overrides) if isinstance(layer, (bool, Mapping))]
    policy: dict[str, Any] = {}
    for key, default in defaults().items():
        if isinstance(default, dict):
            for layer in layers:
                given = layer.get(key)
                if isinstance(given, Mapping):
                    default.update(given)
                elif isinstance(given, bool):
                    default["enabled"] = given
            policy[key] = default
        else:
            policy[key] = next((layer[key] for layer in reversed(layers) if layer.get(key) is not None), default)
    return policy


def errors(policy: Mapping[str, Any]) -> list[str]:
    """`_iceberg_maint_policy_errors`: each operation's checks in the canonical order, then the cost gate's."""
    found: list[str] = []
    for name in protocol.OPERATIONS:
        section = policy[section_of(name)]
        found += OPERATIONS[name].policy_errors(section)
        found += _non_negative(f"policy {section_of(name)}", "interval_hours", section["interval_hours"])
    gate = policy["cost_gate"]
    found += checks.boolean("policy cost_gate", "skip_unchanged", gate["skip_unchanged"])
    for key in ("min_new_records", "min_new_bytes", "min_interval_hours"):
        found += _non_negative("policy cost_gate", key, gate[key])
    return found


def _non_negative(owner: str, key: str, value: Any) -> list[str]:
    if value is not None and (not checks.is_number(value) or value < 0):
        return [f"{owner}: argument `{key}` is {value}; expected a number >= 0 or none"]
    return []


def checked(raw: Any, overrides: Any = None) -> dict[str, Any]:
    """The resolved policy, or PolicyError with every problem, as get_maintenance_plan raises it."""
    raise_if_errors(shape_errors(raw) + shape_errors(overrides, "maintain: argument `policy`"))
    policy = resolved(raw, overrides)
    raise_if_errors(errors(policy))
    return policy


def requested_operations(operations: str | Sequence[str] | None = None) -> list[str]:
    """`_iceberg_maint_requested_operations`: canonical order; `compaction` names rewrite_data_files."""
    if operations is None:
        return list(protocol.DEFAULT_OPERATIONS)
    order = ", ".join(protocol.OPERATIONS)
    if not isinstance(operations, (str, list, tuple)):
        raise PolicyError(f"dbt_iceberg_maint: argument `operations` is {operations}; expected none, an operation "
                          f"name or a list of them: compaction, {order}")
    names = []
    for name in [operations] if isinstance(operations, str) else operations:
        canonical = protocol.OPERATION_ALIASES.get(name, name)
        if canonical not in protocol.OPERATIONS:
            raise PolicyError(f"dbt_iceberg_maint: argument `operations` contains '{name}'; allowed: compaction, "
                              f"{order}")
        names.append(canonical)
    return [name for name in protocol.OPERATIONS if name in names]


@dataclass(frozen=True)
class Step:
    """One step of a plan (`_iceberg_maint_step`): planned (sql runs), skipped, or failed."""

    table: str
    operation: str
    status: str
    reason: str | None
    sql: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# The operations that commit a snapshot (`replace`): a later step's due rule (expiry with no age
# limit, the statistics) counts the ones planned before it (macros: _iceberg_maint_plan_steps).
REWRITES = ("rewrite_data_files", "rewrite_position_delete_files", "rewrite_manifests")
# A table the caller named that does not exist (macros: _iceberg_maint_plan_steps).
TABLE_MISSING = "table {table} does not exist (a typo, or its model not built yet?)"
# What a table the catalog says is not Iceberg is, when nothing more specific is known (macros:
# _iceberg_maint_non_iceberg_format).
UNKNOWN_NON_ICEBERG_FORMAT = "no Iceberg metadata"


class TableFacts(Protocol):
    """What the plan reads about one existing table; the planner reads each lazily, once."""

    def gc_enabled(self) -> bool: ...
    def data_files(self) -> int | None: ...  # the current snapshot's summary; none when it has no count
    def delete_files(self) -> int | None: ...  # likewise (deletion vectors included)
    def table_bytes(self) -> int | None: ...  # likewise: total-files-size (partial_progress: auto)
    def health(self, operation: str) -> Mapping[str, Any]: ...
    def cold_scope(self, hours: float) -> ColdScope: ...
    def snapshots(self) -> Sequence[SnapshotLike]: ...
    def snapshots_now_ms(self) -> int: ...
    def location(self) -> str | None: ...
    def checked_hours_ago(self, operation: str) -> float | None: ...
    def unchanged_since_check(self, operation: str) -> int | None: ...


CHECKED_PROPERTY_PREFIX = "dbt-iceberg-maint.checked-at."
CHECKED_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
# The table's current snapshot when the plan that last checked the operation read it.
CHECKED_SNAPSHOT_PREFIX = "dbt-iceberg-maint.checked-snapshot."
# Snapshots that change no row: a compaction's, a manifest or delete-file rewrite's.
NO_DATA_CHANGE = "replace"


def checked_property(operation: str) -> str:
    """`_iceberg_maint_checked_property`: when maintain() last checked `operation` on the table (UTC)."""
    return CHECKED_PROPERTY_PREFIX + operation


def checked_hours_ago(properties: Mapping[str, str], now: dt.datetime) -> dict[str, float]:
    """`_iceberg_maint_checked_hours_ago`: an unreadable value counts as never checked."""
    found: dict[str, float] = {}
    for operation in protocol.OPERATIONS:
        try:
            at = dt.datetime.strptime(properties.get(checked_property(operation), ""), CHECKED_FORMAT)
        except ValueError:
            continue
        found[operation] = (now - at.replace(tzinfo=dt.timezone.utc)).total_seconds() / 3600
    return found


# A table's first metadata file: version 0 of a metastore-backed catalog (`00000-<uuid>`, maybe
# compressed) or version 1 of a Hadoop catalog (`v1`).
FIRST_METADATA_FILE = re.compile(r"(^|/)(v1(\.[a-z0-9]+)?|00000-[^/]*)\.metadata\.json$")


def first_metadata_age_hours(oldest_file: str, oldest_ms: int, now_ms: int) -> float | None:
    """`_iceberg_maint_table_age_hours`: the table's age in hours when `oldest_file`, the oldest
    file its metadata log still names, is its first one; None (unknown, as good as old) once the
    log has dropped it (write.metadata.previous-versions-max) or the table was created elsewhere."""
    if not FIRST_METADATA_FILE.search(oldest_file):
        return None
    return round((now_ms - oldest_ms) / 3600000.0, 3)


def checked_snapshot_property(operation: str) -> str:
    """`_iceberg_maint_checked_snapshot_property`."""
    return CHECKED_SNAPSHOT_PREFIX + operation


def skipped_when_unchanged(operation: str, policy: Mapping[str, Any]) -> bool:
    """`_iceberg_maint_skipped_when_unchanged`: operations whose answer only new data can change.
    Not a compaction scoped to cold partitions (time alone makes partitions cold), nor expiry
    (snapshots age) or orphan removal (a failed write leaves files without a snapshot)."""
    if operation == "rewrite_data_files":
        return not policy["compaction"]["cold_partitions_hours"]
    return operation in ("rewrite_position_delete_files", "rewrite_manifests")


def unchanged_since(checked: int, current: int | None, lineage: Mapping[int, tuple[int | None, str | None]]) -> bool:
    """`_iceberg_maint_unchanged_since`: whether `checked` is the current snapshot or an ancestor
    of it reached through snapshots that change no row. `lineage`: snapshot id -> (parent id,
    operation). A rollback past it, an expired snapshot or any write since make it false."""
    snapshot = current
    for _ in range(len(lineage) + 1):
        if snapshot is None or snapshot not in lineage:
            return False
        if snapshot == checked:
            return True
        parent, operation = lineage[snapshot]
        if operation != NO_DATA_CHANGE:
            return False
        snapshot = parent
    return False


def unchanged_reason(snapshot_id: int) -> str:
    """`_iceberg_maint_unchanged_reason`."""
    return f"nothing written since its last check (snapshot {snapshot_id}): only compactions and rewrites since"


def interval_reason(section: Mapping[str, Any], hours_ago: float | None) -> str | None:
    """`_iceberg_maint_interval_reason`: why the operation is not checked now, or None."""
    interval = section["interval_hours"]
    if interval and hours_ago is not None and hours_ago < interval:
        return f"last checked {round(hours_ago, 2)} h ago, within interval_hours {interval}"
    return None


def plan_steps(table: TableRef, requested: Sequence[str], policy: Mapping[str, Any], facts: TableFacts | None,
               now: dt.datetime, *, project_enabled: bool = True, force: bool = False,
               as_of: dt.datetime | None = None, required: bool = False,
               table_format: str | None = None) -> list[Step]:
    """`_iceberg_maint_plan_steps`: the steps for a checked policy. `facts` None: no such table,
    which fails every operation when `required` (the caller named the table), else skips them.
    `table_format`: what the existing table is when it is not an Iceberg table (a Hive table in
    Spark's session catalog; facts are then None): every operation skips it, named or not.
    `now` is the wall clock; `as_of` the plan's reference time when given."""
    name = table.qualified
    blocked = None
    if not project_enabled:
        blocked = "maintenance disabled by var dbt_iceberg_maint_enabled: false"
    elif not policy["enabled"]:
        blocked = "maintenance disabled by meta.iceberg_maint.enabled: false"
    elif table_format:
        blocked = f"not an Iceberg table ({table_format}): never maintained"
    elif facts is None and required:
        return [Step(name, op, "failed", TABLE_MISSING.format(table=name)) for op in requested]
    elif facts is None:
        blocked = "table does not exist (model not built yet?)"
    if blocked is not None or facts is None:
        return [Step(name, op, "skipped", blocked) for op in requested]
    reference = as_of or now
    steps: list[Step] = []
    rewrites_planned: list[str] = []
    for operation in requested:
        section_name = section_of(operation)
        section = policy[section_name]
        if not section["enabled"]:
            disabled = f"disabled by meta.iceberg_maint.{section_name}.enabled: false"
            steps.append(Step(name, operation, "skipped", disabled))
            continue
        interval = None if force else interval_reason(section, facts.checked_hours_ago(operation))
        if interval is not None:
            steps.append(Step(name, operation, "skipped", interval))
            continue
        unchanged = facts.unchanged_since_check(operation) \
            if not force and skipped_when_unchanged(operation, policy) else None
        if unchanged is not None:
            steps.append(Step(name, operation, "skipped", unchanged_reason(unchanged)))
            continue
        hours = policy["compaction"]["cold_partitions_hours"]
        gated = None if force else gate_reason(operation, policy["cost_gate"], facts.snapshots(),
                                               facts.snapshots_now_ms(), hours)
        if gated is not None:
            steps.append(Step(name, operation, "skipped", gated))
            continue
        few = too_few_data_files(section, facts.data_files(), facts.delete_files()) \
            if operation == "rewrite_data_files" and not force else None
        if few is not None:
            steps.append(Step(name, operation, "skipped", few))
            continue
        scope = facts.cold_scope(hours) if operation == "rewrite_data_files" and hours else None
        decision = Decision(True, "forced (thresholds ignored)")
        if not force:
            health = {**facts.health(operation), "rewrites_planned": list(rewrites_planned)}
            if scope is not None:
                health["cold_scope"] = scope
            if policy["expire_snapshots"]["older_than"] is not None:
                cutoff = checks.parse_instant("policy expire_snapshots", "older_than",
                                              policy["expire_snapshots"]["older_than"]).value
                assert cutoff is not None  # the policy was checked
                health["hours_since_older_than"] = (reference - cutoff).total_seconds() / 3600
            decision = OPERATIONS[operation].due(section, health)
        if not decision.due:
            steps.append(Step(name, operation, "skipped", decision.reason))
        elif operation in ("expire_snapshots", "remove_orphan_files") and not facts.gc_enabled():
            verb = "expire snapshots" if operation == "expire_snapshots" else "delete orphan files"
            steps.append(Step(name, operation, "failed", GC_DISABLED.format(verb=verb)))
        else:
            # A guard that needs the table (the orphan location) raises PolicyError, as the macro does.
            location = facts.location() if operation == "remove_orphan_files" and section["location"] else None
            size = facts.table_bytes() if operation == "rewrite_data_files" else None
            planned = OPERATIONS[operation].planned_sql(table, section,
                                                        PlanContext(now, as_of, scope, location, force, size))
            if planned.sql is None:
                steps.append(Step(name, operation, "skipped", planned.reason))
            else:
                steps.append(Step(name, operation, "planned", decision.reason, planned.sql))
                if operation in REWRITES:
                    rewrites_planned.append(operation)
    return steps
