"""The conflict-risk rules (pure): a project model in, findings out.

Severity: `error` only where a run will fail or lose data; `warning` for a risk of conflicts or
duplicate rows; `info` for what the user already chose knowingly. docs/lint.md explains every
rule: the Iceberg semantics behind it, an example finding and the fix.

Over 300 lines because it holds all eight rules side by side with their shared finding shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass

from dbt_iceberg_maint import guards
from dbt_iceberg_maint.lint.project import Model, Policy, Project
from dbt_iceberg_maint.lint.sql import (
    DEST_ALIAS,
    SOURCE_ALIAS,
    TIME_TYPES,
    PartitionField,
    Predicate,
    PredicateProblem,
    called_macros,
    column_qualifier,
    columns,
    conjuncts,
    parse_predicate,
    restricted_column,
)

SEVERITIES = ("error", "warning", "info")
MERGE_WITHOUT_PARTITION_PREDICATE = "merge_without_partition_predicate"
MERGE_WITHOUT_UNIQUE_KEY = "merge_without_unique_key"
COMPACTION_NOT_COLD_SCOPED = "compaction_not_cold_scoped"
INVALID_WHERE = "invalid_where"
ORPHAN_WINDOW_TOO_SHORT = "orphan_window_too_short"
PROPERTIES_NEVER_RECONCILED = "properties_never_reconciled"
INVALID_POLICY = "invalid_policy"
MODEL_SQL_UNREADABLE = "model_sql_unreadable"
RULES = (
    INVALID_POLICY,
    MERGE_WITHOUT_PARTITION_PREDICATE,
    MERGE_WITHOUT_UNIQUE_KEY,
    COMPACTION_NOT_COLD_SCOPED,
    INVALID_WHERE,
    ORPHAN_WINDOW_TOO_SHORT,
    PROPERTIES_NEVER_RECONCILED,
    MODEL_SQL_UNREADABLE,
)
# Iceberg refuses remove_orphan_files younger than this (and so do the package's macros).
ORPHAN_FLOOR_HOURS = float(guards.ORPHAN_FLOOR_HOURS)
# The orphan window must exceed the longest observed write by this factor: the next run may
# take longer than any run seen so far.
ORPHAN_MARGIN_FACTOR = 2.0
# Hooks calling one of these reconcile declared table properties onto the table. maintain()
# only reads them, so it does not count.
RECONCILING_MACROS = frozenset({"apply_table_properties"})
POLICY_FIX = "fix meta.iceberg_maint as the message says (the keys and values allowed: docs/macros.md)"
# The window suggested for a MERGE's target, in days: widen it to the oldest partition a batch updates.
SUGGESTED_WINDOW_DAYS = 3
# A policy mistake many models inherit names this many of them (then "and N more").
POLICY_MODELS_NAMED = 3


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    node: str  # dbt unique_id
    message: str
    suggestion: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class SilencedFinding:
    finding: Finding
    reason: str


@dataclass(frozen=True)
class LintResult:
    findings: tuple[Finding, ...]
    silenced: tuple[SilencedFinding, ...]
    models: int  # how many Iceberg models were checked

    @property
    def exit_code(self) -> int:
        """The contract: 1 when any error finding remains, else 0."""
        return 1 if any(f.severity == "error" for f in self.findings) else 0

    def to_json(self) -> str:
        return json.dumps([f.to_dict() for f in self.findings], indent=2)


Rule = Callable[[Model, Project, Mapping[str, float]], Iterator[Finding]]


def _is_merge(model: Model) -> bool:
    return model.iceberg and model.materialized == "incremental" and model.strategy == "merge"


def _parsed_predicates(model: Model) -> list[Predicate]:
    return [p for p in (parse_predicate(t) for t in model.incremental_predicates if not _is_jinja(t))
            if isinstance(p, Predicate)]


def _is_jinja(text: str) -> bool:
    return "{{" in text or "{%" in text


def _window_predicate(model: Model, field: PartitionField) -> str:
    column = f"DBT_INTERNAL_DEST.{field.column}"
    if field.transform == "months":
        return f"{column} >= add_months(trunc(current_date(), 'MM'), -1)"
    if field.transform == "years":
        return f"{column} >= trunc(current_date(), 'YEAR')"
    if field.transform in ("days", "hours") or (model.column_type(field.column or "") or "") in TIME_TYPES:
        return f"{column} >= date_sub(current_date(), {SUGGESTED_WINDOW_DAYS})"
    if field.transform == "bucket":
        return f"{column} in (<the {field.column} values of this batch>)"
    return f"{column} >= <the lowest {field.column} this batch writes>"


def merge_without_partition_predicate(
    model: Model, project: Project, durations: Mapping[str, float]
) -> Iterator[Finding]:
    if not (_is_merge(model) and model.unique_key and model.partition_fields):
        return
    sources = frozenset(f.column for f in model.partition_fields if f.column)
    if not sources:
        return
    if any(not isinstance(parse_predicate(t), Predicate) for t in model.incremental_predicates if not _is_jinja(t)):
        return  # invalid_where reports the predicate that does not parse
    for predicate in _parsed_predicates(model):
        if any(restricted_column(term, sources, DEST_ALIAS) for term in conjuncts(predicate.expression)):
            return
    if any(_is_jinja(t) for t in model.incremental_predicates):
        return  # rendered at run time: cannot be judged here
    field = next(f for f in model.partition_fields if f.column)
    suggested = _window_predicate(model, field)
    given = f" (its incremental_predicates {list(model.incremental_predicates)} do not bound them)" \
        if model.incremental_predicates else ""
    partitions = ", ".join(f.text for f in model.partition_fields)
    if model.policy.merge_isolation == "snapshot" and (_reconciles(model.hooks) or _reconciles(project.project_hooks)):
        severity, risk = "info", (
            "it declares (and reconciles) merge isolation `snapshot`, so concurrent appends to other partitions "
            "do not fail it "
            "(under serializable they would); the predicate still prunes the files it reads")
    else:
        severity, risk = "warning", (
            "under serializable isolation (Iceberg's default) a concurrent commit that adds files to ANY partition "
            "(another MERGE, a backfill) fails it with ValidationException `Found conflicting files that can "
            "contain records matching true`")
    yield Finding(
        MERGE_WITHOUT_PARTITION_PREDICATE, severity, model.unique_id,
        f"incremental merge into Iceberg table partitioned by {partitions} reads the whole target{given}: {risk}",
        f"incremental_predicates: [\"{suggested}\"] - bound the target by the partition source column "
        f"`{field.column}`; the window must cover every partition a batch can update (rows outside it are not "
        "matched and would be inserted again)",
    )


def merge_without_unique_key(model: Model, project: Project, durations: Mapping[str, float]) -> Iterator[Finding]:
    if not _is_merge(model) or model.unique_key:
        return
    yield Finding(
        MERGE_WITHOUT_UNIQUE_KEY, "warning", model.unique_id,
        "incremental merge without unique_key: dbt-spark merges `on FALSE`, i.e. appends every row; a re-run "
        "after a landed commit (or a commit in an unknown state) duplicates the batch, so "
        "dbt-iceberg-maint run will not re-run it after a conflict",
        "set unique_key to the column(s) identifying a row, or say what it is: incremental_strategy='append'",
    )


def _excludes_written_partitions(model: Model, where: str | None) -> bool:
    if not where or _is_jinja(where):
        return bool(where)  # a Jinja where is rendered at run time: assume the user scoped it
    parsed = parse_predicate(where)
    if not isinstance(parsed, Predicate):
        return True  # invalid_where reports it
    sources = frozenset(f.column for f in model.partition_fields if f.column)
    return any(restricted_column(term, sources, "", upper_bound_only=True) for term in conjuncts(parsed.expression))


def compaction_not_cold_scoped(model: Model, project: Project, durations: Mapping[str, float]) -> Iterator[Finding]:
    compaction = model.policy.compaction
    if not (model.maintained and model.materialized == "incremental" and compaction.enabled):
        return
    if compaction.get("cold_partitions_hours") or _excludes_written_partitions(model, compaction.get("where")):
        return
    where = compaction.get("where")
    what = f"its where `{where}` does not bound a partition column from above" if where else "it has no where"
    yield Finding(
        COMPACTION_NOT_COLD_SCOPED, "warning", model.unique_id,
        f"compaction is enabled for this incrementally written table but not scoped to cold partitions ({what}): "
        "a rewrite_data_files that replaces files a running MERGE/DELETE read fails that write with "
        "`Missing required files to delete`",
        "meta.iceberg_maint.compaction.cold_partitions_hours: 6 (compact only partitions no writer touched for "
        "6 h), or a where bounding the partition column from above, e.g. "
        f"`{_cold_where_example(model)}`",
    )


def _cold_where_example(model: Model) -> str:
    field = next((f for f in model.partition_fields if f.column), None)
    if field is None:
        return "<partition column> < date_sub(current_date(), 1)"
    return f"{field.column} < date_sub(current_date(), 1)"


def _invalid(model: Model, origin: str, problem: str, fix: str) -> Finding:
    return Finding(INVALID_WHERE, "error", model.unique_id, f"{origin}: {problem}", fix)


def _policy_finding(problem: str, models: list[Model]) -> Finding:
    """One policy mistake, where it is configured and how many Iceberg models inherit it."""
    where = f"; configured in {models[0].policy_source}" if models[0].policy_source else ""
    if len(models) > 1:
        names = ", ".join(m.name for m in models[:POLICY_MODELS_NAMED])
        more = f" and {len(models) - POLICY_MODELS_NAMED} more" if len(models) > POLICY_MODELS_NAMED else ""
        where += f", inherited by {len(models)} Iceberg models ({names}{more})"
    return Finding(INVALID_POLICY, "error", models[0].unique_id,
                   f"{problem}{where}; maintain() and iceberg_maintenance refuse this policy, so the maintenance "
                   "step fails after the model is built", POLICY_FIX)


def invalid_policy(project: Project) -> tuple[dict[str, list[Finding]], list[SilencedFinding]]:
    """Every problem the macros raise for a policy (the policy engine's checks): the model builds,
    then its maintenance post-hook or job fails. Each mistake once per place it is configured
    (a typo in dbt_project.yml's +meta is one finding, not one per model inheriting it), keyed by
    the first model inheriting it; models whose lint_ignore names the rule are set aside."""
    groups: dict[tuple[str, str], list[Model]] = {}
    silenced: list[SilencedFinding] = []
    for model in project.models:
        for problem in model.policy.errors if model.iceberg else ():
            reason = model.policy.ignored.get(INVALID_POLICY)
            if reason is None:
                groups.setdefault((problem, model.policy_source or model.unique_id), []).append(model)
            else:
                silenced.append(SilencedFinding(_policy_finding(problem, [model]), reason))
    by_model: dict[str, list[Finding]] = {}
    for (problem, _), models in groups.items():
        by_model.setdefault(models[0].unique_id, []).append(_policy_finding(problem, models))
    return by_model, silenced


def invalid_source_policy(unique_id: str, policy: Policy) -> Iterator[Finding]:
    """invalid_policy for a source table that declares meta.iceberg_maint: iceberg_maintenance,
    which maintains it by default, refuses to start."""
    for problem in policy.errors:
        yield Finding(INVALID_POLICY, "error", unique_id,
                      f"{problem}; iceberg_maintenance maintains this source and refuses this policy, so the "
                      "maintenance job fails before it starts", POLICY_FIX)


def _column_checked_texts(model: Model) -> list[str]:
    """What invalid_where checks against the model's columns: its policy `where`s and (merge)
    incremental_predicates, those without Jinja (rendered only at run time)."""
    wheres = [section.get("where") for section in (model.policy.compaction, model.policy.rewrite_position_delete_files)]
    texts = [w for w in wheres if isinstance(w, str)]
    if _is_merge(model):
        texts += model.incremental_predicates
    return [text for text in texts if not _is_jinja(text)]


def model_sql_unreadable(model: Model, project: Project, durations: Mapping[str, float]) -> Iterator[Finding]:
    """Say which column checks were not made, instead of skipping them silently; only where a
    check was due (a model built by package macros with no `where` has nothing unchecked)."""
    unchecked = _column_checked_texts(model) if model.iceberg and model.unreadable is not None else []
    if unchecked:
        yield Finding(MODEL_SQL_UNREADABLE, "info", model.unique_id,
                      f"the lint could not read the model's output columns: {model.unreadable}; the columns named "
                      f"by {', '.join(repr(text) for text in unchecked)} (its policy's `where` and "
                      "incremental_predicates) were not checked",
                      "name the columns in the model's final SELECT (or declare them under `columns:` in its YAML) "
                      "to have them checked")


def invalid_where(model: Model, project: Project, durations: Mapping[str, float]) -> Iterator[Finding]:
    if not model.iceberg:
        return
    produced = frozenset(model.projection.names) if model.projection else None
    for section_name, section in (("compaction", model.policy.compaction),
                                  ("rewrite_position_delete_files", model.policy.rewrite_position_delete_files)):
        where = section.get("where")
        if where is None or (isinstance(where, str) and _is_jinja(where)):
            continue
        if guards.where_errors(section_name, "where", where):
            continue  # the where guard refuses it: invalid_policy reports it
        origin = f"meta.iceberg_maint.{section_name}.where {where!r}"
        fix = "give one Spark boolean expression over the table's columns, e.g. `event_date < current_date()`"
        if not isinstance(where, str):
            yield _invalid(model, origin, "is not a string", fix)
            continue
        parsed = parse_predicate(where)
        if isinstance(parsed, PredicateProblem):
            yield _invalid(model, origin, f"{parsed.problem}; the maintenance run fails", fix)
            continue
        unknown = sorted({c.name.lower() for c in columns(parsed.expression)} - produced) if produced else []
        if unknown:
            yield _invalid(model, origin, f"names {', '.join(unknown)}, which the model does not produce "
                           f"(columns: {', '.join(model.projection.names if model.projection else ())})", fix)
    for text in model.incremental_predicates:
        if _is_jinja(text) or not _is_merge(model):
            continue
        origin = f"incremental_predicates entry {text!r}"
        fix = "give one Spark boolean expression over DBT_INTERNAL_DEST.<column> / DBT_INTERNAL_SOURCE.<column>"
        parsed = parse_predicate(text)
        if isinstance(parsed, PredicateProblem):
            yield _invalid(model, origin, f"{parsed.problem}; the MERGE fails", fix)
            continue
        unknown = sorted({
            f"{c.table}.{c.name}" for c in columns(parsed.expression)
            if column_qualifier(c) in (DEST_ALIAS, SOURCE_ALIAS) and c.name.lower() not in produced
        }) if produced else []
        if unknown:
            yield _invalid(model, origin, f"names {', '.join(unknown)}, which the model does not produce "
                           f"(columns: {', '.join(model.projection.names if model.projection else ())})", fix)


def _hours(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def orphan_window_too_short(model: Model, project: Project, durations: Mapping[str, float]) -> Iterator[Finding]:
    section = model.policy.remove_orphan_files
    hours = _hours(section.get("older_than_hours"))
    if not (model.maintained and section.enabled) or hours is None or hours < ORPHAN_FLOOR_HOURS:
        return  # below the floor the macros refuse the policy: invalid_policy reports it
    writers = project.writers_of(model.relation)
    observed = [(durations[w.unique_id], w) for w in writers if w.unique_id in durations]
    if not observed:
        return
    seconds, longest = max(observed, key=lambda pair: pair[0])
    required = seconds / 3600 * ORPHAN_MARGIN_FACTOR
    if hours >= required:
        return
    yield Finding(
        ORPHAN_WINDOW_TOO_SHORT, "error", model.unique_id,
        f"remove_orphan_files.older_than_hours is {hours:g} but {longest.name} ran {seconds / 3600:.1f} h "
        f"(longest observed run writing {model.relation}); files of such a write are not referenced until its "
        "commit, so a sweep during it deletes them and the commit then points at missing files",
        f"meta.iceberg_maint.remove_orphan_files.older_than_hours: {max(required, ORPHAN_FLOOR_HOURS):.0f} "
        f"(the longest observed run x {ORPHAN_MARGIN_FACTOR:g})",
    )


def _reconciles(texts: tuple[str, ...]) -> bool:
    return any(called_macros(text) & RECONCILING_MACROS for text in texts)


def properties_never_reconciled(model: Model, project: Project, durations: Mapping[str, float]) -> Iterator[Finding]:
    declared = model.policy.declared_properties
    if not (model.iceberg and declared) or _reconciles(model.hooks) or _reconciles(project.project_hooks):
        return
    yield Finding(
        PROPERTIES_NEVER_RECONCILED, "warning", model.unique_id,
        f"declares {', '.join(declared)} under meta.iceberg_maint but no hook of the model or project calls "
        "apply_table_properties: dbt-spark sets tblproperties only when it creates the table, so the existing "
        "table keeps whatever it had",
        "+post-hook: \"{{ dbt_iceberg_maint.apply_table_properties() }}\" (or silence with "
        "meta.iceberg_maint.lint_ignore if a job runs `dbt run-operation dbt_iceberg_maint.apply_table_properties`)",
    )


# Every rule but invalid_policy, which reads the whole project at once (invalid_policy above).
RULE_FUNCTIONS: Mapping[str, Rule] = {
    MODEL_SQL_UNREADABLE: model_sql_unreadable,
    MERGE_WITHOUT_PARTITION_PREDICATE: merge_without_partition_predicate,
    MERGE_WITHOUT_UNIQUE_KEY: merge_without_unique_key,
    COMPACTION_NOT_COLD_SCOPED: compaction_not_cold_scoped,
    INVALID_WHERE: invalid_where,
    ORPHAN_WINDOW_TOO_SHORT: orphan_window_too_short,
    PROPERTIES_NEVER_RECONCILED: properties_never_reconciled,
}


def lint_project(project: Project, durations: Mapping[str, float] | None = None) -> LintResult:
    """Every rule over every model; findings a model's lint_ignore names are set aside."""
    durations = durations or {}
    findings: list[Finding] = []
    policy_findings, silenced = invalid_policy(project)
    checked = [(model.policy, finding) for model in project.models
               for finding in [*policy_findings.get(model.unique_id, ()),
                               *(f for rule in RULES if rule in RULE_FUNCTIONS
                                 for f in RULE_FUNCTIONS[rule](model, project, durations))]]
    checked += [(policy, finding) for unique_id, policy in project.source_policies
                for finding in invalid_source_policy(unique_id, policy)]
    for policy, finding in checked:
        reason = policy.ignored.get(finding.rule)
        if reason is None:
            findings.append(finding)
        else:
            silenced.append(SilencedFinding(finding, reason))
    return LintResult(tuple(findings), tuple(silenced), sum(1 for model in project.models if model.iceberg))
