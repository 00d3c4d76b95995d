"""cold_partitions_where's pure macros: partition values -> exact ranges on the source column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_properties_macros import render_cases, run_operation

RANGE_CASES: dict[str, tuple[dict[str, Any], str | None]] = {
    "days_timestamp": (
        {"transform": "days", "column": "event_ts", "column_type": "timestamp", "value": "2026-11-03"},
        "(event_ts >= timestamp '2026-11-03 00:00:00+00:00' and event_ts < timestamp '2026-11-04 00:00:00+00:00')",
    ),
    "days_month_end": (
        {"transform": "days", "column": "ts", "column_type": "timestamp", "value": "2026-12-31"},
        "(ts >= timestamp '2026-12-31 00:00:00+00:00' and ts < timestamp '2027-01-01 00:00:00+00:00')",
    ),
    "days_date": (
        {"transform": "days", "column": "d", "column_type": "date", "value": "2024-02-28"},
        "(d >= date '2024-02-28' and d < date '2024-02-29')",
    ),
    # 498245 hours after the epoch is 2026-11-03 05:00 UTC.
    "hours_timestamp": (
        {"transform": "hours", "column": "ts", "column_type": "timestamp", "value": 498245},
        "(ts >= timestamp '2026-11-03 05:00:00+00:00' and ts < timestamp '2026-11-03 06:00:00+00:00')",
    ),
    "hours_ntz_day_end": (
        {"transform": "hours", "column": "ts", "column_type": "timestamp_ntz", "value": 498259},
        "(ts >= timestamp_ntz '2026-11-03 19:00:00' and ts < timestamp_ntz '2026-11-03 20:00:00')",
    ),
    "hours_on_date_column": ({"transform": "hours", "column": "d", "column_type": "date", "value": 3}, None),
    # 682 months after 1970-01 is 2026-11; 683 is 2026-12 (its range ends in the next year).
    "months_date": (
        {"transform": "months", "column": "d", "column_type": "date", "value": 682},
        "(d >= date '2026-11-01' and d < date '2026-12-01')",
    ),
    "months_year_end": (
        {"transform": "months", "column": "ts", "column_type": "timestamp", "value": 683},
        "(ts >= timestamp '2026-12-01 00:00:00+00:00' and ts < timestamp '2027-01-01 00:00:00+00:00')",
    ),
    "months_before_epoch": (
        {"transform": "months", "column": "d", "column_type": "date", "value": -1},
        "(d >= date '1969-12-01' and d < date '1970-01-01')",
    ),
    "years_timestamp": (
        {"transform": "years", "column": "ts", "column_type": "timestamp", "value": 56},
        "(ts >= timestamp '2026-01-01 00:00:00+00:00' and ts < timestamp '2027-01-01 00:00:00+00:00')",
    ),
    "identity_date": (
        {"transform": "identity", "column": "event_date", "column_type": "date", "value": "2026-11-03"},
        "event_date = date '2026-11-03'",
    ),
    "identity_string_quoted": (
        {"transform": "identity", "column": "my col", "column_type": "string", "value": "o'k"},
        "`my col` = 'o\\'k'",
    ),
    "identity_string_with_separator_left_out": (
        {"transform": "identity", "column": "s", "column_type": "string", "value": "a;b"},
        None,
    ),
    "identity_string_with_comment_left_out": (
        {"transform": "identity", "column": "s", "column_type": "string", "value": "x -- y"},
        None,
    ),
    "identity_bigint": ({"transform": "identity", "column": "id", "column_type": "bigint", "value": 42}, "id = 42"),
    "identity_boolean": (
        {"transform": "identity", "column": "ok", "column_type": "boolean", "value": False},
        "ok = false",
    ),
    "identity_null": (
        {"transform": "identity", "column": "country", "column_type": "string", "value": None},
        "country is null",
    ),
    "days_null": ({"transform": "days", "column": "ts", "column_type": "timestamp", "value": None}, "ts is null"),
    "identity_double_left_out": ({"transform": "identity", "column": "x", "column_type": "double", "value": 0.5}, None),
    "identity_decimal_left_out": (
        {"transform": "identity", "column": "x", "column_type": "decimal(12,2)", "value": 1.5},
        None,
    ),
    "identity_wrong_shape": ({"transform": "identity", "column": "id", "column_type": "bigint", "value": "42"}, None),
    "bucket_left_out": ({"transform": "bucket", "column": "id", "column_type": "bigint", "value": 3}, None),
    "truncate_left_out": ({"transform": "truncate", "column": "s", "column_type": "string", "value": "ab"}, None),
    "unknown_column": ({"transform": "days", "column": "ts", "column_type": None, "value": "2026-11-03"}, None),
}

TRANSFORM_CASES: dict[str, tuple[str, dict[str, str]]] = {
    "days": ("days(event_ts)", {"transform": "days", "column": "event_ts", "text": "days(event_ts)"}),
    "bucket": ("bucket(4, id)", {"transform": "bucket", "column": "id", "text": "bucket(4, id)"}),
    "identity": ("event_date", {"transform": "identity", "column": "event_date", "text": "event_date"}),
}

FIELDS = [{"transform": "days", "column": "ts"}, {"transform": "identity", "column": "s"}]
COLUMNS = {"ts": "timestamp", "s": "string", "id": "bigint"}
WHERE_CASES: dict[str, tuple[dict[str, Any], str | None]] = {
    "two_partitions": (
        {
            "partition_fields": FIELDS,
            "columns": COLUMNS,
            "partitions": [{"ts_day": "2026-11-03", "s": "a"}, {"ts_day": "2026-11-04", "s": None}],
        },
        "((ts >= timestamp '2026-11-03 00:00:00+00:00' and ts < timestamp '2026-11-04 00:00:00+00:00') and s = 'a')"
        " or ((ts >= timestamp '2026-11-04 00:00:00+00:00' and ts < timestamp '2026-11-05 00:00:00+00:00') and s is null)",
    ),
    "single_field": (
        {
            "partition_fields": [{"transform": "identity", "column": "s"}],
            "columns": COLUMNS,
            "partitions": [{"s": "a"}, {"s": "b"}],
        },
        "s = 'a' or s = 'b'",
    ),
    "inexpressible_partition_left_out": (
        {
            "partition_fields": [*FIELDS, {"transform": "bucket", "column": "id"}],
            "columns": COLUMNS,
            "partitions": [{"ts_day": "2026-11-03", "s": "a", "id_bucket": 1}],
        },
        None,
    ),
    "field_count_mismatch_left_out": (
        {"partition_fields": FIELDS, "columns": COLUMNS, "partitions": [{"ts_day": "2026-11-03"}]},
        None,
    ),
    "nothing_cold": ({"partition_fields": FIELDS, "columns": COLUMNS, "partitions": []}, None),
}


@pytest.fixture(scope="module")
def dbt_target(render_target: Path) -> Path:
    return render_target


@pytest.fixture(scope="module")
def rendered(dbt_target: Path) -> dict[str, Any]:
    cases = [(f"range:{k}", "get_partition_range_sql", kwargs) for k, (kwargs, _) in RANGE_CASES.items()]
    cases += [(f"transform:{k}", "parse_partition_transform", {"text": t}) for k, (t, _) in TRANSFORM_CASES.items()]
    cases += [(f"where:{k}", "get_partitions_where_sql", kwargs) for k, (kwargs, _) in WHERE_CASES.items()]
    cases.append(
        (
            "health_sql",
            "get_table_health_sql",
            {"relation": "local.analytics.events", "target_file_size_bytes": 1000, "partitioned": False},
        )
    )
    return render_cases(dbt_target, cases)


@pytest.mark.parametrize("case", RANGE_CASES)
def test_partition_value_becomes_exact_range(rendered: dict[str, Any], case: str) -> None:
    assert rendered[f"range:{case}"] == RANGE_CASES[case][1]


@pytest.mark.parametrize("case", TRANSFORM_CASES)
def test_describe_partitioning_is_parsed(rendered: dict[str, Any], case: str) -> None:
    assert rendered[f"transform:{case}"] == TRANSFORM_CASES[case][1]


@pytest.mark.parametrize("case", WHERE_CASES)
def test_cold_partitions_become_one_predicate(rendered: dict[str, Any], case: str) -> None:
    assert rendered[f"where:{case}"] == WHERE_CASES[case][1]


def test_health_sql_uses_threshold_and_treats_unpartitioned_table_as_one_partition(rendered: dict[str, Any]) -> None:
    sql = rendered["health_sql"]
    assert "file_size_in_bytes < 750" in sql
    assert "group by spec_id)" in sql and "partition" not in sql.split("from files")[0]
    assert "from local.analytics.events.manifests where content = 0" in sql


@pytest.mark.parametrize(
    ("macro", "args", "message"),
    [
        (
            "dbt_iceberg_maint.cold_partitions_where",
            {"relation": "analytics.events", "quiet_hours": 0},
            "cold_partitions_where: quiet_hours = 0 is not allowed; expected a number of hours greater than 0",
        ),
        (
            "dbt_iceberg_maint.table_health",
            {"relation": "analytics.events; drop table x"},
            "argument `relation` is 'analytics.events; drop table x'; expected 'table', 'schema.table' or 'catalog.schema.table'",
        ),
    ],
)
def test_bad_arguments_are_compiler_errors(dbt_target: Path, macro: str, args: dict[str, Any], message: str) -> None:
    invocation = run_operation(dbt_target, macro, args)
    assert not invocation.success
    assert message in " ".join([str(invocation.exception), *invocation.log_messages])
