"""The lease log and the history table over twenty maintenance runs in a row, on the PostgreSQL
JDBC catalog (docs/leases.md, Growth): maintain_own_tables keeps them within the default policy.
What the runs leave (rows, files, snapshots) does not depend on how the catalog commits, so this
runs on one catalog; tests/integration/test_leases.py proves the leases themselves on PostgreSQL
and on the Hive Metastore."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.maintenance.results import parse_result_lines
from tests.integration.lease_lake import Lake, open_lake

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lab.postgres import PostgresServer
    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def lake(spark: SparkSession, dbt_project: DbtProject, postgres_server: PostgresServer,
         tmp_path_factory: pytest.TempPathFactory) -> Lake:
    return open_lake(spark, dbt_project, tmp_path_factory.mktemp("nightly_lake"), postgres_server)


NIGHTLY_RUNS = 20
# A nightly job's leases are settled by the next night (a TTL after its last lease row). Here the
# next run starts seconds later: the runs take leases of 15 s, and each waits until the previous
# run's leases have settled. A step must end within the TTL: 8 s was too short in a lab run beside
# the other lab forms (a step of maintain_own_tables found its lease expired: `lease lost`).
NIGHTLY_TTL_S = 15
NIGHTLY_VARS = json.dumps({"dbt_iceberg_maint_lease_minutes": NIGHTLY_TTL_S / 60})


@pytest.mark.lab  # twenty maintenance runs in a row, a lease TTL apart (about ten minutes)
@pytest.mark.timeout(2400)
def test_twenty_runs_leave_the_own_tables_within_the_default_policy(lake: Lake, spark: SparkSession) -> None:
    """Each run maintains a table and ends with maintain_own_tables(); afterwards a dry run of
    maintain() with the default policy finds nothing due on the lease log or the history table."""
    schema = lake.schema
    tables = [f"{schema}.nightly_a"]
    for table in tables:
        spark.sql(f"create table if not exists local.{table} (id bigint) using iceberg")
        spark.sql(f"insert into local.{table} values (1)")
    settled_at = 0.0
    for run in range(NIGHTLY_RUNS):
        time.sleep(max(0.0, settled_at - time.time()))
        night = lake.dbt("run-operation", "iceberg_maint_nightly_run", "--args",
                         json.dumps({"tables": tables, "operations": ["expire_snapshots"]}),
                         "--vars", NIGHTLY_VARS, run_id=f"night-{run}")
        settled_at = time.time() + NIGHTLY_TTL_S + 1
        assert night.success, night.exception
        statuses = {(r.table, r.operation): r.status for r in parse_result_lines(night.log_messages)}
        assert all(statuses[(table, "expire_snapshots")] == "success" for table in tables), statuses
        assert "lease" not in " ".join(str(r.reason) for r in parse_result_lines(night.log_messages))
    own = [f"{schema}.iceberg_maint_leases", f"{schema}.iceberg_maint_history"]
    for table in own:
        planned = lake.dbt("run-operation", "dbt_iceberg_maint.maintain", "--args",
                           json.dumps({"relation": table, "dry_run": True}), run_id="after-twenty")
        assert planned.success, planned.exception
        # Orphan removal has no threshold (due every run unless interval_hours says otherwise): what
        # piles up is counted by the other three.
        due = [r for r in parse_result_lines(planned.log_messages)
               if r.status != "skipped" and r.operation != "remove_orphan_files"]
        assert due == [], due
    # The log holds the last runs' rows only, not twenty runs' worth.
    spark.sql(f"refresh table local.{own[0]}")
    per_key = dict(spark.sql(f"select table_name, count(*) from local.{own[0]} group by table_name").collect())
    assert all(per_key.get(table.rsplit(".", 1)[-1], 0) < 5 for table in tables), per_key
