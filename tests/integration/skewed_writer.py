"""A dbt writer in its own process and JVM, run under `faketime` by test_landed_clock_skew.py.

The whole process (Python runner, dbt, the Spark driver) sees a clock `--skew` off the test's:
its commits are stamped with that clock, while the compaction it follows is committed by the
test's JVM. Phases, each ended by a marker file in `--state`:

1. setup: build `raw_events` and the append model (batch 1) on the JDBC catalog, create the
   audit table the model's post-hook MERGEs into and add small files to it. The conflict gate
   (dbt_iceberg_maint/runtime/_conflict_gate.py) then makes the post-hook's MERGE lose a real conflict to
   a compaction of the audit table from another session of this process: the post-hook fails
   after the append committed.
2. `ready` → wait for `compacted`: the test compacts the append model's table meanwhile, so the
   snapshot the runner records before its attempt is the other JVM's compaction. The gate is
   armed only then, so that its wait starts with the run.
3. run: `run_dbt_with_retries` on the append model (batch 2); the report goes to `report.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from dbt_iceberg_maint.runner import run_dbt_with_retries
from dbt_iceberg_maint.runtime._conflict_gate import ConflictGate, compaction_sql
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT, invoke_dbt
from dbt_iceberg_maint.runtime.spark import CatalogSpec, register_catalog, resolve_iceberg_runtime, start_session
from lab.postgres import JDBC_JAR

MODEL, AUDIT = "conflict_hooked_append", "conflict_hooked_append_audit"
SCENARIO = "{conflict_hook_scenario: true, batch: %d}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--catalog", required=True, help="JSON: spark.sql.catalog.local.* properties")
    args = parser.parse_args()
    state: Path = args.state
    properties = json.loads(args.catalog)
    schema = os.environ["DBT_ICEBERG_MAINT_SCHEMA"]

    # The session dbt-spark's `session` method then reuses (the profile's `session_jdbc` target
    # names the same catalog); started here to put the PostgreSQL driver on its class path.
    jars = ",".join([*resolve_iceberg_runtime().jars, str(JDBC_JAR)])
    spark = start_session(properties["warehouse"], catalog_properties=properties, extra_conf={"spark.jars": jars})
    spark.sparkContext.setLogLevel("ERROR")
    gate = ConflictGate(state / "gate", timeout_seconds=600)
    gate.register(spark)  # the model's post-hook calls the gate (unarmed: it lets every row pass)
    audit = f"local.{schema}.{AUDIT}"
    spark.sql(f"create namespace if not exists local.{schema}")
    spark.sql(f"create table {audit} (event_id bigint, day date, loaded_batch int) using iceberg partitioned by (day)")
    built = invoke_dbt(["build", "--select", "raw_events", MODEL, "--vars", SCENARIO % 1])
    assert built.success, [(n.name, n.message) for n in built.failed_nodes()] or built.exception
    for remainder in range(3):  # small files in every partition, for the compaction to replace
        spark.sql(f"insert into {audit} select event_id + 100000, day, 0 from {audit} "
                  f"where loaded_batch = 1 and event_id % 3 = {remainder}")
    maintenance = spark.newSession()
    register_catalog(maintenance, CatalogSpec(properties["warehouse"], properties=properties))

    (state / "ready").touch()
    deadline = time.monotonic() + 600
    while not (state / "compacted").exists():
        if time.monotonic() > deadline:
            raise SystemExit("the test never compacted the model's table")
        time.sleep(0.05)
    gate.arm(AUDIT)
    hook_conflict = gate.commit_when_reached(AUDIT, maintenance, compaction_sql(audit))

    report = run_dbt_with_retries(["--select", MODEL, "--vars", SCENARIO % 2], project_dir=INTEGRATION_PROJECT,
                                  backoff=lambda attempt: 0.1, sleep=lambda seconds: None)
    hook_conflict.join(timeout=60)
    snapshots = [row.asDict() for row in spark.sql(
        f"select snapshot_id, parent_id, unix_millis(committed_at) as committed_at_ms, operation, "
        f"summary['spark.app.id'] as app_id from local.{schema}.{MODEL}.snapshots").collect()]
    (state / "report.json").write_text(json.dumps({
        "report": report.to_dict(), "hook_conflict_reached": hook_conflict.reached,
        "hook_conflict_error": None if hook_conflict.error is None else str(hook_conflict.error),
        "snapshots": snapshots, "app_id": spark.sparkContext.applicationId}))


if __name__ == "__main__":
    main()
