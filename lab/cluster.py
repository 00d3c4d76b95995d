"""A Spark standalone cluster (master + one worker) from pyspark's own jars, and a Spark Thrift
Server running on it with the PostgreSQL-backed JDBC Iceberg catalog.

Every process binds its ports itself (port 0) and the bound ports are read from its own log, so
no other process can take a port between choosing and binding it. Each process is the leader of
its own process group, started under a parent-death signal (SIGKILL of the test process still
ends it), and is stopped by its own pid. The worker declares more cores than the machine has so
that several applications with `spark.cores.max=1` run at once (writers beside maintenance).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from dbt_iceberg_maint.metadata.catalog import CatalogConfig, open_catalog
from dbt_iceberg_maint.metadata.catalog_tables import MetadataCatalog
from dbt_iceberg_maint.runtime import processes
from dbt_iceberg_maint.runtime.spark import DEFAULT_CATALOG, check_java
from dbt_iceberg_maint.runtime.thrift_server import LOOPBACK, ThriftServer, pyspark_home, start_thrift_server
from lab.hive_metastore import HiveMetastore
from lab.postgres import JDBC_JAR, PostgresServer

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
MASTER_URL_LINE = re.compile(r"Starting Spark master at (spark://[\w.\-]+:\d+)")
WORKER_REGISTERED_LINE = re.compile(r"Successfully registered with master")
START_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ClusterSpec:
    """What the cluster declares: `worker_cores` may exceed the machine's cores (each application
    takes one with `spark.cores.max=1`); `worker_memory` bounds all executors together."""

    worker_cores: int = 3
    worker_memory: str = "3g"
    daemon_memory: str = "256m"  # master and worker JVMs themselves (SPARK_DAEMON_MEMORY)

    def master_command(self, spark_class: Path) -> list[str]:
        return [str(spark_class), MASTER_CLASS, "--host", LOOPBACK, "--port", "0", "--webui-port", "0"]

    def worker_command(self, spark_class: Path, master_url: str) -> list[str]:
        return [str(spark_class), WORKER_CLASS, "--host", LOOPBACK, "--port", "0", "--webui-port", "0",
                "--cores", str(self.worker_cores), "--memory", self.worker_memory, master_url]


def application_conf(executor_memory: str = "512m", cores: int = 1) -> dict[str, str]:
    """Spark settings for one application on the cluster: `cores` cores, one small executor."""
    return {"spark.cores.max": str(cores), "spark.executor.cores": str(cores),
            "spark.executor.memory": executor_memory, "spark.sql.shuffle.partitions": "2",
            "spark.sql.adaptive.enabled": "true"}


@dataclass(frozen=True)
class JdbcCatalog:
    """An Iceberg JDBC catalog on the lab's PostgreSQL server; `warehouse` holds the files."""

    postgres: PostgresServer
    warehouse: Path

    def properties(self) -> dict[str, str]:
        return self.postgres.spark_catalog_properties(str(self.warehouse))

    def metadata(self, name: str = DEFAULT_CATALOG) -> MetadataCatalog:
        """The same catalog without Spark, opened the way the product's CLI opens it (pyiceberg;
        Spark's JdbcCatalog keys rows by catalog name, so the name must be Spark's)."""
        return open_catalog(CatalogConfig(name, self.properties()))

    def prepare(self, name: str = DEFAULT_CATALOG) -> None:
        """Thrift clients run `USE default` on connect: the namespace must exist beforehand."""
        self.warehouse.mkdir(parents=True, exist_ok=True)
        self.metadata(name).create_namespace("default")


@dataclass(frozen=True)
class MetastoreCatalog:
    """An Iceberg Hive catalog on the lab's Hive Metastore (lab/hive_metastore.py); `warehouse`
    holds the files (`<namespace>.db/<table>`)."""

    metastore: HiveMetastore
    warehouse: Path

    def properties(self) -> dict[str, str]:
        return self.metastore.spark_catalog_properties(str(self.warehouse))

    def metadata(self, name: str = DEFAULT_CATALOG) -> MetadataCatalog:
        """The same catalog without Spark: pyiceberg's Hive catalog, as the product's CLI opens it."""
        return open_catalog(CatalogConfig(name, self.properties()))

    def prepare(self, name: str = DEFAULT_CATALOG) -> None:
        """The metastore always has the `default` namespace thrift clients `USE` on connect."""
        self.warehouse.mkdir(parents=True, exist_ok=True)


class LabCatalog(Protocol):
    """A catalog the lab's applications share (JdbcCatalog, MetastoreCatalog)."""

    @property
    def warehouse(self) -> Path: ...

    def properties(self) -> dict[str, str]: ...

    def metadata(self, name: str = DEFAULT_CATALOG) -> MetadataCatalog: ...

    def prepare(self, name: str = DEFAULT_CATALOG) -> None: ...


@dataclass
class SparkCluster:
    """A running master + worker; `stop()` ends both process groups (the worker's executors live
    in its group: none outlives it)."""

    spec: ClusterSpec
    state_dir: Path
    master: processes.Started
    worker: processes.Started | None = None
    master_url: str = ""
    stopped: bool = field(default=False)

    @property
    def master_log(self) -> Path:
        return self.master.log

    @property
    def worker_log(self) -> Path:
        return self.state_dir / "worker.log"

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(p.pid for p in (self.master, self.worker) if p is not None)

    def stop(self) -> None:
        # Worker first: it kills its executors when it is told to stop.
        for started in (self.worker, self.master):
            if started is not None:
                processes.stop(started.process)
        self.stopped = True

    def alive(self) -> bool:
        return any(processes.group_alive(pid) for pid in self.pids)


def _wait_for_line(started: processes.Started, pattern: re.Pattern[str], what: str, timeout_s: float
                   ) -> re.Match[str]:
    """The first match of `pattern` in this process's part of its (appended) log."""
    return processes.wait_until(
        lambda: pattern.search(started.output()), started, timeout_s,
        exited=lambda code: f"the Spark {what} exited with code {code}",
        timed_out=lambda: f"the Spark {what} did not report {pattern.pattern!r}")


def start_cluster(state_dir: str | os.PathLike[str] | None = None, spec: ClusterSpec | None = None,
                  timeout_s: float = START_TIMEOUT_S) -> SparkCluster:
    """Start a master, then a worker registered with it; return once the worker is registered.
    Must be called from the main thread (the parent-death signal follows the starting thread)."""
    check_java()
    spec = spec or ClusterSpec()
    state = Path(state_dir or tempfile.mkdtemp(prefix="lab-cluster-")).resolve()
    state.mkdir(parents=True, exist_ok=True)
    spark_class = pyspark_home() / "bin" / "spark-class"
    env = {**os.environ, "SPARK_LOCAL_IP": LOOPBACK, "SPARK_DAEMON_MEMORY": spec.daemon_memory,
           "SPARK_HOME": str(pyspark_home()), "SPARK_WORKER_DIR": str(state / "work"),
           "SPARK_LOG_DIR": str(state)}
    env.pop("PYSPARK_GATEWAY_PORT", None)

    def spawn(command: list[str], log: str) -> processes.Started:
        return processes.start(command, state / log, env=env, cwd=state, with_parent=True)

    cluster = SparkCluster(spec, state, spawn(spec.master_command(spark_class), "master.log"))
    try:
        cluster.master_url = _wait_for_line(cluster.master, MASTER_URL_LINE, "master", timeout_s).group(1)
        cluster.worker = spawn(spec.worker_command(spark_class, cluster.master_url), "worker.log")
        _wait_for_line(cluster.worker, WORKER_REGISTERED_LINE, "worker", timeout_s)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def start_cluster_thrift_server(cluster: SparkCluster, catalog: LabCatalog, state_dir: str | os.PathLike[str],
                                *, name: str, driver_memory: str = "768m", executor_memory: str = "512m",
                                with_ui: bool = False, extra_conf: Mapping[str, str] | None = None) -> ThriftServer:
    """A Spark Thrift Server as its own application on the cluster, the lab's catalog as its
    default catalog (the PostgreSQL driver, which a JDBC catalog needs, on the driver class path
    and in spark.jars)."""
    conf = {**application_conf(executor_memory), "spark.app.name": f"lab-{name}", **(extra_conf or {})}
    catalog.prepare()
    return start_thrift_server(catalog.warehouse, state_dir, catalog_properties=catalog.properties(),
                               master=cluster.master_url, extra_jars=(str(JDBC_JAR),), driver_memory=driver_memory,
                               with_ui=with_ui, extra_conf=conf, stop_with_parent=True)
