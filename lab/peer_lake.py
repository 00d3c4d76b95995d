"""The peers benchmark's lake (benchmarks/peers.py), built and read with Spark in a process of its
own, so that no JVM holds the warehouse's SQLite catalog open while the lake is copied, restored or
maintained by another tool: `python -m lab.peer_lake build|checksum --warehouse DIR ...` prints one
JSON document on stdout.

- `build`: namespace NAMESPACE, tables t00..t<N-1>, each `APPENDS` small appends (one INSERT of
  10 rows, one data file; t00 is partitioned by day and each of its appends spans 5 days: 5 files).
- `checksum`: per table its row count and an order-independent hash of its rows (the sum of every
  row's `xxhash64` over all columns), computed the same way whichever tool left the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAMESPACE = "lake"
ROWS_PER_APPEND = 10
DAYS_PER_APPEND = 5


def table_names(tables: int) -> list[str]:
    return [f"t{i:02d}" for i in range(tables)]


def build(spark: SparkSession, tables: int, appends: int) -> dict[str, Any]:
    spark.sql(f"create namespace if not exists {NAMESPACE}")
    for index, name in enumerate(table_names(tables)):
        table = f"{NAMESPACE}.{name}"
        partitioned = index == 0
        spark.sql(f"create table {table} (id bigint, ts timestamp, payload string) using iceberg "
                  + ("partitioned by (days(ts)) " if partitioned else "")
                  + "tblproperties ('format-version'='2')")
        for batch in range(appends):
            first = batch * ROWS_PER_APPEND
            # range(start, end, step, 1): one Spark partition, so one file per append (per day).
            spark.sql(f"insert into {table} select id, timestamp'2024-01-01 00:00:00' + make_interval(0, 0, 0, "
                      f"cast(id % {DAYS_PER_APPEND} as int), 1) as ts, concat('{name}-row-', id) as payload "
                      f"from range({first}, {first + ROWS_PER_APPEND}, 1, 1)")
    return {"namespace": NAMESPACE, "tables": table_names(tables), "appends": appends}


def checksum(spark: SparkSession, tables: int) -> dict[str, dict[str, Any]]:
    found = {}
    for name in table_names(tables):
        table = f"{NAMESPACE}.{name}"
        columns = ", ".join(f"`{c}`" for c in spark.table(table).columns)
        count, digest = spark.sql(f"select count(*), sum(cast(xxhash64({columns}) as decimal(38, 0))) "
                                  f"from {table}").first()  # type: ignore[misc]
        found[name] = {"rows": int(count), "hash": str(digest)}
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.peer_lake")
    parser.add_argument("job", choices=("build", "checksum"))
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--tables", type=int, required=True)
    parser.add_argument("--appends", type=int, default=0)
    args = parser.parse_args(argv)
    from dbt_iceberg_maint.runtime.spark import start_session

    spark = start_session(args.warehouse, app_name=f"peer_lake_{args.job}", extra_conf={"spark.driver.memory": "2g"})
    try:
        found = build(spark, args.tables, args.appends) if args.job == "build" else checksum(spark, args.tables)
    finally:
        spark.stop()
    sys.stdout.write(json.dumps(found) + "\n")


if __name__ == "__main__":
    main()
