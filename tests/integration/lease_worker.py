"""A maintenance job's process for tests/integration/test_leases.py: its own Spark driver (JVM)
on the shared catalog (PostgreSQL's JDBC catalog or the Hive Metastore, as the session's `local`
catalog or, with `--session-catalog`, as Spark's session catalog), running the dbt commands the
test hands it.

The test writes `cmd-<n>.json` ({"args": [...], "start_ms": epoch ms or null, "run_id": ...})
into `--state`; the worker waits until start_ms (so several workers start together), runs dbt
in-process (dbt-spark `session` reuses this process's SparkSession) with that run id, and writes
`result-<n>.json` (success, marker lines, every statement with its start and end). A job with
`fleet` ({"select": [...], "operations": [...], "dbt_args": [...]}) instead runs the fleet engine
(run_fleet at concurrency 1: its steps' dbt invocations in this process, planned from the
catalog's metadata through pyiceberg) and its result holds the engine's report. `ready` is
written once the session is up and the project parsed (with `--vars`: a job with the same vars
starts without parsing again); `stop` ends the loop.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from dbt_iceberg_maint.fleet import run_fleet
from dbt_iceberg_maint.maintenance.leases import RUN_ID_ENV
from dbt_iceberg_maint.metadata.catalog import CatalogConfig
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT, invoke_dbt
from dbt_iceberg_maint.runtime.spark import resolve_iceberg_runtime, start_session
from lab.postgres import JDBC_JAR

MARKER_PREFIXES = ("ICEBERG_MAINT_", "Encountered an error")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--catalog", required=True, help="JSON: spark.sql.catalog.local.* properties")
    parser.add_argument("--vars", default="{}", help="dbt --vars of the first jobs: parsed with them up front")
    parser.add_argument("--session-catalog", help="JSON: Spark conf making the catalog Spark's session catalog "
                        "(SparkSessionCatalog on a metastore; the dbt target is then session_hive)")
    args = parser.parse_args()
    state: Path = args.state
    properties = json.loads(args.catalog)
    jars = ",".join([*resolve_iceberg_runtime().jars, str(JDBC_JAR)])
    session_catalog = json.loads(args.session_catalog or "{}")  # the same tables by two-part names
    spark = start_session(properties["warehouse"], catalog_name="spark_catalog" if session_catalog else None,
                          catalog_properties=properties, extra_conf={"spark.jars": jars, **session_catalog})
    spark.sparkContext.setLogLevel("ERROR")
    parsed = invoke_dbt(["parse", "--vars", args.vars])
    assert parsed.success, parsed.exception
    # What the worker's dbt names resolve in: the test checks the session-catalog workers' really are.
    session_catalog_class = spark.conf.get("spark.sql.catalog.spark_catalog", "")
    (state / "ready.tmp").write_text(json.dumps({"current_catalog": spark.catalog.currentCatalog(),
                                                 "session_catalog": session_catalog_class}))
    (state / "ready.tmp").rename(state / "ready")
    number = 0
    while not (state / "stop").exists():
        command = state / f"cmd-{number}.json"
        if not command.exists():
            time.sleep(0.05)
            continue
        job = json.loads(command.read_text())
        if job.get("start_ms"):
            time.sleep(max(0.0, job["start_ms"] / 1000 - time.time()))
        if job.get("fleet"):
            fleet = job["fleet"]
            report = run_fleet(fleet["select"], fleet["operations"], force=True, project_dir=INTEGRATION_PROJECT,
                               dbt_args=fleet["dbt_args"], env={RUN_ID_ENV: job["run_id"]},
                               catalog=CatalogConfig("local", properties).check())
            result = {"success": report.exit_code == 0, "exception": None, "report": report.to_dict()}
        else:
            invocation = invoke_dbt(job["args"], env={RUN_ID_ENV: job["run_id"]})
            result = {"success": invocation.success, "exception": invocation.exception,
                      "messages": [m for m in invocation.log_messages if m.startswith(MARKER_PREFIXES)],
                      "queries": invocation.sql_statements}
        # Written whole, then renamed: the test reads a result as soon as its name exists.
        (state / f"result-{number}.json.tmp").write_text(json.dumps(result))
        (state / f"result-{number}.json.tmp").rename(state / f"result-{number}.json")
        number += 1


if __name__ == "__main__":
    main()
