"""Landed verification under clock skew, on real Spark: two JVMs whose clocks disagree.

The writer (tests/integration/skewed_writer.py: the runner, dbt and its Spark driver in one
process) runs under Debian's `faketime`, its clock 55 s behind or ahead of this test's JVM,
which compacts the writer's table just before the runner's attempt. The compaction's snapshot
is what the runner records; the writer's append then commits on top of it, stamped (when the
writer's clock is behind) *before* the snapshot it follows — Iceberg accepts up to a minute —
and its post-hook loses a real conflict. By lineage the append landed: the runner must say so
and not re-run it (a re-run would load batch 2 twice). Both share a PostgreSQL JDBC catalog.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dbt_iceberg_maint.runtime import processes
from dbt_iceberg_maint.runtime._conflict_gate import compaction_sql
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT
from dbt_iceberg_maint.runtime.spark import CatalogSpec, register_catalog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lab.postgres import PostgresServer
    from tests.conftest import DbtProject

pytestmark = [pytest.mark.integration, pytest.mark.lab]

MODEL = "conflict_hooked_append"
SKEW_S = 55  # under Iceberg's one-minute tolerance for a snapshot older than the table's last update


def faketime() -> str:
    """Debian's faketime, installed when missing and possible (as the suite installs PostgreSQL)."""
    if shutil.which("faketime") is None and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-q", "faketime"], capture_output=True, env=env)
    path = shutil.which("faketime")
    if path is None:
        pytest.fail("faketime is not installed and could not be installed (apt-get install faketime)")
    return path


def run_skewed(offset_s: int, spark: SparkSession, dbt_project: DbtProject, postgres: PostgresServer,
               state: Path) -> dict[str, Any]:
    lake = state / "lake"
    schema = f"{dbt_project.schema}_{'behind' if offset_s < 0 else 'ahead'}"  # catalog rows are shared
    properties = {**postgres.spark_catalog_properties(str(lake)), "jdbc.schema-version": "V1",
                  "cache-enabled": "false"}
    env = {**os.environ, **dbt_project.env, "DBT_ICEBERG_MAINT_SCHEMA": schema,
           "DBT_ICEBERG_MAINT_TARGET": "session_jdbc", "DBT_ICEBERG_MAINT_JDBC_URI": postgres.jdbc_uri,
           "DBT_ICEBERG_MAINT_WAREHOUSE": str(lake), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    command = [faketime(), "-f", f"{offset_s:+d}s", sys.executable, "-m", "tests.integration.skewed_writer",
               "--state", str(state), "--catalog", json.dumps(properties)]
    # Its own process group: the writer's Spark JVM goes with it, whatever happens here.
    writer = processes.start(command, state / "writer.log", env=env, cwd=INTEGRATION_PROJECT.parent).process
    try:
        compactor = spark.newSession()  # this JVM's clock; the same catalog rows (named `local`)
        register_catalog(compactor, CatalogSpec(str(lake), properties=properties))
        while not (state / "ready").exists():
            assert writer.poll() is None, (state / "writer.log").read_text()[-4000:]
            time.sleep(0.1)
        table = f"local.{schema}.{MODEL}"
        for remainder in range(3):  # small files to compact, committed by this JVM
            compactor.sql(f"insert into {table} select event_id + {(remainder + 1) * 100000}, user_id, "
                          f"event_type, event_ts, amount, 0 from {table} where loaded_batch = 1 "
                          f"and event_id % 3 = {remainder}")
        compactor.sql(compaction_sql(table)).collect()
        (state / "compacted").touch()
        assert writer.wait(timeout=900) == 0, (state / "writer.log").read_text()[-4000:]
    finally:
        processes.kill(writer)  # the JVM outlives a finished writer briefly
    result = json.loads((state / "report.json").read_text())
    result["counts"] = {r[0]: r[1] for r in compactor.sql(
        f"select loaded_batch, count(*) from local.{schema}.{MODEL} group by 1").collect()}
    result["raw_batch_2"] = compactor.sql(
        f"select count(*) from local.{schema}.raw_events where batch = 2").collect()[0][0]
    return result


@pytest.mark.timeout(1800)  # two JVMs and a dbt build each; about 3 minutes on an idle machine
@pytest.mark.parametrize("offset_s", [-SKEW_S, SKEW_S], ids=["writer_clock_behind", "writer_clock_ahead"])
def test_an_append_whose_post_hook_failed_landed_whatever_the_writers_clock(
    offset_s: int, spark: SparkSession, dbt_project: DbtProject, postgres_server: PostgresServer,
    tmp_path: Path,
) -> None:
    result = run_skewed(offset_s, spark, dbt_project, postgres_server, tmp_path)
    assert result["hook_conflict_reached"] and result["hook_conflict_error"] is None
    snapshots = {s["snapshot_id"]: s for s in result["snapshots"]}
    [append] = [s for s in snapshots.values() if s["app_id"] == result["app_id"] and s["operation"] == "append"
                and snapshots.get(s["parent_id"], {}).get("operation") == "replace"]
    compaction = snapshots[append["parent_id"]]
    assert compaction["app_id"] != result["app_id"]  # the other JVM's snapshot, recorded before the attempt
    # The skew really shows in the log: the append is stamped before (behind) or well after (ahead)
    # the compaction it follows.
    if offset_s < 0:
        assert append["committed_at_ms"] < compaction["committed_at_ms"], (append, compaction)
    else:
        assert append["committed_at_ms"] > compaction["committed_at_ms"] + SKEW_S * 500, (append, compaction)

    [node] = [n for n in result["report"]["nodes"] if n["name"] == MODEL]
    assert [h["status"] for h in node["history"]] == ["error"]  # never re-run
    assert node["kinds"] == ["missing_files_to_delete"]
    assert node["write_landed"] is True, node
    assert node["landed_evidence"]["recorded_snapshot_id"] == compaction["snapshot_id"]
    assert node["landed_evidence"]["snapshot_ids"] == [append["snapshot_id"]]
    assert (node["not_rerun_reason"] or "").startswith("write landed; post-hook failed"), node
    assert result["counts"][2] == result["raw_batch_2"]  # batch 2 exactly once
