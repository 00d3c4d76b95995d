"""Shared fixtures: one local Spark + Iceberg session per pytest session (one JVM)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# The conflict gate's one import for the new tests (it may move to tests/support): they take it
# through the `conflict_gate` fixture below.
from dbt_iceberg_maint._conflict_gate import ConflictGate
from dbt_iceberg_maint.invoke import DbtInvocation, invoke_dbt
from dbt_iceberg_maint.spark import WAREHOUSE_ENV, resolve_iceberg_runtime, start_session, switch_warehouse
from lab.postgres import ensure_jdbc_jar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Session-scoped lab fixtures (PostgreSQL, the Spark standalone cluster, the JDBC catalog),
# registered once here: importing them into several modules would start each several times.
pytest_plugins = ["lab.postgres", "lab.cluster"]


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    # The PostgreSQL JDBC driver must be on the driver's classpath from the start (a JDBC
    # catalog is added to this session by tests/integration/test_metadata_jdbc.py).
    jdbc_jar = ensure_jdbc_jar()
    extra = {"spark.jars": ",".join([*resolve_iceberg_runtime().jars, str(jdbc_jar)])} if jdbc_jar else None
    session = start_session(tmp_path_factory.mktemp("initial_warehouse"), extra_conf=extra)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def installed_package() -> None:
    """`dbt deps` once: the integration project installs this package (packages.yml: local ../)."""
    invocation = invoke_dbt(["deps", "--quiet"])
    assert invocation.success, f"dbt deps failed: {invocation.exception}"


@pytest.fixture(scope="module")
def warehouse(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh warehouse for this test module, made the session's default catalog."""
    path = tmp_path_factory.mktemp("warehouse")
    switch_warehouse(spark, path)
    previous = os.environ.get(WAREHOUSE_ENV)
    os.environ[WAREHOUSE_ENV] = str(path.resolve())
    yield path
    if previous is None:
        os.environ.pop(WAREHOUSE_ENV, None)
    else:
        os.environ[WAREHOUSE_ENV] = previous


class DbtProject:
    """The integration dbt project, invoked in-process against the module's warehouse."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self.env = {"DBT_ICEBERG_MAINT_SCHEMA": schema}

    def __call__(self, *args: str, expect_success: bool = True) -> DbtInvocation:
        invocation = invoke_dbt([*args], env=self.env)
        if expect_success and not invocation.success:
            failures = [(n.name, n.message) for n in invocation.failed_nodes()]
            raise AssertionError(f"dbt {' '.join(args)} failed: {failures or invocation.exception}")
        return invocation

    def table(self, name: str) -> str:
        return f"local.{self.schema}.{name}"


@pytest.fixture(scope="module")
def dbt_project(warehouse: Path, installed_package: None, request: pytest.FixtureRequest) -> DbtProject:
    return DbtProject(schema=f"it_{request.module.__name__.rsplit('.', 1)[-1]}")


@pytest.fixture(scope="module")
def conflict_gate(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> ConflictGate:
    """The conflict gate UDF registered on the shared session, with this module's own markers."""
    gate = ConflictGate(tmp_path_factory.mktemp("gate"))
    gate.register(spark)
    return gate
