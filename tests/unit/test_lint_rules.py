"""The lint rules over minimal manifests built in the test: each fires on the risky model and
stays silent on the corrected one; bad fragments become findings; silencing; JSON shape."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from dbt_iceberg_maint.errors import UsageError
from dbt_iceberg_maint.lint import RULES, Finding, lint_manifest, render_text
from dbt_iceberg_maint.lint.project import run_durations
from dbt_iceberg_maint.lint.sql import (
    Predicate,
    PredicateProblem,
    Projection,
    Unreadable,
    model_projection,
    parse_predicate,
    partition_field,
)

EVENTS_SQL = """{{ config(materialized='incremental') }}
select event_id, user_id, event_ts, cast(event_ts as date) as event_date, amount
from {{ ref('raw_events') }}
{% if is_incremental() %} where batch = {{ var('batch') }} {% else %} where batch <= {{ var('batch', 1) }} {% endif %}
"""


def node(name: str, *, meta: Any = None, post_hook: str | None = None, raw_code: str = EVENTS_SQL,
         **config: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {"file_format": "iceberg", "materialized": "incremental", **config}
    if meta is not None:
        settings["meta"] = {"iceberg_maint": meta}
    settings["post-hook"] = [{"sql": post_hook, "transaction": True, "index": None}] if post_hook else []
    return {"unique_id": f"model.proj.{name}", "name": name, "resource_type": "model", "schema": "analytics",
            "alias": name, "raw_code": raw_code, "columns": {}, "config": settings}


def manifest(*nodes: dict[str, Any], hooks: tuple[str, ...] = ()) -> dict[str, Any]:
    every = {n["unique_id"]: n for n in nodes}
    for index, hook in enumerate(hooks):
        uid = f"operation.proj.proj-on-run-end-{index}"
        every[uid] = {"unique_id": uid, "resource_type": "operation", "raw_code": hook, "config": {}}
    return {"metadata": {"project_name": "proj"}, "nodes": every}


def findings(*nodes: dict[str, Any], durations: Mapping[str, float] | None = None, **kwargs: Any) -> list[Finding]:
    return list(lint_manifest(manifest(*nodes, **kwargs), durations).findings)


def rules_of(found: list[Finding]) -> list[tuple[str, str, str]]:
    return [(f.rule, f.severity, f.node.rsplit(".", 1)[-1]) for f in found]


# A model that every rule accepts: the baseline the risky variants differ from in one point.
COLD: dict[str, Any] = {"compaction": {"cold_partitions_hours": 6}}
GOOD_MERGE: dict[str, Any] = dict(incremental_strategy="merge", unique_key="event_id", partition_by=["days(event_ts)"],
                  incremental_predicates=["DBT_INTERNAL_DEST.event_ts >= date_sub(current_date(), 3)"])


def test_a_corrected_project_has_no_findings() -> None:
    result = lint_manifest(manifest(
        node("events", meta=COLD, **GOOD_MERGE),
        node("rebuilt", materialized="table", meta={"isolation_level": "snapshot"},
             post_hook="{{ dbt_iceberg_maint.apply_table_properties() }}"),
        node("not_iceberg", file_format="parquet", incremental_strategy="merge"),
    ))
    assert result.findings == ()
    assert result.exit_code == 0
    assert result.models == 2  # the Iceberg models; not_iceberg is parquet


# --- merge_without_partition_predicate ------------------------------------------------------

def test_merge_without_partition_predicate_fires_with_a_concrete_predicate() -> None:
    risky = {**GOOD_MERGE, "incremental_predicates": None}
    [finding] = findings(node("events", meta=COLD, **risky))
    assert (finding.rule, finding.severity) == ("merge_without_partition_predicate", "warning")
    assert "partitioned by days(event_ts)" in finding.message
    assert "Found conflicting files that can contain records matching true" in finding.message
    assert finding.suggestion.startswith(
        'incremental_predicates: ["DBT_INTERNAL_DEST.event_ts >= date_sub(current_date(), 3)"]')
    # the suggestion is itself a predicate the rule accepts
    fixed = {**GOOD_MERGE, "incremental_predicates": [finding.suggestion.split('"')[1]]}
    assert findings(node("events", meta=COLD, **fixed)) == []


@pytest.mark.parametrize(
    "predicates",
    [
        ["DBT_INTERNAL_SOURCE.event_ts >= date_sub(current_date(), 3)"],  # bounds the source, not the target
        ["DBT_INTERNAL_DEST.amount > 0"],  # not a partition source column
        ["DBT_INTERNAL_DEST.event_ts >= DBT_INTERNAL_SOURCE.event_ts"],  # a join condition: not pushed to the scan
        ["DBT_INTERNAL_DEST.event_ts >= current_date() - 3 or DBT_INTERNAL_DEST.amount > 0"],  # OR widens it
    ],
)
def test_predicates_that_do_not_bound_the_target_partitions_still_fire(predicates: list[str]) -> None:
    risky = {**GOOD_MERGE, "incremental_predicates": predicates}
    assert rules_of(findings(node("events", meta=COLD, **risky))) == [
        ("merge_without_partition_predicate", "warning", "events")]


@pytest.mark.parametrize(
    "predicate",
    [
        "DBT_INTERNAL_DEST.event_ts between '2026-01-01' and '2026-01-03' and DBT_INTERNAL_DEST.amount > 0",
        "dbt_internal_dest.EVENT_TS in (date '2026-01-01', date '2026-01-02')",
        "date_sub(current_date(), 2) <= DBT_INTERNAL_DEST.event_ts",
        "(DBT_INTERNAL_DEST.event_ts < '2026-01-01' or DBT_INTERNAL_DEST.event_ts > '2026-02-01')",
    ],
)
def test_predicates_bounding_a_partition_source_column_satisfy_the_rule(predicate: str) -> None:
    fixed = {**GOOD_MERGE, "incremental_predicates": [predicate]}
    assert findings(node("events", meta=COLD, **fixed)) == []


def test_partition_predicate_suggestions_follow_the_transform_and_type() -> None:
    def suggestion(partition_by: list[str]) -> str:
        risky = {**GOOD_MERGE, "incremental_predicates": None, "partition_by": partition_by}
        [finding] = findings(node("events", meta=COLD, **risky))
        return finding.suggestion.split('"')[1]

    assert suggestion(["event_date"]) == "DBT_INTERNAL_DEST.event_date >= date_sub(current_date(), 3)"  # cast as date
    assert suggestion(["months(event_ts)"]) == (
        "DBT_INTERNAL_DEST.event_ts >= add_months(trunc(current_date(), 'MM'), -1)")
    assert suggestion(["bucket(16, user_id)"]) == "DBT_INTERNAL_DEST.user_id in (<the user_id values of this batch>)"
    assert suggestion(["user_id"]) == "DBT_INTERNAL_DEST.user_id >= <the lowest user_id this batch writes>"


def test_snapshot_merge_isolation_that_is_reconciled_downgrades_to_info() -> None:
    risky = {**GOOD_MERGE, "incremental_predicates": None}
    meta = {**COLD, "isolation_level": {"merge": "snapshot"}}
    hook = "{{ dbt_iceberg_maint.apply_table_properties() }}"
    [finding] = findings(node("events", meta=meta, post_hook=hook, **risky))
    assert (finding.rule, finding.severity) == ("merge_without_partition_predicate", "info")
    # declared but never reconciled: the table may still be serializable
    assert rules_of(findings(node("events", meta=meta, **risky))) == [
        ("merge_without_partition_predicate", "warning", "events"),
        ("properties_never_reconciled", "warning", "events")]


def test_unpartitioned_or_append_models_need_no_partition_predicate() -> None:
    assert findings(node("events", meta=COLD, **{**GOOD_MERGE, "partition_by": None})) == []
    assert findings(node("log", meta=COLD, incremental_strategy="append", partition_by=["event_date"])) == []


# --- merge_without_unique_key --------------------------------------------------------------

def test_merge_without_unique_key_fires_and_unique_key_fixes_it() -> None:
    risky = {**GOOD_MERGE, "unique_key": None}
    [finding] = findings(node("events", meta=COLD, **risky))
    assert (finding.rule, finding.severity) == ("merge_without_unique_key", "warning")
    assert "on FALSE" in finding.message
    assert findings(node("events", meta=COLD, **{**GOOD_MERGE, "unique_key": ["event_id", "user_id"]})) == []


# --- compaction_not_cold_scoped ------------------------------------------------------------

def test_compaction_not_cold_scoped_fires_on_the_default_policy() -> None:
    [finding] = findings(node("events", **GOOD_MERGE))
    assert (finding.rule, finding.severity) == ("compaction_not_cold_scoped", "warning")
    assert "it has no where" in finding.message
    assert "cold_partitions_hours: 6" in finding.suggestion
    assert "event_ts < date_sub(current_date(), 1)" in finding.suggestion


@pytest.mark.parametrize(
    "compaction",
    [
        {"cold_partitions_hours": 6},
        {"where": "event_ts < date_sub(current_date(), 2)"},
        {"where": "amount > 0 and date_sub(current_date(), 2) > event_ts"},
        {"enabled": False},
    ],
)
def test_cold_scoped_or_disabled_compaction_is_accepted(compaction: dict[str, Any]) -> None:
    assert findings(node("events", meta={"compaction": compaction}, **GOOD_MERGE)) == []


@pytest.mark.parametrize("meta", [False, {"enabled": False}, {"compaction": False}])
def test_maintenance_switched_off_is_not_compacted(meta: Any) -> None:
    assert findings(node("events", meta=meta, **GOOD_MERGE)) == []


@pytest.mark.parametrize("where", ["event_ts >= date_sub(current_date(), 2)", "amount > 0"])
def test_a_where_that_keeps_the_newest_partitions_still_fires(where: str) -> None:
    [finding] = findings(node("events", meta={"compaction": {"where": where}}, **GOOD_MERGE))
    assert finding.rule == "compaction_not_cold_scoped"
    assert f"its where `{where}` does not bound a partition column from above" in finding.message


def test_tables_rebuilt_in_full_are_not_asked_for_cold_scoping() -> None:
    assert findings(node("summary", materialized="table")) == []


# --- invalid_where -------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("where", "problem"),
    [
        ("event_date <", "sqlglot cannot parse it as Spark SQL: Required keyword: 'expression' missing"),
        ("event_date", "it parses as Column (event_date), not a boolean expression"),
        ("event_date in (select d from t)", "it contains a subquery; Iceberg accepts column filters only"),
        ("no_such_col < 3", "names no_such_col, which the model does not produce "
                            "(columns: event_id, user_id, event_ts, event_date, amount)"),
    ],
)
def test_invalid_policy_where_is_an_error_finding_never_a_crash(where: str, problem: str) -> None:
    meta = {"compaction": {"cold_partitions_hours": 6, "where": where}}
    result = lint_manifest(manifest(node("events", meta=meta, **GOOD_MERGE)))
    [finding] = result.findings
    assert (finding.rule, finding.severity) == ("invalid_where", "error")
    assert finding.message.startswith(f"meta.iceberg_maint.compaction.where {where!r}: {problem}")
    assert result.exit_code == 1


@pytest.mark.parametrize(("where", "guard"), [
    ("event_date < '2026-01-01'; drop table x", "it must not contain ';'"),
    ("'unterminated", "but the ' at character 1 is never closed"),
])
def test_a_where_the_guard_refuses_is_an_invalid_policy_with_the_macros_message(where: str, guard: str) -> None:
    meta = {"compaction": {"cold_partitions_hours": 6, "where": where}}
    [finding] = findings(node("events", meta=meta, **GOOD_MERGE))
    assert (finding.rule, finding.severity) == ("invalid_policy", "error")
    assert finding.message.startswith(f"rewrite_data_files: argument `where` is {json.dumps(where)}; ")
    assert guard in finding.message


def test_every_policy_error_the_macros_raise_is_a_finding() -> None:
    """A mistyped key or section, a negative cold window: the next run would build the model and
    then fail in its post-hook."""
    meta = {"compaction": {"cold_partitions_hours": -6, "min_input_file": 2}, "expire_snapshot": {}}
    messages = [f.message for f in findings(node("events", meta=meta, **GOOD_MERGE)) if f.rule == "invalid_policy"]
    assert [m.split(";")[0] for m in messages] == [
        "meta.iceberg_maint.compaction has unknown key `min_input_file` (did you mean `min_input_files`?)",
        "meta.iceberg_maint has unknown key `expire_snapshot` (did you mean `expire_snapshots`?)"]
    [negative] = [f for f in findings(node("events", meta={"compaction": {"cold_partitions_hours": -6}},
                                           **GOOD_MERGE)) if f.rule == "invalid_policy"]
    assert negative.message.startswith("policy compaction: argument `cold_partitions_hours` is -6; it must be "
                                       "greater than 0; maintain() and iceberg_maintenance refuse this policy")
    assert findings(node("events", meta={"compaction": {"cold_partitions_hours": -6}}, file_format="parquet",
                         **{k: v for k, v in GOOD_MERGE.items() if k != "file_format"})) == []


def test_invalid_where_covers_position_deletes_and_incremental_predicates() -> None:
    meta = {**COLD, "rewrite_position_delete_files": {"where": "amount >"}}
    bad_predicates = {**GOOD_MERGE, "incremental_predicates": [
        "DBT_INTERNAL_DEST.event_ts >= current_date() and DBT_INTERNAL_SOURCE.batch_no > 0"]}
    assert rules_of(findings(node("events", meta=meta, **bad_predicates))) == [
        ("invalid_where", "error", "events"), ("invalid_where", "error", "events")]
    messages = [f.message for f in findings(node("events", meta=meta, **bad_predicates))]
    assert messages[0].startswith("meta.iceberg_maint.rewrite_position_delete_files.where 'amount >': sqlglot")
    assert messages[1].startswith(
        "incremental_predicates entry "
        "'DBT_INTERNAL_DEST.event_ts >= current_date() and DBT_INTERNAL_SOURCE.batch_no > 0'"
        ": names DBT_INTERNAL_SOURCE.batch_no, which the model does not produce")


def test_fragments_still_holding_jinja_are_left_to_run_time() -> None:
    jinja = {**GOOD_MERGE, "incremental_predicates": ["DBT_INTERNAL_DEST.event_ts >= '{{ var(\"since\") }}'"]}
    meta = {"compaction": {"where": "event_ts < '{{ var(\"cold_before\") }}'"}}
    assert findings(node("events", meta=meta, **jinja)) == []


def test_unknown_columns_are_not_judged_when_the_model_sql_cannot_be_read_and_the_lint_says_so() -> None:
    opaque = "select * from {{ ref('raw_events') }}"
    meta = {"compaction": {"cold_partitions_hours": 6, "where": "anything < 3"}}
    [finding] = findings(node("events", meta=meta, raw_code=opaque, **GOOD_MERGE))
    assert (finding.rule, finding.severity) == ("model_sql_unreadable", "info")
    assert "its outer SELECT has `*`, whose columns come from another relation" in finding.message
    packaged = "select {{ dbt_utils.star(ref('raw_events')) }} from {{ ref('raw_events') }}"
    [finding] = findings(node("events", meta=meta, raw_code=packaged, **GOOD_MERGE))
    assert "a macro or context the lint cannot render without dbt" in finding.message


def test_unreadable_sql_is_said_only_where_a_where_or_predicate_needed_the_columns() -> None:
    """A project of models built from package macros: no finding for a model with nothing to check."""
    packaged = "select {{ my_package.standard_columns() }} from {{ ref('raw_events') }}"
    assert findings(*(node(f"m{i}", meta=COLD, raw_code=packaged, materialized="table") for i in range(50))) == []
    assert findings(node("appended", meta=COLD, raw_code=packaged, incremental_strategy="append",
                         incremental_predicates=["DBT_INTERNAL_DEST.x > 0"])) == []  # predicates of merges only
    [finding] = findings(node("scoped", meta={"compaction": {"where": "day < current_date()"}}, raw_code=packaged,
                              materialized="table"))
    assert (finding.rule, finding.node) == ("model_sql_unreadable", "model.proj.scoped")
    assert "the columns named by 'day < current_date()' (its policy's `where`" in finding.message


def test_a_policy_mistake_many_models_inherit_is_one_finding_where_it_is_configured() -> None:
    """Two typos in dbt_project.yml's +meta, inherited by 50 models: two findings (not 100), each
    naming where the typo is, how many models inherit it and the key meant."""
    inherited = {"compactoin": {"min_input_files": 2}, "expire_snapshots": {"retain_lst": 3}}
    config = {"proj": {"staging": {"+meta": {"iceberg_maint": inherited}}}}

    def staged(name: str, meta: Any, path: str) -> dict[str, Any]:
        return {**node(name, meta=meta, materialized="table"), "fqn": ["proj", *path.split("/")[1:-1], name],
                "original_file_path": path, "patch_path": "proj://models/schema.yml"}

    nodes = [staged(f"m{i:02}", inherited, f"models/staging/m{i:02}.sql") for i in range(50)]
    nodes.append(staged("own", inherited, "models/staging/own.sql"))  # the same typos, in its own config()
    nodes[-1]["config"]["meta"]["iceberg_maint"] = {**inherited, "zz": 1}
    nodes.append(staged("fixed", {"compaction": {"min_input_files": 2}}, "models/staging/fixed.sql"))
    result = lint_manifest(manifest(*nodes), models_config=config)
    errors = [f for f in result.findings if f.rule == "invalid_policy"]
    where = "configured in dbt_project.yml `models: proj: staging: +meta: iceberg_maint`, inherited by 50 Iceberg " \
            "models (m00, m01, m02 and 47 more)"
    assert [(f.node, f.message.split("; allowed keys")[0], where in f.message) for f in errors] == [
        ("model.proj.m00", "meta.iceberg_maint has unknown key `compactoin` (did you mean `compaction`?)", True),
        ("model.proj.m00", "meta.iceberg_maint.expire_snapshots has unknown key `retain_lst` (did you mean "
                           "`retain_last`?)", True),
        ("model.proj.own", "meta.iceberg_maint has unknown key `compactoin` (did you mean `compaction`?)", False),
        ("model.proj.own", "meta.iceberg_maint.expire_snapshots has unknown key `retain_lst` (did you mean "
                           "`retain_last`?)", False),
        ("model.proj.own", "meta.iceberg_maint has unknown key `zz`", False)], errors
    assert "configured in the model's own config (models/staging/own.sql or models/schema.yml)" in errors[2].message
    # An inherited lint_ignore silences the mistake for every model inheriting it, one by one.
    ignoring = {**inherited, "lint_ignore": {"invalid_policy": "being fixed"}}
    config["proj"]["staging"]["+meta"]["iceberg_maint"] = ignoring
    for staged_node in nodes[:3]:
        staged_node["config"]["meta"]["iceberg_maint"] = ignoring
    result = lint_manifest(manifest(*nodes[:3]), models_config=config)
    assert (result.findings, len(result.silenced)) == ((), 6)


# --- orphan_window_too_short ---------------------------------------------------------------

def test_orphan_window_below_24_hours_is_the_macros_policy_error() -> None:
    [finding] = findings(node("events", meta={**COLD, "remove_orphan_files": {"older_than_hours": 12}}, **GOOD_MERGE))
    assert (finding.rule, finding.severity) == ("invalid_policy", "error")
    assert finding.message.startswith("remove_orphan_files: argument `older_than_hours` is 12; it must be at least 24")
    assert findings(node("events", meta={**COLD, "remove_orphan_files": {"older_than_hours": 24}}, **GOOD_MERGE)) == []
    # The macros check every section's values, a disabled one's too.
    [disabled] = findings(node("events", meta={**COLD, "remove_orphan_files": {"older_than_hours": 12,
                                                                                "enabled": False}}, **GOOD_MERGE))
    assert disabled.rule == "invalid_policy"


def test_orphan_window_must_exceed_the_longest_observed_write_of_the_table() -> None:
    events = node("events", meta={**COLD, "remove_orphan_files": {"older_than_hours": 30}}, **GOOD_MERGE)
    backfill = node("events_backfill", meta=COLD, **GOOD_MERGE)
    backfill["alias"] = "events"  # another model writing the same table
    durations = run_durations([{"results": [{"unique_id": "model.proj.events", "execution_time": 3600.0}]},
                               {"results": [{"unique_id": "model.proj.events_backfill", "execution_time": 18 * 3600.0},
                                            {"unique_id": "model.proj.events", "execution_time": 60.0}]}])
    assert durations == {"model.proj.events": 3600.0, "model.proj.events_backfill": 18 * 3600.0}
    [finding] = findings(events, backfill, durations=durations)
    assert (finding.rule, finding.node) == ("orphan_window_too_short", "model.proj.events")
    assert "events_backfill ran 18.0 h" in finding.message
    assert finding.suggestion.startswith("meta.iceberg_maint.remove_orphan_files.older_than_hours: 36 ")
    assert findings(events, backfill, durations={"model.proj.events_backfill": 15 * 3600.0}) == []


def test_run_results_without_results_are_a_usage_error() -> None:
    with pytest.raises(UsageError, match="has no `results` list"):
        run_durations([{"nodes": {}}])


# --- properties_never_reconciled -----------------------------------------------------------

@pytest.mark.parametrize("declared", [{"isolation_level": "snapshot"}, {"commit_retry": {"num_retries": 5}},
                                      {"properties": {"write.target-file-size-bytes": "1"}}])
def test_declared_properties_without_apply_table_properties_fire(declared: dict[str, Any]) -> None:
    [finding] = findings(node("events", meta={**COLD, **declared}, **GOOD_MERGE))
    assert (finding.rule, finding.severity) == ("properties_never_reconciled", "warning")
    assert finding.message.startswith(f"declares {next(iter(declared))} under meta.iceberg_maint")


@pytest.mark.parametrize(
    ("post_hook", "project_hooks"),
    [
        ("{{ dbt_iceberg_maint.apply_table_properties() }}", ()),
        ("{% if var('reconcile', true) %}{{ dbt_iceberg_maint.apply_table_properties(this) }}{% endif %}", ()),
        (None, ("{% for m in graph.nodes.values() %}{% do dbt_iceberg_maint.apply_table_properties(m.name) %}"
                "{% endfor %}",)),
    ],
)
def test_a_reconciling_hook_of_the_model_or_project_satisfies_the_rule(
    post_hook: str | None, project_hooks: tuple[str, ...]
) -> None:
    model = node("events", meta={**COLD, "isolation_level": "snapshot"}, post_hook=post_hook, **GOOD_MERGE)
    assert findings(model, hooks=project_hooks) == []


def test_maintain_does_not_count_as_reconciling_properties() -> None:
    model = node("events", meta={**COLD, "commit_retry": {"num_retries": 5}},
                 post_hook="{{ dbt_iceberg_maint.maintain() }}", **GOOD_MERGE)
    assert rules_of(findings(model)) == [("properties_never_reconciled", "warning", "events")]


# --- silencing, JSON, text -----------------------------------------------------------------

def test_lint_ignore_silences_one_rule_per_model_with_its_reason() -> None:
    meta = {"lint_ignore": {"compaction_not_cold_scoped": "compacted by a job that pauses the writers"}}
    result = lint_manifest(manifest(node("events", meta=meta, **{**GOOD_MERGE, "unique_key": None}),
                                    node("other", **GOOD_MERGE)))
    assert rules_of(list(result.findings)) == [("merge_without_unique_key", "warning", "events"),
                                               ("compaction_not_cold_scoped", "warning", "other")]
    [silenced] = result.silenced
    assert (silenced.finding.rule, silenced.finding.node) == ("compaction_not_cold_scoped", "model.proj.events")
    assert silenced.reason == "compacted by a job that pauses the writers"
    assert render_text(result).endswith("2 model(s) checked: 0 errors, 2 warnings, 0 infos; 1 silenced by "
                                        "meta.iceberg_maint.lint_ignore")


@pytest.mark.parametrize(
    ("ignore", "message"),
    [
        (["compaction_not_cold_scoped"], "meta.iceberg_maint.lint_ignore of model.proj.events is "
                                         "['compaction_not_cold_scoped']; expected a mapping of rule name to reason"),
        ({"compaction_cold": "x"}, "meta.iceberg_maint.lint_ignore of model.proj.events names unknown rule "
                                   "'compaction_cold'; allowed: compaction_not_cold_scoped, invalid_policy, "
                                   "invalid_where, "),
        ({"invalid_where": " "}, "meta.iceberg_maint.lint_ignore of model.proj.events: rule 'invalid_where' has "
                                 "reason ' '; expected a non-empty text saying why"),
    ],
)
def test_an_invalid_lint_ignore_is_a_usage_error_naming_it(ignore: Any, message: str) -> None:
    with pytest.raises(UsageError) as raised:
        lint_manifest(manifest(node("events", meta={"lint_ignore": ignore}, **GOOD_MERGE)))
    assert str(raised.value).startswith(message)


def test_json_is_a_list_of_findings_with_the_contract_keys() -> None:
    result = lint_manifest(manifest(node("events", meta={"remove_orphan_files": {"older_than_hours": 1}},
                                         **{**GOOD_MERGE, "unique_key": None})))
    document = json.loads(result.to_json())
    assert [set(item) for item in document] == [{"rule", "severity", "node", "message", "suggestion"}] * 3
    assert [(d["rule"], d["severity"]) for d in document] == [
        ("invalid_policy", "error"), ("merge_without_unique_key", "warning"),
        ("compaction_not_cold_scoped", "warning")]
    assert {d["node"] for d in document} == {"model.proj.events"}
    assert result.exit_code == 1
    assert set(RULES) >= {d["rule"] for d in document}


def test_text_groups_findings_by_model_with_their_fix() -> None:
    result = lint_manifest(manifest(node("b", **GOOD_MERGE), node("a", **{**GOOD_MERGE, "unique_key": None})))
    lines = render_text(result).splitlines()
    assert lines[0] == "model.proj.a"
    assert lines[1].startswith("  warning compaction_not_cold_scoped: ")
    assert lines[2].startswith("          fix: meta.iceberg_maint.compaction.cold_partitions_hours: 6")
    assert lines[3].startswith("  warning merge_without_unique_key: ")
    assert lines[6] == "model.proj.b"
    assert lines[-1] == "2 model(s) checked: 0 errors, 3 warnings, 0 infos"


# --- the SQL readers -----------------------------------------------------------------------

def test_parse_predicate_accepts_boolean_functions_and_refuses_aliases() -> None:
    assert isinstance(parse_predicate("isnotnull(event_id)"), Predicate)
    assert isinstance(parse_predicate("not (a > 1)"), Predicate)
    problem = parse_predicate("foo bar")
    assert isinstance(problem, PredicateProblem) and "parses as Alias" in problem.problem


def test_partition_fields_name_their_source_column_and_transform() -> None:
    assert [(f.column, f.transform) for f in map(partition_field, [
        "event_date", "days(event_ts)", "hours(ts)", "bucket(16, user_id)", "truncate(4, name)", "years(ts)", "(("])
    ] == [("event_date", "identity"), ("event_ts", "days"), ("ts", "hours"), ("user_id", "bucket"),
          ("name", "truncate"), ("ts", "years"), (None, "unknown")]


def test_model_projection_reads_the_first_build_and_gives_up_on_the_unknown() -> None:
    projection = model_projection(EVENTS_SQL)
    assert projection is not None
    assert projection.names == ("event_id", "user_id", "event_ts", "event_date", "amount")
    assert projection.types == {"event_date": "date"}
    assert isinstance(model_projection("select {{ dbt_utils.star(ref('x')) }} from {{ ref('x') }}"), Unreadable)
    assert isinstance(model_projection("select a.* from {{ ref('x') }} a"), Unreadable)
    assert isinstance(model_projection("select count(*) from t"), Projection)


def test_a_source_that_declares_an_invalid_policy_is_an_error_finding() -> None:
    """iceberg_maintenance maintains the source tables that declare meta.iceberg_maint and refuses
    to start on an invalid policy: the lint says so before the nightly job fails. A valid one, or a
    source that declares none, gives nothing; lint_ignore works as for a model."""
    def source(name: str, policy: Any) -> dict[str, Any]:
        return {"unique_id": f"source.proj.raw.{name}", "resource_type": "source", "source_name": "raw",
                "name": name, "schema": "landing", "meta": {} if policy is None else {"iceberg_maint": policy},
                "config": {"enabled": True}}

    document = manifest()
    document["sources"] = {s["unique_id"]: s for s in (
        source("events", {"compaction": {"min_input_files": 0}}),
        source("users", {"compaction": {"min_input_files": 2}}), source("plain", None),
        source("muted", {"compactoin": {}, "lint_ignore": {"invalid_policy": "fixed upstream next week"}}))}
    result = lint_manifest(document)
    assert [(f.rule, f.severity, f.node, f.message.split(";")[0]) for f in result.findings] == [
        ("invalid_policy", "error", "source.proj.raw.events",
         "policy compaction: argument `min_input_files` is 0")]
    assert "iceberg_maintenance maintains this source" in result.findings[0].message
    assert [s.finding.node for s in result.silenced] == ["source.proj.raw.muted"]
