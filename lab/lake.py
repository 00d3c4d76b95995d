"""Iceberg tables in varied states, built with Spark SQL: what the planner must read right."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _insert(spark: SparkSession, table: str, rows: str, times: int) -> None:
    for _ in range(times):
        spark.sql(f"insert into {table} values {rows}")


def fresh(spark: SparkSession, table: str) -> None:
    spark.sql(f"create table {table} (id bigint, category string) using iceberg partitioned by (category)")
    spark.sql(f"insert into {table} values (1, 'a'), (2, 'b')")


def small_files(spark: SparkSession, table: str) -> None:
    """Six appends into two identity partitions: 6 small files in each, many manifests."""
    spark.sql(f"create table {table} (id bigint, category string) using iceberg partitioned by (category)")
    _insert(spark, table, "(1, 'a'), (2, 'b')", 6)


def deletes(spark: SparkSession, table: str) -> None:
    """Merge-on-read deletes (format v2): one position delete file per data file (Iceberg
    folds a file's earlier deletes into its new delete file, so six data files make six)."""
    spark.sql(f"create table {table} (id bigint, category string) using iceberg "
              "tblproperties ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    for i in range(6):
        spark.sql(f"insert into {table} select id, 'c' from range({i * 10}, {i * 10 + 10})")
    for i in range(6):
        spark.sql(f"delete from {table} where id = {i * 10 + 3}")


def create_v3(spark: SparkSession, table: str, partition_column: str = "category") -> None:
    """An empty format v3 table (id bigint, `partition_column` string, partitioned by it) whose
    deletes are merge-on-read: each writes deletion vectors."""
    spark.sql(f"create or replace table {table} (id bigint, {partition_column} string) using iceberg "
              f"partitioned by ({partition_column}) "
              "tblproperties ('format-version'='3', 'write.delete.mode'='merge-on-read')")


def deletion_vectors(spark: SparkSession, table: str) -> None:
    """Merge-on-read deletes on format v3: deletion vectors (Puffin), one per data file, several
    in one Puffin file (so they share its path and size), the second delete's folded into the first."""
    create_v3(spark, table)
    for i in range(6):
        spark.sql(f"insert into {table} select id, 'd' from range({i * 10}, {i * 10 + 10})")
    spark.sql(f"delete from {table} where id % 10 = 3")
    spark.sql(f"delete from {table} where id % 10 = 4")


def many_snapshots(spark: SparkSession, table: str) -> None:
    spark.sql(f"create table {table} (id bigint) using iceberg")
    _insert(spark, table, "(1)", 8)


def evolved(spark: SparkSession, table: str) -> None:
    """days(ts) first, then an identity field added: files under two specs."""
    spark.sql(f"create table {table} (id bigint, ts timestamp, kind string) using iceberg partitioned by (days(ts))")
    _insert(spark, table, "(1, timestamp '2024-01-01 10:00:00', 'x'), (2, timestamp '2024-01-02 10:00:00', 'y')", 3)
    spark.sql(f"alter table {table} add partition field kind")
    _insert(spark, table, "(3, timestamp '2024-01-01 11:00:00', 'x'), (4, timestamp '2024-01-03 11:00:00', 'y')", 3)


def unpartitioned(spark: SparkSession, table: str) -> None:
    spark.sql(f"create table {table} (id bigint, name string) using iceberg "
              "tblproperties ('write.target-file-size-bytes'='700')")
    _insert(spark, table, "(1, 'x')", 6)
    spark.sql(f"insert into {table} select id, repeat('y', 50) from range(200)")


def empty(spark: SparkSession, table: str) -> None:
    spark.sql(f"create table {table} (id bigint, day date) using iceberg partitioned by (day)")


def cold_days(spark: SparkSession, table: str) -> None:
    """Day partitions on a date column; written, then left alone (cold after a short quiet time)."""
    spark.sql(f"create table {table} (id bigint, day date) using iceberg partitioned by (day)")
    _insert(spark, table, "(1, date '2024-03-01'), (2, date '2024-03-02')", 5)


def gc_disabled(spark: SparkSession, table: str) -> None:
    spark.sql(f"create table {table} (id bigint) using iceberg tblproperties ('gc.enabled'='false')")
    _insert(spark, table, "(1)", 7)


def maintained(spark: SparkSession, table: str) -> None:
    """Written, then compacted (a `replace` snapshot), and nothing written since."""
    small_files(spark, table)
    catalog, name = table.split(".", 1)
    spark.sql(f"call {catalog}.system.rewrite_data_files(table => '{name}', "
              "options => map('min-input-files', '2'))")


VARIED: dict[str, Callable[[SparkSession, str], None]] = {
    "fresh": fresh, "small_files": small_files, "deletes": deletes, "deletion_vectors": deletion_vectors,
    "many_snapshots": many_snapshots,
    "evolved": evolved, "unpartitioned": unpartitioned, "empty": empty, "cold_days": cold_days,
    "gc_disabled": gc_disabled, "maintained": maintained,
}


def build_varied(spark: SparkSession, catalog: str, schema: str, qualify: bool = False) -> list[str]:
    """Every state of VARIED as `<catalog>.<schema>.<state>`; returns `schema.state` names
    (`catalog.schema.state` with qualify)."""
    spark.sql(f"create namespace if not exists {catalog}.{schema}")
    for name, build in VARIED.items():
        build(spark, f"{catalog}.{schema}.{name}")
    time.sleep(1.5)  # lets cold_days go quiet for the short cold_partitions_hours used by tests
    return [f"{catalog}.{schema}.{name}" if qualify else f"{schema}.{name}" for name in VARIED]
