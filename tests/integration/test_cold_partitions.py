"""cold_partitions_where on real Spark: old partitions are selected, recently written ones are
not, and rewrite_data_files with the predicate compacts only the cold partitions.

Partitions' last_updated_at is their newest commit time, so the test commits the "old"
partitions, then the "recent" ones, reads the commit times back and judges coldness as of a
fixed time (as_of) with quiet_hours putting the cut-off in the middle of the gap between the
last old and the first recent commit: no sleep, nothing depends on how fast the machine is."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

OLD_DAYS = ("2026-11-01", "2026-11-02")
RECENT_DAYS = ("2026-11-05", "2026-11-06")
FILES_PER_PARTITION = 3


def insert_rows(spark: SparkSession, table: str, days: tuple[str, ...], row_sql: str) -> None:
    """FILES_PER_PARTITION separate commits, one small file per partition each."""
    for round_ in range(FILES_PER_PARTITION):
        values = ", ".join(row_sql.format(id=i * 10 + round_, day=day) for i, day in enumerate(days))
        spark.sql(f"insert into {table} values {values}")


def newest_commit(spark: SparkSession, table: str) -> int:
    return int(spark.sql(f"select max(unix_micros(committed_at)) from {table}.snapshots").collect()[0][0])


def files_per_day(spark: SparkSession, table: str, column: str) -> dict[str, int]:
    rows = spark.sql(
        f"select cast(to_date({column}) as string) as day from "
        f"(select input_file_name() as f, {column} from {table}) group by day, f"
    ).collect()
    return dict(Counter(row["day"] for row in rows))


def data_files_by_partition(spark: SparkSession, table: str) -> dict[str, int]:
    rows = spark.sql(f"select to_json(partition) as p, count(*) as n from {table}.data_files group by 1").collect()
    return {row["p"]: int(row["n"]) for row in rows}


@pytest.fixture(scope="module")
def tables(spark: SparkSession, dbt_project: DbtProject) -> dict[str, Any]:
    schema = f"local.{dbt_project.schema}_cold"
    spark.sql(f"create namespace if not exists {schema}")
    t = {
        name: f"{schema}.{name}"
        for name in ("by_day", "by_identity", "by_bucket", "by_evolved", "unpartitioned_old", "unpartitioned_new")
    }
    spark.sql(
        f"create table {t['by_day']} (id bigint, event_ts timestamp, v string) using iceberg partitioned by (days(event_ts))"
    )
    spark.sql(
        f"create table {t['by_identity']} (id bigint, event_date date, country string) using iceberg "
        "partitioned by (event_date, country)"
    )
    spark.sql(
        f"create table {t['by_bucket']} (id bigint, event_ts timestamp) using iceberg partitioned by (days(event_ts), bucket(2, id))"
    )
    spark.sql(f"create table {t['unpartitioned_old']} (id bigint) using iceberg")
    spark.sql(f"create table {t['unpartitioned_new']} (id bigint) using iceberg")

    day_row = "({id}, timestamp '{day} 12:00:00', 'x')"
    insert_rows(spark, t["by_day"], OLD_DAYS, day_row)
    # identity: one old partition has a null country; null values are expressed as `is null`.
    insert_rows(spark, t["by_identity"], OLD_DAYS, "({id}, date '{day}', " + "if('{day}' = '2026-11-01', null, 'NL'))")
    insert_rows(spark, t["by_bucket"], OLD_DAYS, "({id}, timestamp '{day} 12:00:00')")
    spark.sql(f"insert into {t['unpartitioned_old']} values (1)")
    # Partition evolution: old days written under spec 0 (days), later ones under spec 1
    # (days, identity v): rows of the old spec cannot be mapped onto the current fields.
    spark.sql(
        f"create table {t['by_evolved']} (id bigint, event_ts timestamp, v string) using iceberg partitioned by (days(event_ts))"
    )
    insert_rows(spark, t["by_evolved"], OLD_DAYS[:1], day_row)
    spark.sql(f"alter table {t['by_evolved']} add partition field v")
    insert_rows(spark, t["by_evolved"], OLD_DAYS[1:], day_row)
    old_done = max(newest_commit(spark, table) for table in t.values() if table != t["unpartitioned_new"])
    insert_rows(spark, t["by_day"], RECENT_DAYS, day_row)
    insert_rows(spark, t["by_identity"], RECENT_DAYS, "({id}, date '{day}', 'DE')")
    spark.sql(f"insert into {t['unpartitioned_new']} values (1)")
    recent = [
        r[0]
        for table in (t["by_day"], t["by_identity"], t["unpartitioned_new"])
        for r in spark.sql(
            f"select unix_micros(committed_at) from {table}.snapshots where unix_micros(committed_at) > {old_done}"
        ).collect()
    ]
    assert len(recent) == 2 * FILES_PER_PARTITION + 1 and min(recent) > old_done  # commits are sequential
    # Coldness as of a fixed time an hour after the last commit; the cut-off sits in the middle of the gap.
    as_of = max(recent) + 3600 * 10**6
    quiet_hours = (as_of - (old_done + min(recent)) / 2) / 3600e6
    as_of_text = datetime.fromtimestamp(as_of / 1e6, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")

    cases = [
        {
            "id": name,
            "macro": "cold_partitions_where",
            "kwargs": {"relation": table, "quiet_hours": quiet_hours, "as_of": as_of_text},
        }
        for name, table in t.items()
    ]
    # Without as_of the reference time is now.
    cases.append(
        {
            "id": "nothing_cold",
            "macro": "cold_partitions_where",
            "kwargs": {"relation": t["by_day"], "quiet_hours": 1000},
        }
    )
    cases.append(
        {
            "id": "everything_cold_now",
            "macro": "cold_partitions_where",
            "kwargs": {"relation": t["unpartitioned_new"], "quiet_hours": 0.0001},
        }
    )
    # A cold-scoped compaction of the warm unpartitioned table: its skip reason names no partition.
    cases.append(
        {
            "id": "unpartitioned_plan",
            "macro": "get_maintenance_plan",
            "kwargs": {"relation": t["unpartitioned_new"], "operations": ["compaction"],
                       "policy": {"compaction": {"cold_partitions_hours": 1000, "min_input_files": 1}}},
        }
    )
    invocation = dbt_project("run-operation", "hp_test_render", "--args", json.dumps({"cases": cases}))
    prefix = "HP_CASE "
    results = {
        c["id"]: c["result"]
        for c in (json.loads(m[len(prefix) :]) for m in invocation.log_messages if m.startswith(prefix))
    }
    return {"tables": t, "where": results}


def terms(predicate: str) -> set[str]:
    return set(predicate.split(" or "))


def test_day_partitions_become_utc_ranges_of_only_the_old_days(tables: dict[str, Any]) -> None:
    assert terms(tables["where"]["by_day"]) == {
        "(event_ts >= timestamp '2026-11-01 00:00:00+00:00' and event_ts < timestamp '2026-11-02 00:00:00+00:00')",
        "(event_ts >= timestamp '2026-11-02 00:00:00+00:00' and event_ts < timestamp '2026-11-03 00:00:00+00:00')",
    }


def test_compaction_with_the_predicate_rewrites_only_cold_partitions(
    spark: SparkSession, tables: dict[str, Any]
) -> None:
    table = tables["tables"]["by_day"]
    where = tables["where"]["by_day"]
    assert files_per_day(spark, table, "event_ts") == {day: FILES_PER_PARTITION for day in OLD_DAYS + RECENT_DAYS}
    selected = {
        r["d"]
        for r in spark.sql(
            f"select distinct cast(to_date(event_ts) as string) as d from {table} where {where}"
        ).collect()
    }
    assert selected == set(OLD_DAYS)

    where_sql = where.replace("'", "\\'")
    row = spark.sql(
        f"call local.system.rewrite_data_files(table => '{table}', where => '{where_sql}', "
        "options => map('min-input-files', '2'))"
    ).collect()[0]
    assert (row["rewritten_data_files_count"], row["added_data_files_count"]) == (2 * FILES_PER_PARTITION, 2)
    assert files_per_day(spark, table, "event_ts") == {
        **{day: 1 for day in OLD_DAYS},
        **{day: FILES_PER_PARTITION for day in RECENT_DAYS},
    }


def test_identity_partitions_including_null_values(spark: SparkSession, tables: dict[str, Any]) -> None:
    table = tables["tables"]["by_identity"]
    where = tables["where"]["by_identity"]
    assert terms(where) == {
        "(event_date = date '2026-11-01' and country is null)",
        "(event_date = date '2026-11-02' and country = 'NL')",
    }
    before = data_files_by_partition(spark, table)
    where_sql = where.replace("'", "\\'")
    spark.sql(
        f"call local.system.rewrite_data_files(table => '{table}', where => '{where_sql}', "
        "options => map('min-input-files', '2'))"
    ).collect()
    after = data_files_by_partition(spark, table)
    assert len(before) == 4 and set(before.values()) == {FILES_PER_PARTITION}
    assert after == {p: (1 if any(day in p for day in OLD_DAYS) else FILES_PER_PARTITION) for p in before}


def test_bucket_partitions_are_left_out_not_widened(tables: dict[str, Any]) -> None:
    assert tables["where"]["by_bucket"] is None


def test_partitions_of_an_older_spec_are_left_out(tables: dict[str, Any]) -> None:
    assert tables["where"]["by_evolved"] == (
        "((event_ts >= timestamp '2026-11-02 00:00:00+00:00' and event_ts < timestamp '2026-11-03 00:00:00+00:00')"
        " and v = 'x')"
    )


def test_unpartitioned_table_is_one_partition(tables: dict[str, Any]) -> None:
    assert tables["where"]["unpartitioned_old"] == "true"
    assert tables["where"]["unpartitioned_new"] is None
    [step] = tables["where"]["unpartitioned_plan"]
    assert (step["status"], step["reason"]) == ("skipped", "the table is unpartitioned and was written less than "
                                                "1000 h ago (cold_partitions_hours), nothing cold to compact"), step


def test_reference_time_defaults_to_now(tables: dict[str, Any]) -> None:
    assert tables["where"]["nothing_cold"] is None
    assert tables["where"]["everything_cold_now"] == "true"
