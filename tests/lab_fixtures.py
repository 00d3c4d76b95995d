"""Session-scoped fixtures of the lab's real services (PostgreSQL, a Hive Metastore on it, the
Spark standalone cluster, an Iceberg JDBC catalog on that PostgreSQL): started once per pytest
session by the lab's own modules, stopped by their process ids. Registered in tests/conftest.py."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from benchmarks.concurrency import CATALOGS as CONCURRENCY_CATALOGS
from benchmarks.concurrency import CLUSTER_CORES
from lab.cluster import ClusterSpec, JdbcCatalog, SparkCluster, start_cluster
from lab.hive_metastore import HiveMetastore, start_metastore
from lab.postgres import PostgresServer, start_server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = start_server()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.data_dir.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def hive_metastore(postgres_server: PostgresServer,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[HiveMetastore]:
    """A real Hive Metastore 2.3.9 on the session's PostgreSQL server (lab/hive_metastore.py)."""
    metastore = start_metastore(postgres_server, tmp_path_factory.mktemp("hive_metastore"))
    try:
        yield metastore
    finally:
        metastore.stop()
        assert metastore.process.poll() is not None, f"Hive Metastore {metastore.pid} outlived stop()"


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """One cluster for the session, declaring the task slots of the concurrency benchmark's quick
    forms (their gated writers hold theirs), which run side by side, one per catalog
    (tests/lab/test_concurrency_bench.py): that benchmark runs on it too instead of starting a
    cluster of its own. Slots are declared, not CPUs; every other application caps itself with
    spark.cores.max."""
    cluster = start_cluster(tmp_path_factory.mktemp("spark_cluster"),
                            ClusterSpec(worker_cores=CLUSTER_CORES * len(CONCURRENCY_CATALOGS)))
    try:
        yield cluster
    finally:
        cluster.stop()
        assert not cluster.alive(), f"Spark cluster processes {cluster.pids} outlived stop()"


@pytest.fixture(scope="session")
def jdbc_catalog(postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> JdbcCatalog:
    """An Iceberg JDBC catalog on the session's PostgreSQL server, with a warehouse of its own."""
    catalog = JdbcCatalog(postgres_server, tmp_path_factory.mktemp("jdbc_warehouse"))
    catalog.prepare()
    return catalog
