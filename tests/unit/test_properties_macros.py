"""apply_table_properties' pure macros: policy -> declared properties, validation, ALTER SQL.

dbt renders the macros (run-operation on the integration project); no query runs, so no JVM
starts. All cases of a module go through one dbt invocation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from dbt_iceberg_maint.runtime.invoke import DbtInvocation, invoke_dbt

CASE_PREFIX = "HP_CASE "


def run_operation(target: Path, macro: str, args: Mapping[str, Any]) -> DbtInvocation:
    """One `dbt run-operation` on the integration project, with its own target/log paths."""
    return invoke_dbt(
        [
            "run-operation",
            macro,
            "--args",
            json.dumps(args),
            "--target-path",
            str(target / "target"),
            "--log-path",
            str(target / "logs"),
        ],
        env={"DBT_ICEBERG_MAINT_SCHEMA": "hp_unit"},
    )


def render_cases(target: Path, cases: Sequence[tuple[str, str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Render (id, package macro, kwargs) cases in one invocation; {id: returned value}."""
    invocation = run_operation(
        target,
        "hp_test_render",
        {"cases": [{"id": case_id, "macro": macro, "kwargs": kwargs} for case_id, macro, kwargs in cases]},
    )
    assert invocation.success, invocation.exception
    rendered = [json.loads(m[len(CASE_PREFIX) :]) for m in invocation.log_messages if m.startswith(CASE_PREFIX)]
    return {case["id"]: case["result"] for case in rendered}


@pytest.fixture(scope="module")
def dbt_target(render_target: Path) -> Path:
    return render_target


ERROR_CASES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "bad_level": (
        {"isolation_level": "read_committed"},
        [
            "isolation_level = 'read_committed' is not allowed; expected one of serializable, snapshot "
            "(or a mapping of delete/update/merge to one of them)"
        ],
    ),
    "bad_level_type": (
        {"isolation_level": 3},
        [
            "isolation_level = 3 is not allowed; expected one of serializable, snapshot or a mapping "
            "of delete/update/merge to one of them"
        ],
    ),
    "unknown_operation": (
        {"isolation_level": {"insert": "snapshot"}},
        ["isolation_level.insert is not an operation; expected keys delete, update, merge"],
    ),
    "bad_operation_level": (
        {"isolation_level": {"merge": "none"}},
        ['isolation_level.merge = "none" is not allowed; expected one of serializable, snapshot'],
    ),
    "unknown_retry_key": (
        {"commit_retry": {"retries": 3}},
        [
            "commit_retry.retries is not a commit retry setting; expected keys num_retries, "
            "min_wait_ms, max_wait_ms, total_timeout_ms"
        ],
    ),
    "zero_retries": (
        {"commit_retry": {"num_retries": 0}},
        ["commit_retry.num_retries = 0 is not allowed; expected a positive integer"],
    ),
    "negative_wait": (
        {"commit_retry": {"min_wait_ms": -5}},
        ["commit_retry.min_wait_ms = -5 is not allowed; expected a positive integer"],
    ),
    "text_timeout": (
        {"commit_retry": {"total_timeout_ms": "60000"}},
        ['commit_retry.total_timeout_ms = "60000" is not allowed; expected a positive integer'],
    ),
    "retry_beyond_an_int": (
        {"commit_retry": {"num_retries": 2**31}},
        ["commit_retry.num_retries = 2147483648 is not allowed; expected at most 2147483647 (Iceberg reads it as "
         "an int)"],
    ),
    # A retention the expiry would refuse is refused here too, with the same message.
    "retention_refused": (
        {"expire_snapshots": {"retain_metadata_files": 0}},
        ["expire_snapshots: argument `retain_metadata_files` is 0; it must be greater than 0"],
    ),
    "retention_beyond_an_int": (
        {"expire_snapshots": {"retain_metadata_files": 2**31}},
        ["expire_snapshots: argument `retain_metadata_files` is 2147483648; it must be at most 2147483647 "
         "(Iceberg reads write.metadata.previous-versions-max as an int)"],
    ),
    "retry_not_mapping": (
        {"commit_retry": 10},
        [
            "commit_retry = 10 is not allowed; expected a mapping with keys num_retries, "
            "min_wait_ms, max_wait_ms, total_timeout_ms"
        ],
    ),
    "properties_not_mapping": (
        {"properties": ["a"]},
        ['properties = ["a"] is not allowed; expected a mapping of property name to value'],
    ),
    "nested_property": (
        {"properties": {"write.format.default": {"x": 1}}},
        ['properties.write.format.default = {"x": 1} is not allowed; expected a string, number or boolean'],
    ),
    "contradiction": (
        {"isolation_level": "snapshot", "properties": {"write.merge.isolation-level": "serializable"}},
        [
            "properties.write.merge.isolation-level = \"serializable\" contradicts 'snapshot' declared by "
            "isolation_level/commit_retry; declare it once"
        ],
    ),
    "several": (
        {"isolation_level": "weak", "commit_retry": {"num_retries": 0}},
        [
            "isolation_level = 'weak' is not allowed; expected one of serializable, snapshot (or a mapping of "
            "delete/update/merge to one of them)",
            "commit_retry.num_retries = 0 is not allowed; expected a positive integer",
        ],
    ),
    "retention_contradicted": (
        {"expire_snapshots": {"retain_metadata_files": 5},
         "properties": {"write.metadata.previous-versions-max": 50,
                        "write.metadata.delete-after-commit.enabled": True}},
        [
            "properties.write.metadata.previous-versions-max = 50 contradicts '5' that "
            "expire_snapshots.retain_metadata_files sets; declare it once"
        ],
    ),
    "valid": ({"isolation_level": "snapshot", "commit_retry": {"num_retries": 10}}, []),
}

DECLARED_CASES: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "one_level": (
        {"isolation_level": "Snapshot"},
        {
            "write.delete.isolation-level": "snapshot",
            "write.update.isolation-level": "snapshot",
            "write.merge.isolation-level": "snapshot",
        },
    ),
    "per_operation": (
        {"isolation_level": {"delete": "serializable", "merge": "snapshot"}},
        {"write.delete.isolation-level": "serializable", "write.merge.isolation-level": "snapshot"},
    ),
    "retry_and_free": (
        {
            "commit_retry": {"num_retries": 10, "min_wait_ms": 100, "max_wait_ms": 60000, "total_timeout_ms": 1800000},
            "properties": {
                "write.target-file-size-bytes": 268435456,
                "gc.enabled": True,
                "write.merge.mode": "merge-on-read",
            },
        },
        {
            "commit.retry.num-retries": "10",
            "commit.retry.min-wait-ms": "100",
            "commit.retry.max-wait-ms": "60000",
            "commit.retry.total-timeout-ms": "1800000",
            "write.target-file-size-bytes": "268435456",
            "gc.enabled": "true",
            "write.merge.mode": "merge-on-read",
        },
    ),
    "agreeing_duplicate": (
        {"isolation_level": "snapshot", "properties": {"write.merge.isolation-level": "snapshot"}},
        {
            "write.delete.isolation-level": "snapshot",
            "write.update.isolation-level": "snapshot",
            "write.merge.isolation-level": "snapshot",
        },
    ),
    "nothing": ({"compaction": {"min_input_files": 2}}, {}),
    # The expiry's metadata-file retention, declared as apply_table_properties() reconciles it.
    "retention": (
        {"expire_snapshots": {"older_than_hours": 24, "retain_metadata_files": 3},
         "properties": {"write.metadata.previous-versions-max": "3"}},
        {"write.metadata.delete-after-commit.enabled": "true", "write.metadata.previous-versions-max": "3"},
    ),
    # Expiry switched off as a whole declares nothing.
    "retention_without_expiry": ({"expire_snapshots": False}, {}),
}

SQL_CASES: dict[str, tuple[dict[str, str], dict[str, str], str]] = {
    "only_differing": (
        {"write.merge.isolation-level": "snapshot", "commit.retry.num-retries": "10"},
        {"write.merge.isolation-level": "snapshot", "commit.retry.num-retries": "4", "format-version": "2"},
        "alter table analytics.events set tblproperties ('commit.retry.num-retries' = '10')",
    ),
    "absent_keys_sorted": (
        {"write.update.isolation-level": "snapshot", "write.delete.isolation-level": "serializable"},
        {"format-version": "2"},
        "alter table analytics.events set tblproperties ('write.delete.isolation-level' = 'serializable', "
        "'write.update.isolation-level' = 'snapshot')",
    ),
    "quoted_value": (
        {"comment.owner": "it's \\ me"},
        {},
        "alter table analytics.events set tblproperties ('comment.owner' = 'it\\'s \\\\ me')",
    ),
    "all_equal": ({"write.merge.isolation-level": "snapshot"}, {"write.merge.isolation-level": "snapshot"}, ""),
    "nothing_declared": ({}, {"format-version": "2"}, ""),
}


@pytest.fixture(scope="module")
def rendered(dbt_target: Path) -> dict[str, Any]:
    cases: list[tuple[str, str, Mapping[str, Any]]] = []
    cases += [(f"errors:{k}", "table_properties_policy_errors", {"policy": p}) for k, (p, _) in ERROR_CASES.items()]
    cases += [(f"declared:{k}", "declared_table_properties", {"policy": p}) for k, (p, _) in DECLARED_CASES.items()]
    cases += [
        (f"sql:{k}", "get_apply_table_properties_sql", {"relation": "analytics.events", "declared": d, "current": c})
        for k, (d, c, _) in SQL_CASES.items()
    ]
    cases.append(
        ("changes", "table_property_changes", {"declared": {"a": "1", "b": "2"}, "current": {"a": "1", "b": "3"}})
    )
    return render_cases(dbt_target, cases)


@pytest.mark.parametrize("case", ERROR_CASES)
def test_policy_errors_name_key_value_and_allowed(rendered: dict[str, Any], case: str) -> None:
    assert rendered[f"errors:{case}"] == ERROR_CASES[case][1]


@pytest.mark.parametrize("case", DECLARED_CASES)
def test_policy_maps_to_iceberg_properties(rendered: dict[str, Any], case: str) -> None:
    assert rendered[f"declared:{case}"] == DECLARED_CASES[case][1]


@pytest.mark.parametrize("case", SQL_CASES)
def test_alter_sets_only_differing_keys(rendered: dict[str, Any], case: str) -> None:
    assert rendered[f"sql:{case}"] == SQL_CASES[case][2]


def test_changes_report_old_and_new_values(rendered: dict[str, Any]) -> None:
    assert rendered["changes"] == {"b": {"from": "3", "to": "2"}}


def test_invalid_policy_raises_a_compiler_error(dbt_target: Path) -> None:
    invocation = run_operation(
        dbt_target,
        "dbt_iceberg_maint.declared_table_properties",
        {"policy": {"isolation_level": {"merge": "read_committed"}}},
    )
    assert not invocation.success
    assert (
        'invalid meta.iceberg_maint table-property policy: isolation_level.merge = "read_committed" '
        "is not allowed; expected one of serializable, snapshot"
    ) in " ".join([str(invocation.exception), *invocation.log_messages])


def test_run_operation_without_relation_names_the_argument(dbt_target: Path) -> None:
    invocation = run_operation(dbt_target, "dbt_iceberg_maint.apply_table_properties", {})
    assert not invocation.success
    assert "argument `relation` is none" in " ".join([str(invocation.exception), *invocation.log_messages])
