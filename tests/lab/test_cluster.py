"""The lab's Spark standalone cluster: a Thrift Server application on it with the PostgreSQL JDBC
catalog, pyiceberg reading what Spark wrote, and nothing left running when the starter dies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dbt_iceberg_maint.runtime.processes import group_alive
from lab.cluster import JdbcCatalog, SparkCluster, start_cluster_thrift_server

pytestmark = [pytest.mark.integration, pytest.mark.lab]

ROOT = Path(__file__).resolve().parents[2]


def test_thrift_server_runs_on_the_cluster_with_the_jdbc_catalog(spark_cluster: SparkCluster,
                                                                 jdbc_catalog: JdbcCatalog, tmp_path: Path) -> None:
    from pyhive import hive

    server = start_cluster_thrift_server(spark_cluster, jdbc_catalog, tmp_path / "server", name="cluster-test")
    try:
        connection = hive.connect(host=server.host, port=server.port, username="pytest")
        cursor = connection.cursor()
        cursor.execute("create namespace if not exists lab_cluster")
        cursor.execute("create table lab_cluster.days (id bigint, day date) using iceberg partitioned by (day)")
        cursor.execute("insert into lab_cluster.days select id, date_add(date '2024-01-01', cast(id % 3 as int)) "
                       "from range(30)")
        cursor.execute("select count(*), count(distinct day) from lab_cluster.days")
        assert cursor.fetchall() == [(30, 3)]
        connection.close()
    finally:
        server.stop()
    assert not group_alive(server.pid)
    # The same rows, read without Spark through pyiceberg's SqlCatalog on the same database.
    table = jdbc_catalog.metadata().load("lab_cluster.days")
    assert table.scan().to_arrow().num_rows == 30
    # The insert ran in an executor the worker launched for this application, with the JDBC jar.
    executors = list((spark_cluster.state_dir / "work").glob("app-*/*/postgresql.jar"))
    assert executors, f"no executor of the Thrift Server ran on the worker ({spark_cluster.state_dir / 'work'})"


STARTER = """
import json, sys, time
from lab.cluster import start_cluster
from lab.postgres import start_server
cluster = start_cluster(sys.argv[1])
postgres = start_server()
print(json.dumps({"cluster": list(cluster.pids), "postgres": postgres.pid}), flush=True)
time.sleep(600)
"""


def test_a_killed_starter_leaves_no_cluster_or_postgres(tmp_path: Path) -> None:
    # Raw on purpose: the starter is the process under test (SIGKILLed alone, its pids read from
    # its stdout); what it starts goes through lab.cluster and lab.postgres.
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path / "cluster")], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert starter.stdout is not None
        line = starter.stdout.readline()  # blocks until the components are up (or the starter fails)
        assert line, f"the starter exited with {starter.wait(timeout=30)} before reporting its processes"
        pids = json.loads(line)
    finally:
        starter.send_signal(signal.SIGKILL)
        starter.wait(timeout=30)
    deadline = time.monotonic() + 60
    alive = [*pids["cluster"], pids["postgres"]]
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in pids["cluster"] if group_alive(pid)] + [
            pid for pid in [pids["postgres"]] if _running(pid)]
        time.sleep(0.2)
    assert not alive, f"processes {alive} outlived their SIGKILLed starter by 60 s"


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for init to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"
