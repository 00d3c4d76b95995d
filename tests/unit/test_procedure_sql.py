"""SQL text and validation messages of the procedure macros, rendered by dbt without Spark.

One `dbt run-operation` of the harness macro renders every case (rendering never starts a
SparkSession: dbt-spark's session connection opens one only on the first query).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from dbt_iceberg_maint.errors import UsageError
from dbt_iceberg_maint.policy.engine import unchanged_since
from dbt_iceberg_maint.policy.selection import Shard, shard_of
from dbt_iceberg_maint.runtime.invoke import DbtInvocation, invoke_dbt
from tests.expect import markers

ENV = {"DBT_ICEBERG_MAINT_SCHEMA": "analytics"}
HEALTH = {
    "max_small_files_in_partition": 3,
    "delete_files": 0,
    "snapshots": 8,
    "oldest_snapshot_age_hours": 200.5,
    "data_manifests": 3,
}

# iceberg_maintenance's shards: 40 table names, and shards it must refuse (K > N, 0, N = 0, not K/N).
SHARD_TABLES = [f"Sales_{i}.orders_{i % 7}" for i in range(40)]
REFUSED_SHARDS: list[Any] = ["5/4", "0/4", "1/0", "a/b", "2 of 4", 4]

# Snapshot lineages (id, parent, operation) and whether snapshot `checked` is still what the table
# holds (`current` reached from it through snapshots that change no row).
LINEAGE = [[1, None, "append"], [2, 1, "replace"], [3, 2, "replace"], [4, 3, "overwrite"], [5, 2, "append"]]
UNCHANGED_CASES = [
    (1, 3, True),  # a compaction and a manifest rewrite since
    (3, 3, True),  # the current snapshot itself
    (1, 4, False),  # an overwrite since
    (3, 2, False),  # rolled back past it
    (2, 5, False),  # an append on another line of the lineage
    (9, 3, False),  # expired: not in the metadata any more
    (1, None, False),  # no current snapshot
]

CASES: list[dict[str, Any]] = [
    # --- SQL ---------------------------------------------------------------------------------
    {"id": "rdf_minimal", "procedure": "rewrite_data_files", "kwargs": {"relation": "analytics.events"}},
    {
        "id": "rdf_full",
        "procedure": "rewrite_data_files",
        "kwargs": {
            "relation": "analytics.events",
            "where": "event_date < '2026-01-01'",
            "strategy": "BINPACK",
            "options": {"partial-progress.enabled": True, "min-input-files": 2},
        },
    },
    {
        "id": "rdf_sort_only",
        "procedure": "rewrite_data_files",
        "kwargs": {"relation": "events", "sort_order": "id DESC NULLS LAST, ts"},
    },
    {
        "id": "rdf_zorder",
        "procedure": "rewrite_data_files",
        "kwargs": {"relation": "cat.analytics.events", "strategy": "sort", "sort_order": "zorder(user_id, event_ts)"},
    },
    {
        "id": "rdf_escape",
        "procedure": "rewrite_data_files",
        "kwargs": {"relation": "analytics.events", "where": "note = 'it\\'s' or path like 'a\\\\b'"},
    },
    {
        "id": "exp_full",
        "procedure": "expire_snapshots",
        "kwargs": {
            "relation": "analytics.events",
            "older_than_hours": 168,
            "retain_last": 5,
            "max_concurrent_deletes": 4,
            "stream_results": True,
            "snapshot_ids": [11, 12],
            "clean_expired_metadata": False,
        },
    },
    {"id": "exp_minimal", "procedure": "expire_snapshots", "kwargs": {"relation": "analytics.events"}},
    {"id": "rof_default", "procedure": "remove_orphan_files", "kwargs": {"relation": "analytics.events"}},
    {
        "id": "rof_full",
        "procedure": "remove_orphan_files",
        "kwargs": {
            "relation": "analytics.events",
            "older_than_hours": 24,
            "dry_run": True,
            # `location` and `file_list_view` are checked against the table (a query), so they are
            # rendered on real Spark: tests/integration/test_procedures.py.
            "max_concurrent_deletes": 8,
            "equal_schemes": {"s3a": "s3", "s3n": "s3"},
            "equal_authorities": {"a.example": "b.example"},
            "prefix_mismatch_mode": "ignore",
            "prefix_listing": True,
        },
    },
    {
        "id": "rm_full",
        "procedure": "rewrite_manifests",
        "kwargs": {"relation": "analytics.events", "use_caching": True, "spec_id": 0},
    },
    {
        "id": "rpd_full",
        "procedure": "rewrite_position_delete_files",
        "kwargs": {"relation": "analytics.events", "where": "d = 1", "options": {"rewrite-all": "true"}},
    },
    # --- validation messages -----------------------------------------------------------------
    {
        "id": "v_rdf",
        "kind": "errors",
        "procedure": "rewrite_data_files",
        "kwargs": {"where": "a = 1; drop table t", "strategy": "fast", "options": ["x"]},
    },
    {
        "id": "v_rdf_comment",
        "kind": "errors",
        "procedure": "rewrite_data_files",
        "kwargs": {"where": "a = 1 /* all */"},
    },
    {
        "id": "v_rdf_sort_binpack",
        "kind": "errors",
        "procedure": "rewrite_data_files",
        "kwargs": {"strategy": "binpack", "sort_order": "id"},
    },
    {
        "id": "v_rdf_bad_sort",
        "kind": "errors",
        "procedure": "rewrite_data_files",
        "kwargs": {"sort_order": "id, zorder(a, b)"},
    },
    {
        "id": "v_exp",
        "kind": "errors",
        "procedure": "expire_snapshots",
        "kwargs": {
            "older_than_hours": -1,
            "retain_last": 0,
            "max_concurrent_deletes": -1,
            "stream_results": "yes",
            "snapshot_ids": [],
        },
    },
    {
        "id": "v_exp_cutoffs",
        "kind": "errors",
        "procedure": "expire_snapshots",
        "kwargs": {"older_than_hours": 0, "older_than": "2026-01-02 03:04:05"},
    },
    {
        "id": "v_exp_older_than",
        "kind": "errors",
        "procedure": "expire_snapshots",
        "kwargs": {"older_than": "yesterday"},
    },
    {
        "id": "v_exp_older_than_zone",
        "kind": "errors",
        "procedure": "expire_snapshots",
        "kwargs": {"older_than": "2026-01-02T03:04:05+02:00"},
    },
    {"id": "v_exp_hours_text", "kind": "errors", "procedure": "expire_snapshots", "kwargs": {"older_than_hours": "24"}},
    {
        "id": "v_exp_now",
        "kind": "errors",
        "procedure": "expire_snapshots",
        "kwargs": {"older_than_hours": 0, "retain_last": 1},
    },
    {
        "id": "exp_now",
        "procedure": "expire_snapshots",
        "kwargs": {"relation": "analytics.events", "older_than_hours": 0, "retain_last": 3},
    },
    {
        "id": "exp_fraction",
        "procedure": "expire_snapshots",
        "kwargs": {"relation": "analytics.events", "older_than_hours": 0.25},
    },
    {
        "id": "exp_absolute",
        "procedure": "expire_snapshots",
        "kwargs": {"relation": "analytics.events", "older_than": "2026-01-02T03:04:05.5Z"},
    },
    {
        "id": "v_rof",
        "kind": "errors",
        "procedure": "remove_orphan_files",
        "kwargs": {
            "older_than_hours": 23,
            "prefix_mismatch_mode": "NONE",
            "file_list_view": "x; drop",
            "equal_schemes": "s3",
        },
    },
    {"id": "v_rof_negative", "kind": "errors", "procedure": "remove_orphan_files", "kwargs": {"older_than_hours": -5}},
    # Ages no timestamp can be computed from (found by the fuzzer: Python's datetime overflowed).
    {"id": "v_rof_huge", "kind": "errors", "procedure": "remove_orphan_files", "kwargs": {"older_than_hours": 2**63}},
    # Found by the fuzzer: the location check compared the stripped path, Iceberg listed the given one.
    {"id": "v_rof_newline", "kind": "errors", "procedure": "remove_orphan_files",
     "kwargs": {"location": "/wh/analytics/events/data\n"}},
    {"id": "v_exp_huge", "kind": "errors", "procedure": "expire_snapshots", "kwargs": {"older_than_hours": 876001}},
    {"id": "v_rm", "kind": "errors", "procedure": "rewrite_manifests", "kwargs": {"use_caching": 1, "spec_id": -1}},
    {
        "id": "v_rpd",
        "kind": "errors",
        "procedure": "rewrite_position_delete_files",
        "kwargs": {"where": "x -- y", "options": {"k": ["v"]}},
    },
    {
        "id": "v_rdf_sort_shape",
        "kind": "errors",
        "procedure": "rewrite_data_files",
        "kwargs": {"sort_order": "id sideways"},
    },
    {
        "id": "v_rdf_sort_separator",
        "kind": "errors",
        "procedure": "rewrite_data_files",
        "kwargs": {"sort_order": "id; drop"},
    },
    {"id": "v_rdf_empty_where", "kind": "errors", "procedure": "rewrite_data_files", "kwargs": {"where": "  "}},
    {"id": "v_rdf_where_not_text", "kind": "errors", "procedure": "rewrite_data_files", "kwargs": {"where": 5}},
    {
        "id": "v_exp_types",
        "kind": "errors",
        "procedure": "expire_snapshots",
        "kwargs": {"retain_last": 2.5, "snapshot_ids": ["a", 7], "clean_expired_metadata": "yes"},
    },
    {
        "id": "v_rof_more",
        "kind": "errors",
        "procedure": "remove_orphan_files",
        "kwargs": {
            "location": "",
            "prefix_listing": "yes",
            "dry_run": "no",
            "max_concurrent_deletes": 0,
            "equal_authorities": "x",
        },
    },
    {
        "id": "v_policy_typos",
        "kind": "policy_errors",
        "kwargs": {
            "policy": {
                "compaction": {"min_input_file": 2},
                "expire_snapshot": {"retain_last": 3},
                "remove_orphan_files": 72,
                "enabled": "no",
                "rewrite_manifests": {"enabled": "sometimes"},
            }
        },
    },
    {
        "id": "v_policy_numbers",
        "kind": "policy_errors",
        "kwargs": {
            "policy": {
                "compaction": {
                    "min_input_files": 0,
                    "target_file_size_mb": -1,
                    "cold_partitions_hours": 0,
                    "max_failed_commits": -1,
                    "partial_progress": "yes",
                },
                "rewrite_position_delete_files": {"min_input_files": 1.5},
                "rewrite_manifests": {"min_manifests": 0},
            }
        },
    },
    {"id": "v_policy_not_a_mapping", "kind": "policy_errors", "kwargs": {"policy": ["compaction"]}},
    {"id": "v_policy_false", "kind": "policy_errors", "kwargs": {"policy": False}},
    {"id": "policy_false", "kind": "policy", "kwargs": {"policy": False, "overrides": {"rewrite_manifests": False}}},
    {
        "id": "v_policy_ok",
        "kind": "policy_errors",
        "kwargs": {
            "policy": {
                "idempotent": True,
                "isolation_level": "snapshot",
                "commit_retry": {"num_retries": 10},
                "properties": {"write.target-file-size-bytes": "268435456"},
                "compaction": {
                    "cold_partitions_hours": 6,
                    "min_input_files": 5,
                    "target_file_size_mb": 256,
                    "strategy": "binpack",
                    "partial_progress": True,
                    "where": None,
                    "options": {},
                },
                "expire_snapshots": {"older_than_hours": 168, "retain_last": 5},
                "remove_orphan_files": {"older_than_hours": 72},
                "rewrite_manifests": {"min_manifests": 5},
                "rewrite_position_delete_files": False,
                "lint_ignore": {"compaction_not_cold_scoped": "compacted only while no writer runs"},
            }
        },
    },
    {
        "id": "v_ok",
        "kind": "errors",
        "procedure": "expire_snapshots",
        "kwargs": {"older_than_hours": 0.5, "retain_last": 1},
    },
    # --- names, policy, decisions ------------------------------------------------------------
    {"id": "names_2", "kind": "names", "kwargs": {"relation": "analytics.events"}},
    {"id": "names_1", "kind": "names", "kwargs": {"relation": "events"}},
    {"id": "names_3", "kind": "names", "kwargs": {"relation": "glue.analytics.events"}},
    {"id": "due_compaction", "kind": "due", "kwargs": {"operation": "rewrite_data_files", "health": HEALTH}},
    {
        "id": "due_compaction_low",
        "kind": "due",
        "kwargs": {
            "operation": "rewrite_data_files",
            "health": HEALTH,
            "policy": {"compaction": {"min_input_files": 3}},
        },
    },
    {
        "id": "due_compaction_cold",
        "kind": "due",
        "kwargs": {
            "operation": "rewrite_data_files",
            "health": {
                **HEALTH,
                "max_small_files_in_partition": 9,
                "cold_scope": {"where": "d = 1", "max_small_files": 5},
            },
        },
    },
    {
        "id": "due_compaction_only_hot",
        "kind": "due",
        "kwargs": {
            "operation": "rewrite_data_files",
            "health": {
                **HEALTH,
                "max_small_files_in_partition": 9,
                "cold_scope": {"where": "d = 1", "max_small_files": 1},
            },
        },
    },
    {
        "id": "due_compaction_nothing_cold",
        "kind": "due",
        "kwargs": {
            "operation": "rewrite_data_files",
            "policy": {"compaction": {"cold_partitions_hours": 6}},
            "health": {**HEALTH, "cold_scope": {"where": None, "max_small_files": 0}},
        },
    },
    {"id": "due_expire", "kind": "due", "kwargs": {"operation": "expire_snapshots", "health": HEALTH}},
    {
        "id": "due_expire_few",
        "kind": "due",
        "kwargs": {
            "operation": "expire_snapshots",
            "health": HEALTH,
            "policy": {"expire_snapshots": {"retain_last": 8}},
        },
    },
    {
        "id": "due_expire_young",
        "kind": "due",
        "kwargs": {
            "operation": "expire_snapshots",
            "health": HEALTH,
            "policy": {"expire_snapshots": {"older_than_hours": 300}},
        },
    },
    {
        "id": "due_expire_now",
        "kind": "due",
        "kwargs": {
            "operation": "expire_snapshots",
            "health": {**HEALTH, "oldest_snapshot_age_hours": 0.01},
            "policy": {"expire_snapshots": {"older_than_hours": 0}},
        },
    },
    {
        "id": "due_expire_now_after_rewrite",
        "kind": "due",
        "kwargs": {
            "operation": "expire_snapshots",
            "health": {**HEALTH, "rewrites_planned": ["rewrite_data_files"]},
            "policy": {"expire_snapshots": {"older_than_hours": 0, "retain_last": 8}},
        },
    },
    {
        "id": "due_expire_after_rewrite_with_age",
        "kind": "due",
        "kwargs": {
            "operation": "expire_snapshots",
            "health": {**HEALTH, "rewrites_planned": ["rewrite_data_files"]},
            "policy": {"expire_snapshots": {"retain_last": 8}},
        },
    },
    {
        "id": "due_expire_absolute",
        "kind": "due",
        "kwargs": {
            "operation": "expire_snapshots",
            "health": {**HEALTH, "hours_since_older_than": 100},
            "policy": {"expire_snapshots": {"older_than": "2026-01-01 00:00:00"}},
        },
    },
    {
        "id": "due_expire_absolute_young",
        "kind": "due",
        "kwargs": {
            "operation": "expire_snapshots",
            "health": {**HEALTH, "hours_since_older_than": 300},
            "policy": {"expire_snapshots": {"older_than": "2026-01-01 00:00:00"}},
        },
    },
    {
        "id": "v_policy_expire_cutoffs",
        "kind": "policy_errors",
        "kwargs": {"policy": {"expire_snapshots": {"older_than_hours": -2}}},
    },
    {
        "id": "v_policy_expire_absolute",
        "kind": "policy_errors",
        "kwargs": {"policy": {"expire_snapshots": {"older_than": "2026-01-01"}}},
    },
    {"id": "due_manifests", "kind": "due", "kwargs": {"operation": "rewrite_manifests", "health": HEALTH}},
    {"id": "due_orphans", "kind": "due", "kwargs": {"operation": "remove_orphan_files", "health": HEALTH}},
    {"id": "due_deletes", "kind": "due", "kwargs": {"operation": "rewrite_position_delete_files", "health": HEALTH}},
    {
        "id": "policy",
        "kind": "policy",
        "kwargs": {
            "policy": {"compaction": {"min_input_files": 2}, "remove_orphan_files": False},
            "overrides": {"expire_snapshots": {"retain_last": 9}},
        },
    },
    {
        "id": "planned_procedure_arguments",
        "kind": "planned",
        "kwargs": {
            "relation": "analytics.events",
            "operation": "remove_orphan_files",
            "policy": {
                "remove_orphan_files": {
                    "older_than_hours": 96,
                    "equal_schemes": {"s3a": "s3"},
                    "prefix_mismatch_mode": "IGNORE",
                }
            },
        },
    },
    {
        "id": "planned_expire_arguments",
        "kind": "planned",
        "kwargs": {
            "relation": "analytics.events",
            "operation": "expire_snapshots",
            "policy": {"expire_snapshots": {"clean_expired_metadata": True, "stream_results": True}},
        },
    },
    {
        "id": "planned_manifests_arguments",
        "kind": "planned",
        "kwargs": {
            "relation": "analytics.events",
            "operation": "rewrite_manifests",
            "policy": {"rewrite_manifests": {"use_caching": False}},
        },
    },
    {
        "id": "v_policy_procedure_arguments",
        "kind": "policy_errors",
        "kwargs": {
            "policy": {
                "remove_orphan_files": {"prefix_mismatch_mode": "skip"},
                "expire_snapshots": {"stream_results": "yes"},
                "rewrite_manifests": {"use_caching": 1},
            }
        },
    },
    {"id": "options_default", "kind": "compaction_options"},
    {"id": "options_small_table", "kind": "compaction_options", "kwargs": {"table_bytes": 1024}},
    {
        "id": "options_explicit",
        "kind": "compaction_options",
        "kwargs": {"policy": {"compaction": {"options": {"max-concurrent-file-group-rewrites": "4"}}}},
    },
    {
        "id": "options_no_partial_progress",
        "kind": "compaction_options",
        "kwargs": {"table_bytes": 2**40, "policy": {"compaction": {"partial_progress": False}}},
    },
    {
        "id": "options_custom",
        "kind": "compaction_options",
        "kwargs": {
            "policy": {
                "compaction": {
                    "target_file_size_mb": 256,
                    "partial_progress": False,
                    "options": {"min-input-files": "9"},
                }
            }
        },
    },
    {"id": "select_all", "kind": "selection"},
    {"id": "select_tag", "kind": "selection", "kwargs": {"select": "tag:maintained"}},
    {"id": "select_mixed", "kind": "selection", "kwargs": {"select": ["user_summary", "tag:maintained", "events"]}},
    {"id": "select_source_table", "kind": "selection", "kwargs": {"select": ["source:landing.raw_events", "events"]}},
    *({"id": f"unchanged_since_{i}", "kind": "unchanged_since",
       "kwargs": {"checked": checked, "current": current, "lineage": LINEAGE}}
      for i, (checked, current, _) in enumerate(UNCHANGED_CASES)),
    {"id": "shard_of_tables", "kind": "shard", "kwargs": {"shard": " 2 / 4 ", "n": 4, "tables": SHARD_TABLES}},
    *({"id": f"shard_refused_{i}", "kind": "shard", "kwargs": {"shard": shard, "n": 1}}
      for i, shard in enumerate(REFUSED_SHARDS)),
    {"id": "context", "kind": "context"},
]


def render(args: list[str], target: Path) -> DbtInvocation:
    return invoke_dbt([*args, "--target-path", str(target)], env=ENV)


@pytest.fixture(scope="module")
def target(render_target: Path) -> Path:
    return render_target


@pytest.fixture(scope="module")
def rendered(target: Path) -> dict[str, dict[str, Any]]:
    started = datetime.now(timezone.utc)
    invocation = render(["run-operation", "iceberg_maint_render_cases", "--args", json.dumps({"cases": CASES})], target)
    assert invocation.success, invocation.exception
    outcomes = markers(invocation.log_messages, "ICEBERG_MAINT_CASE")
    by_id = {outcome["id"]: outcome for outcome in outcomes}
    by_id["_started"] = {"value": started}
    return by_id


def sql(rendered: dict[str, dict[str, Any]], case: str) -> str:
    return rendered[case]["sql"]


def older_than(statement: str) -> datetime:
    match = re.search(r"older_than => TIMESTAMP '(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)Z'", statement)
    assert match, statement
    return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)


def test_rewrite_data_files_sql(rendered: dict[str, dict[str, Any]]) -> None:
    assert sql(rendered, "rdf_minimal") == "CALL system.rewrite_data_files(table => 'analytics.events')"
    assert sql(rendered, "rdf_full") == (
        "CALL system.rewrite_data_files(table => 'analytics.events', strategy => 'binpack', "
        "options => map('min-input-files', '2', 'partial-progress.enabled', 'true'), "
        "where => 'event_date < \\'2026-01-01\\'')"
    )
    # A sort order alone means strategy sort (Iceberg's rule), stated explicitly.
    assert sql(rendered, "rdf_sort_only") == (
        "CALL system.rewrite_data_files(table => 'analytics.events', strategy => 'sort', sort_order => 'id DESC NULLS LAST, ts')"
    )
    assert sql(rendered, "rdf_zorder") == (
        "CALL cat.system.rewrite_data_files(table => 'analytics.events', strategy => 'sort', sort_order => 'zorder(user_id, event_ts)')"
    )


def test_quotes_and_backslashes_are_escaped_spark_style(rendered: dict[str, dict[str, Any]]) -> None:
    # where = note = 'it\'s' or path like 'a\\b'  ->  every \ doubled, every ' preceded by \
    assert sql(rendered, "rdf_escape").endswith("where => 'note = \\'it\\\\\\'s\\' or path like \\'a\\\\\\\\b\\'')")
    # A location's quote: test_every_orphan_removal_path_keeps_the_location_and_age_rules (real table).


def test_expire_snapshots_sql(rendered: dict[str, dict[str, Any]]) -> None:
    statement = sql(rendered, "exp_full")
    cutoff = older_than(statement)
    expected = rendered["_started"]["value"] - timedelta(hours=168)
    assert abs((cutoff - expected).total_seconds()) < 120
    assert statement == (
        "CALL system.expire_snapshots(table => 'analytics.events', older_than => TIMESTAMP '"
        + cutoff.strftime("%Y-%m-%d %H:%M:%S")
        + "Z', retain_last => 5, max_concurrent_deletes => 4, stream_results => true, "
        "snapshot_ids => array(11L, 12L), clean_expired_metadata => false)"
    )
    assert sql(rendered, "exp_minimal") == "CALL system.expire_snapshots(table => 'analytics.events')"
    # older_than_hours 0 means now with no age limit: only retain_last bounds what expires, even
    # for snapshots committed after the SQL was rendered (a plan's step runs later).
    assert sql(rendered, "exp_now") == (
        "CALL system.expire_snapshots(table => 'analytics.events', older_than => TIMESTAMP '9999-12-31 23:59:59Z', "
        "retain_last => 3)"
    )
    quarter = older_than(sql(rendered, "exp_fraction"))
    assert abs((quarter - (rendered["_started"]["value"] - timedelta(minutes=15))).total_seconds()) < 120
    assert sql(rendered, "exp_absolute") == (
        "CALL system.expire_snapshots(table => 'analytics.events', older_than => TIMESTAMP '2026-01-02 03:04:05.500000Z')"
    )


def test_remove_orphan_files_sql(rendered: dict[str, dict[str, Any]]) -> None:
    default = sql(rendered, "rof_default")
    cutoff = older_than(default)
    assert abs((cutoff - (rendered["_started"]["value"] - timedelta(hours=72))).total_seconds()) < 120
    assert default == (
        "CALL system.remove_orphan_files(table => 'analytics.events', older_than => TIMESTAMP '"
        + cutoff.strftime("%Y-%m-%d %H:%M:%S")
        + "Z')"
    )
    full = sql(rendered, "rof_full")
    assert full.endswith(
        "dry_run => true, max_concurrent_deletes => 8, "
        "equal_schemes => map('s3a', 's3', 's3n', 's3'), "
        "equal_authorities => map('a.example', 'b.example'), prefix_mismatch_mode => 'IGNORE', prefix_listing => true)"
    )


def test_rewrite_manifests_and_position_deletes_sql(rendered: dict[str, dict[str, Any]]) -> None:
    assert (
        sql(rendered, "rm_full")
        == "CALL system.rewrite_manifests(table => 'analytics.events', use_caching => true, spec_id => 0)"
    )
    assert sql(rendered, "rpd_full") == (
        "CALL system.rewrite_position_delete_files(table => 'analytics.events', options => map('rewrite-all', 'true'), where => 'd = 1')"
    )


@pytest.mark.parametrize(
    ("case", "messages"),
    [
        (
            "v_rdf",
            [
                "rewrite_data_files: argument `where` is \"a = 1; drop table t\"; it must not contain ';' (a statement separator: only one predicate/expression is allowed)",
                "rewrite_data_files: argument `strategy` is 'fast'; allowed values: binpack, sort",
                "rewrite_data_files: argument `options` is ['x']; expected a mapping of string keys to string values, e.g. {'key': 'value'}",
            ],
        ),
        (
            "v_rdf_comment",
            [
                'rewrite_data_files: argument `where` is "a = 1 /* all */"; it must not contain a SQL comment (--, /* or */)'
            ],
        ),
        (
            "v_rdf_sort_binpack",
            [
                "rewrite_data_files: argument `sort_order` is 'id' but `strategy` is 'binpack'; a sort order needs strategy 'sort' (or no strategy, which means sort)"
            ],
        ),
        (
            "v_rdf_bad_sort",
            [
                "rewrite_data_files: argument `sort_order` is 'id, zorder(a, b)'; a z-order must be exactly 'zorder(col1, col2, ...)' and cannot be mixed with other sort columns"
            ],
        ),
        (
            "v_exp",
            [
                "expire_snapshots: argument `older_than_hours` is -1; it must be 0 or more (0 means now: every snapshot but the newest retain_last)",
                "expire_snapshots: argument `retain_last` is 0; it must be a whole number of at least 1 (Iceberg always keeps the current snapshot)",
                "expire_snapshots: argument `max_concurrent_deletes` is -1; it must be greater than 0",
                "expire_snapshots: argument `stream_results` is yes; expected true or false",
                "expire_snapshots: argument `snapshot_ids` is []; expected a non-empty list of snapshot ids",
            ],
        ),
        (
            "v_rof",
            [
                "remove_orphan_files: argument `older_than_hours` is 23; it must be at least 24: removing files younger than a day can delete the files of a write still in progress and corrupt the table",
                "remove_orphan_files: argument `prefix_mismatch_mode` is 'NONE'; allowed values: ERROR, IGNORE, DELETE",
                "remove_orphan_files: argument `equal_schemes` is s3; expected a mapping of string keys to string values, e.g. {'key': 'value'}",
                "remove_orphan_files: argument `file_list_view` is 'x; drop'; expected a view name (letters, digits, underscores, dots) with columns file_path string and last_modified timestamp",
            ],
        ),
        ("v_rof_negative", ["remove_orphan_files: argument `older_than_hours` is -5; it must be greater than 0"]),
        ("v_rof_huge", [f"remove_orphan_files: argument `older_than_hours` is {2**63}; it must be at most 876000 "
                        "(100 years)"]),
        ("v_rof_newline", ['remove_orphan_files: argument `location` is "/wh/analytics/events/data\\n"; expected a '
                           "path or URI without surrounding whitespace or line breaks"]),
        ("v_exp_huge", ["expire_snapshots: argument `older_than_hours` is 876001; it must be at most 876000 "
                        "(100 years)"]),
        (
            "v_rm",
            [
                "rewrite_manifests: argument `use_caching` is 1; expected true or false",
                "rewrite_manifests: argument `spec_id` is -1; expected a partition spec id, a whole number >= 0",
            ],
        ),
        (
            "v_rpd",
            [
                'rewrite_position_delete_files: argument `where` is "x -- y"; it must not contain a SQL comment (--, /* or */)',
                "rewrite_position_delete_files: argument `options` has entry k: ['v']; keys must be non-empty strings and values strings, numbers or booleans",
            ],
        ),
        ("v_ok", []),
        ("v_exp_now", []),
        (
            "v_exp_cutoffs",
            [
                "expire_snapshots: arguments `older_than` (2026-01-02 03:04:05) and `older_than_hours` (0) are both given; give one cut-off"
            ],
        ),
        (
            "v_exp_older_than",
            [
                "expire_snapshots: argument `older_than` is \"yesterday\"; expected a UTC time 'YYYY-MM-DD HH:MM:SS[.ffffff]' (or ISO 8601 with T and an optional Z)"
            ],
        ),
        (
            "v_exp_older_than_zone",
            [
                "expire_snapshots: argument `older_than` is \"2026-01-02T03:04:05+02:00\"; expected a UTC time 'YYYY-MM-DD HH:MM:SS[.ffffff]' (or ISO 8601 with T and an optional Z)"
            ],
        ),
        (
            "v_exp_hours_text",
            [
                "expire_snapshots: argument `older_than_hours` is 24; expected a number of hours >= 0 (0 means now: every snapshot but the newest retain_last)"
            ],
        ),
        (
            "v_rdf_sort_shape",
            [
                "rewrite_data_files: argument `sort_order` is 'id sideways'; expected 'col [ASC|DESC] [NULLS FIRST|LAST], ...' or 'zorder(col1, col2, ...)'"
            ],
        ),
        (
            "v_rdf_sort_separator",
            [
                "rewrite_data_files: argument `sort_order` is \"id; drop\"; it must not contain ';' (a statement separator: only one predicate/expression is allowed)"
            ],
        ),
        ("v_rdf_empty_where", ["rewrite_data_files: argument `where` is '  '; expected a non-empty SQL string"]),
        ("v_rdf_where_not_text", ["rewrite_data_files: argument `where` is '5'; expected a non-empty SQL string"]),
        (
            "v_exp_types",
            [
                "expire_snapshots: argument `retain_last` is 2.5; it must be a whole number of at least 1 (Iceberg always keeps the current snapshot)",
                "expire_snapshots: argument `clean_expired_metadata` is yes; expected true or false",
                "expire_snapshots: argument `snapshot_ids` contains a; snapshot ids are whole numbers",
            ],
        ),
        (
            "v_rof_more",
            [
                "remove_orphan_files: argument `dry_run` is no; expected true or false",
                "remove_orphan_files: argument `prefix_listing` is yes; expected true or false",
                "remove_orphan_files: argument `max_concurrent_deletes` is 0; it must be greater than 0",
                "remove_orphan_files: argument `equal_authorities` is x; expected a mapping of string keys to string values, e.g. {'key': 'value'}",
                "remove_orphan_files: argument `location` is ''; expected a non-empty path or URI",
            ],
        ),
        (
            "v_policy_typos",
            [
                "meta.iceberg_maint.compaction has unknown key `min_input_file` (did you mean `min_input_files`?); allowed keys: enabled, min_input_files, "
                "target_file_size_mb, strategy, sort_order, partial_progress, partial_progress_above_mb, max_failed_commits, "
                "cold_partitions_hours, where, options, interval_hours",
                "meta.iceberg_maint has unknown key `expire_snapshot` (did you mean `expire_snapshots`?); allowed keys: enabled, "
                "compaction, rewrite_position_delete_files, "
                "expire_snapshots, remove_orphan_files, rewrite_manifests, compute_table_stats, compute_partition_stats, cost_gate, idempotent, isolation_level, commit_retry, properties, "
                "lint_ignore",
                "meta.iceberg_maint.remove_orphan_files is 72; expected a mapping of settings or true/false",
                "meta.iceberg_maint: argument `enabled` is no; expected true or false",
                "meta.iceberg_maint.rewrite_manifests: argument `enabled` is sometimes; expected true or false",
            ],
        ),
        (
            "v_policy_numbers",
            [
                "policy compaction: argument `min_input_files` is 0; it must be greater than 0",
                "policy compaction: argument `target_file_size_mb` is -1; it must be greater than 0",
                "policy compaction: argument `cold_partitions_hours` is 0; it must be greater than 0",
                "policy compaction: argument `max_failed_commits` is -1; expected a whole number >= 0",
                "policy compaction: argument `partial_progress` is yes; expected true, false or auto",
                "policy rewrite_position_delete_files: argument `min_input_files` is 1.5; expected a whole number greater than 0",
                "policy rewrite_manifests: argument `min_manifests` is 0; it must be greater than 0",
            ],
        ),
        (
            "v_policy_procedure_arguments",
            [
                "expire_snapshots: argument `stream_results` is yes; expected true or false",
                "remove_orphan_files: argument `prefix_mismatch_mode` is 'skip'; allowed values: ERROR, IGNORE, DELETE",
                "rewrite_manifests: argument `use_caching` is 1; expected true or false",
            ],
        ),
        (
            "v_policy_not_a_mapping",
            ["meta.iceberg_maint is ['compaction']; expected a mapping, or true/false to switch maintenance on/off"],
        ),
        ("v_policy_false", []),
        (
            "v_policy_expire_cutoffs",
            [
                "expire_snapshots: argument `older_than_hours` is -2; it must be 0 or more (0 means now: every snapshot but the newest retain_last)"
            ],
        ),
        (
            "v_policy_expire_absolute",
            [
                "expire_snapshots: argument `older_than` is \"2026-01-01\"; expected a UTC time 'YYYY-MM-DD HH:MM:SS[.ffffff]' (or ISO 8601 with T and an optional Z)"
            ],
        ),
        ("v_policy_ok", []),
    ],
)
def test_validation_messages(rendered: dict[str, dict[str, Any]], case: str, messages: list[str]) -> None:
    assert rendered[case]["errors"] == messages


def test_relation_names(rendered: dict[str, dict[str, Any]]) -> None:
    assert rendered["names_2"]["value"] == ["analytics.events", "analytics.events", "system"]
    assert rendered["names_1"]["value"] == ["analytics.events", "analytics.events", "system"]  # target schema
    assert rendered["names_3"]["value"] == ["analytics.events", "glue.analytics.events", "glue.system"]


def test_ref_and_source_relations(target: Path) -> None:
    invocation = render(["run-operation", "iceberg_maint_render_relation_cases"], target)
    assert invocation.success, invocation.exception
    cases = {c["id"]: c["sql"] for c in markers(invocation.log_messages, "ICEBERG_MAINT_CASE")}
    for case, table in (("ref", "analytics.events"), ("source", "analytics.raw_events")):
        assert [statement.split("(", 1)[0] for statement in cases[case]] == [
            "CALL system.rewrite_data_files",
            "CALL system.expire_snapshots",
            "CALL system.remove_orphan_files",
            "CALL system.rewrite_manifests",
            "CALL system.rewrite_position_delete_files",
        ]
        assert all(f"(table => '{table}'" in statement for statement in cases[case])


def test_thresholds(rendered: dict[str, dict[str, Any]]) -> None:
    value = lambda case: rendered[case]["value"]  # noqa: E731
    assert value("due_compaction") == {"due": False, "reason": "no partition has >= 5 small files (largest: 3)"}
    assert value("due_compaction_low") == {"due": True, "reason": "a partition has 3 small files, >= min_input_files 3"}
    # With a cold scope (maintain() with cold_partitions_hours) only the cold partitions count.
    assert value("due_compaction_cold") == {
        "due": True,
        "reason": "a cold partition has 5 small files, >= min_input_files 5",
    }
    assert value("due_compaction_only_hot") == {
        "due": False,
        "reason": "no cold partition has >= 5 small files (largest: 1)",
    }
    assert value("due_compaction_nothing_cold") == {
        "due": False,
        "reason": "no partition has been quiet for 6 h (cold_partitions_hours), nothing cold to compact",
    }
    assert value("due_expire") == {"due": True, "reason": "8 snapshots (> retain_last 5), oldest 200.5 h old (> 168 h)"}
    assert value("due_expire_few") == {"due": False, "reason": "only 8 snapshots, not more than retain_last 8"}
    assert value("due_expire_young") == {"due": False, "reason": "oldest snapshot is 200.5 h old, not older than 300 h"}
    # older_than_hours 0: no age limit; a rewrite planned first makes expiry due at retain_last.
    assert value("due_expire_now") == {
        "due": True,
        "reason": "8 snapshots (> retain_last 5), older_than_hours 0: no age limit",
    }
    assert value("due_expire_now_after_rewrite") == {
        "due": True,
        "reason": (
            "8 snapshots plus those rewrite_data_files commits first (older_than_hours 0: only the newest retain_last 8 stay)"
        ),
    }
    assert value("due_expire_after_rewrite_with_age") == {
        "due": False,
        "reason": "only 8 snapshots, not more than retain_last 8",
    }
    assert value("due_expire_absolute") == {
        "due": True,
        "reason": ("8 snapshots (> retain_last 5), oldest 200.5 h old (> older_than 2026-01-01 00:00:00)"),
    }
    assert value("due_expire_absolute_young") == {
        "due": False,
        "reason": ("oldest snapshot is 200.5 h old, not older than older_than 2026-01-01 00:00:00"),
    }
    assert value("due_manifests") == {"due": False, "reason": "only 3 data manifests, below threshold of 5"}
    assert value("due_orphans")["due"] is True
    assert value("due_deletes") == {"due": False, "reason": "only 0 delete files, below threshold of 5"}


def test_policy_merge_and_compaction_options(rendered: dict[str, dict[str, Any]]) -> None:
    policy = rendered["policy"]["value"]
    assert policy["compaction"]["min_input_files"] == 2
    assert policy["compaction"]["partial_progress"] == "auto"
    assert policy["compaction"]["partial_progress_above_mb"] == 10240
    assert policy["remove_orphan_files"] == {
        "enabled": False,
        "older_than_hours": 72,
        "location": None,
        "max_concurrent_deletes": None,
        "equal_schemes": None,
        "equal_authorities": None,
        "prefix_mismatch_mode": None,
        "prefix_listing": None,
        "interval_hours": 12,
    }
    assert policy["expire_snapshots"] == {
        "enabled": True,
        "older_than_hours": 168,
        "older_than": None,
        "retain_last": 9,
        "clean_expired_metadata": None,
        "max_concurrent_deletes": None,
        "stream_results": None,
        "retain_metadata_files": None,
        "interval_hours": None,
    }
    assert policy["rewrite_manifests"] == {"enabled": True, "min_manifests": 5, "use_caching": None,
                                           "interval_hours": None}
    # `iceberg_maint: false` switches the model's maintenance off, like `enabled: false`.
    assert rendered["policy_false"]["value"]["enabled"] is False
    assert rendered["policy_false"]["value"]["rewrite_manifests"]["enabled"] is False
    # `partial_progress: auto` on a table of unknown size: partial progress, each group rewritten
    # and committed alone (on every catalog) unless options say otherwise.
    assert rendered["options_default"]["value"] == {
        "min-input-files": "5",
        "partial-progress.enabled": "true",
        "partial-progress.max-failed-commits": "0",
        "max-concurrent-file-group-rewrites": "1",
        "partial-progress.max-commits": "10000",
    }
    # Below partial_progress_above_mb: Iceberg's own parallel groups and one commit.
    assert rendered["options_small_table"]["value"] == {"min-input-files": "5"}
    assert rendered["options_custom"]["value"] == {"min-input-files": "9", "target-file-size-bytes": "268435456"}
    assert rendered["options_explicit"]["value"]["max-concurrent-file-group-rewrites"] == "4"
    assert rendered["options_no_partial_progress"]["value"] == {"min-input-files": "5"}


def test_policy_sections_carry_the_procedures_arguments(rendered: dict[str, dict[str, Any]]) -> None:
    orphans = rendered["planned_procedure_arguments"]["sql"]
    assert orphans.startswith("CALL system.remove_orphan_files(table => 'analytics.events', older_than => TIMESTAMP '")
    assert orphans.endswith("equal_schemes => map('s3a', 's3'), prefix_mismatch_mode => 'IGNORE')")
    assert older_than(orphans) < datetime.now(timezone.utc) - timedelta(hours=95)
    assert rendered["planned_expire_arguments"]["sql"].endswith(
        "retain_last => 5, stream_results => true, clean_expired_metadata => true)"
    )
    assert rendered["planned_manifests_arguments"]["sql"] == (
        "CALL system.rewrite_manifests(table => 'analytics.events', use_caching => false)"
    )


def test_model_selection(rendered: dict[str, dict[str, Any]]) -> None:
    # A source without meta.iceberg_maint is selected only when named.
    assert rendered["select_all"]["value"] == ["event_log", "events", "user_summary"]
    assert rendered["select_tag"]["value"] == ["event_log", "events"]
    assert rendered["select_mixed"]["value"] == ["user_summary", "event_log", "events"]
    assert rendered["select_source_table"]["value"] == ["raw_events", "events"]


def test_unchanged_since_walks_the_lineage_through_rewrites_only_in_both_engines(
        rendered: dict[str, dict[str, Any]]) -> None:
    lineage = {row[0]: (row[1], row[2]) for row in LINEAGE}
    for i, (checked, current, expected) in enumerate(UNCHANGED_CASES):
        assert unchanged_since(checked, current, lineage) is expected, (checked, current)
        assert rendered[f"unchanged_since_{i}"]["value"] is expected, (checked, current)


def test_shards_are_the_python_twins_and_bad_shards_are_refused(rendered: dict[str, dict[str, Any]]) -> None:
    outcome = rendered["shard_of_tables"]
    assert outcome["errors"] == [] and outcome["value"]["parsed"] == {"k": 2, "n": 4}
    expected = [shard_of(*table.split("."), 4) for table in SHARD_TABLES]
    assert outcome["value"]["shards"] == expected
    assert set(expected) == {1, 2, 3, 4}  # 40 names reach every shard
    assert Shard.parse(" 2 / 4 ") == Shard(2, 4)
    for i, shard in enumerate(REFUSED_SHARDS):
        assert rendered[f"shard_refused_{i}"]["errors"] == [
            f"iceberg_maintenance: argument `shard` is {json.dumps(shard)}; expected 'K/N' with whole numbers "
            "1 <= K <= N, e.g. '2/4'"], shard
        if isinstance(shard, str):
            with pytest.raises(UsageError, match=r"expected 'K/N' with whole numbers 1 <= K <= N"):
                Shard.parse(shard)


def test_run_operation_context_is_a_macro(rendered: dict[str, dict[str, Any]]) -> None:
    # maintain() returns its results here; only inside a node's hooks does it render to ''.
    assert rendered["context"]["value"] == "macro"


@pytest.mark.parametrize(
    ("macro", "args", "message"),
    [
        (
            "dbt_iceberg_maint.get_rewrite_data_files_sql",
            {"relation": "a.b", "where": "x = 1; select 1"},
            'argument `where` is "x = 1; select 1"',
        ),
        (
            "dbt_iceberg_maint.get_remove_orphan_files_sql",
            {"relation": "a.b", "older_than_hours": 1},
            "argument `older_than_hours` is 1; it must be at least 24",
        ),
        (
            "dbt_iceberg_maint.get_rewrite_manifests_sql",
            {"relation": "a.b-c"},
            "argument `relation` is 'a.b-c'; expected 'table', 'schema.table' or 'catalog.schema.table'",
        ),
    ],
)
def test_get_sql_raises_a_compiler_error(target: Path, macro: str, args: dict[str, Any], message: str) -> None:
    invocation = render(["run-operation", macro, "--args", json.dumps(args)], target)
    assert not invocation.success
    assert message in " ".join(invocation.log_messages) + (invocation.exception or "")
