"""Another job on the embedded default catalog, in its own process and JVM
(test_embedded_views.py): it opens the warehouse's SQLite catalog, waits for the `go` marker,
then appends `--commits` single-row batches to one table while the test's own session does the
same. Prints one JSON line: the commits that succeeded and the errors of the others."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from dbt_iceberg_maint.runtime.spark import start_session


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--commits", type=int, required=True)
    parser.add_argument("--first-id", type=int, required=True)
    parser.add_argument("--go", type=Path, required=True)
    args = parser.parse_args()
    spark = start_session(args.warehouse, app_name="embedded_writer", master="local[1]")
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql(f"select count(*) from {args.table}").collect()  # the catalog is open before the race
    (args.go.parent / "writer_ready").touch()
    deadline = time.monotonic() + 300
    while not args.go.exists():
        if time.monotonic() > deadline:
            raise SystemExit("the test never started the race")
        time.sleep(0.02)
    committed, errors = 0, []
    for offset in range(args.commits):
        try:
            spark.sql(f"insert into {args.table} values ({args.first_id + offset}, 'writer')")
            committed += 1
        except Exception as exc:  # reported, then judged by the test
            errors.append(str(exc).splitlines()[0][:500])
    print(json.dumps({"committed": committed, "errors": errors}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
