"""cold_partitions_where for the hour, month and year transforms and `timestamp_ntz`, under a
session time zone that is not UTC (+05:30: not even whole hours), on real Spark.

No sleeping: the old partitions are committed first, the recent ones after, and the cut-off is
the midpoint between the last old commit and the first recent one as the table's own snapshots
record them, judged `as_of` a fixed time. Each predicate is then applied by Spark in that same
session time zone and must select exactly the rows of the old partitions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

SESSION_ZONE = "Asia/Kolkata"
# table: (column type, transform, old values, recent values); values are UTC wall clock for
# `timestamp` (inserted with an explicit +00:00) and plain wall clock for `timestamp_ntz`.
CASES: dict[str, tuple[str, str, tuple[str, ...], tuple[str, ...]]] = {
    "by_hour": ("timestamp", "hours", ("2026-11-01 05:00:00", "2026-11-01 05:59:59", "2026-11-01 18:30:00"),
                ("2026-11-01 06:00:00", "2026-11-01 19:00:00")),
    "by_month": ("timestamp", "months", ("2026-09-01 00:00:00", "2026-09-30 23:59:59"),
                 ("2026-10-01 00:00:00", "2026-08-31 23:59:59")),
    "by_year": ("timestamp", "years", ("2024-01-01 00:00:00", "2024-12-31 23:59:59"),
                ("2025-01-01 00:00:00", "2023-12-31 23:59:59")),
    "by_day_ntz": ("timestamp_ntz", "days", ("2026-11-01 00:00:00", "2026-11-01 23:59:59"),
                   ("2026-11-02 00:00:00", "2026-10-31 23:59:59")),
    "by_hour_ntz": ("timestamp_ntz", "hours", ("2026-11-01 05:00:00", "2026-11-01 05:59:59"),
                    ("2026-11-01 06:00:00",)),
}


def literal(column_type: str, value: str) -> str:
    return f"timestamp '{value}+00:00'" if column_type == "timestamp" else f"timestamp_ntz '{value}'"


def committed_at_ms(spark: SparkSession, table: str) -> int:
    """When the table's newest snapshot was committed (its partitions' last_updated_at)."""
    return int(spark.sql(f"select max(unix_millis(committed_at)) from {table}.snapshots").collect()[0][0])


@pytest.fixture(scope="module")
def predicates(spark: SparkSession, dbt_project: DbtProject) -> Iterator[dict[str, Any]]:
    namespace = f"local.{dbt_project.schema}"
    spark.sql(f"create namespace if not exists {namespace}")
    tables = {name: f"{namespace}.{name}" for name in CASES}
    for name, (column_type, transform, _, _) in CASES.items():
        spark.sql(f"create table {tables[name]} (id bigint, ts {column_type}) using iceberg "
                  f"partitioned by ({transform}(ts))")

    def insert(name: str, values: tuple[str, ...], first_id: int) -> None:
        column_type = CASES[name][0]
        rows = ", ".join(f"({first_id + i}, {literal(column_type, v)})" for i, v in enumerate(values))
        spark.sql(f"insert into {tables[name]} values {rows}")

    for name, (_, _, old, _) in CASES.items():
        insert(name, old, 0)
    last_old = max(committed_at_ms(spark, t) for t in tables.values())
    for name, (_, _, _, recent) in CASES.items():
        insert(name, recent, 100)
    first_recent = min(committed_at_ms(spark, t) for t in tables.values())
    assert first_recent > last_old, "the recent commits must come after the old ones"
    as_of_ms = first_recent + 3_600_000  # one hour later: a fixed point, not "now"
    cut_off_ms = (last_old + first_recent) / 2
    quiet_hours = (as_of_ms - cut_off_ms) / 3_600_000
    as_of = datetime.fromtimestamp(as_of_ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")

    previous_zone = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    # dbt's session profile sets the zone when it connects (integration_tests/profiles.yml).
    dbt_project.env["DBT_ICEBERG_MAINT_SESSION_TIME_ZONE"] = SESSION_ZONE
    try:
        cases = [{"id": name, "macro": "cold_partitions_where",
                  "kwargs": {"relation": table, "quiet_hours": quiet_hours, "as_of": as_of}}
                 for name, table in tables.items()]
        invocation = dbt_project("run-operation", "hp_test_render", "--args", json.dumps({"cases": cases}))
        prefix = "HP_CASE "
        where = {
            case["id"]: case["result"]
            for case in (json.loads(m[len(prefix):]) for m in invocation.log_messages if m.startswith(prefix))
        }
        assert spark.conf.get("spark.sql.session.timeZone") == SESSION_ZONE  # dbt ran in that zone
        selected = {
            name: sorted(r[0] for r in spark.sql(f"select id from {tables[name]} where {where[name]}").collect())
            for name in CASES if where.get(name)
        }
        yield {"where": where, "selected": selected}
    finally:
        dbt_project.env.pop("DBT_ICEBERG_MAINT_SESSION_TIME_ZONE")
        spark.conf.set("spark.sql.session.timeZone", previous_zone)


@pytest.mark.parametrize("name", list(CASES))
def test_predicate_selects_exactly_the_old_partitions(predicates: dict[str, Any], name: str) -> None:
    where = predicates["where"][name]
    assert where, f"{name}: nothing cold, but its old partitions are quiet"
    old = CASES[name][2]
    assert predicates["selected"][name] == list(range(len(old))), (name, where)
