"""The dbt Cloud path: one real Spark Thrift Server per pytest session, started by the suite.

dbt reaches it with dbt-spark `method: thrift` (the profile's `thrift` target) and can only
send SQL; tests read table state back through the server with their own PyHive connection.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dbt_iceberg_maint.runtime.invoke import DbtInvocation, invoke_dbt
from dbt_iceberg_maint.runtime.thrift_server import ThriftServer, start_thrift_server
from lab.gate import build_gate_jar
from tests.conftest import PACKAGES_PATH_ENV, invocation_env


@pytest.fixture(scope="session")
def thrift_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThriftServer]:
    root = tmp_path_factory.mktemp("thrift_server")
    started = time.monotonic()
    server = start_thrift_server(root / "warehouse", root / "state", with_ui=True, stop_with_parent=True)
    print(f"\nSpark Thrift Server on {server.host}:{server.port} ready in {time.monotonic() - started:.1f} s")
    try:
        yield server
    finally:
        server.stop()
        # Nothing of the server may outlive the suite.
        try:
            os.killpg(server.pid, 0)
            leftover = True
        except ProcessLookupError:
            leftover = False
        assert not leftover, f"Spark Thrift Server process group {server.pid} is still alive after stop()"


@pytest.fixture(scope="session")
def thrift_gate_jar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The conflict tests' gate UDF (lab/gate.py), compiled against the Hive jar pyspark ships."""
    return build_gate_jar(tmp_path_factory.mktemp("thrift_gate"))


def running_statements(server: ThriftServer) -> list[str]:
    """Statements the server is executing now (planned, running), from the Spark UI REST API."""
    assert server.ui_url is not None, "start the server with with_ui=True"
    with urllib.request.urlopen(f"{server.ui_url}/api/v1/applications", timeout=10) as response:
        app_id = json.load(response)[0]["id"]
    with urllib.request.urlopen(
        f"{server.ui_url}/api/v1/applications/{app_id}/sql?details=false&length=100000", timeout=10
    ) as response:
        executions = json.load(response)
    return [e.get("description", "") for e in executions if e.get("status") == "RUNNING"]


def write_thrift_project(root: Path, name: str, server: ThriftServer, vars_yaml: str) -> None:
    """A dbt project of its own at `root` (its models folder, the package installed from this
    repository) whose profile reaches `server` over thrift (schema `<name>_models`)."""
    (root / "models").mkdir()
    (root / "dbt_project.yml").write_text(f"name: {name}\nversion: '1.0'\nconfig-version: 2\nprofile: {name}\n"
                                          f"vars: {vars_yaml}\n")
    (root / "profiles.yml").write_text(
        f"{name}:\n  target: thrift\n  outputs:\n    thrift: {{type: spark, method: thrift, host: {server.host}, "
        f"port: {server.port}, user: dbt, schema: {name}_models, threads: 1, connect_retries: 3, "
        "connect_timeout: 10, poll_interval: 1}\n")
    (root / "packages.yml").write_text(f"packages:\n  - local: {Path(__file__).resolve().parents[2]}\n")


class ThriftSql:
    """A PyHive connection of its own: a separate client session in the server."""

    def __init__(self, server: ThriftServer) -> None:
        from pyhive import hive

        self.connection = hive.connect(host=server.host, port=server.port, username="pytest")

    def execute(self, sql: str) -> None:
        cursor = self.connection.cursor()
        try:
            cursor.execute(sql)
        finally:
            cursor.close()

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        cursor = self.connection.cursor()
        try:
            cursor.execute(sql)
            return [tuple(row) for row in cursor.fetchall()]
        finally:
            cursor.close()

    def scalar(self, sql: str) -> Any:
        rows = self.rows(sql)
        assert len(rows) == 1 and len(rows[0]) == 1, rows
        return rows[0][0]

    def close(self) -> None:
        self.connection.close()


def run_history(sql: ThriftSql, schema: str, run_id: str) -> list[tuple[Any, ...]]:
    """A run's rows of the maintenance history in `schema`: (table, operation, status, reason)."""
    sql.execute(f"refresh table {schema}.iceberg_maint_history")
    return [tuple(row) for row in sql.rows(f"select table_name, operation, status, reason from "
                                            f"{schema}.iceberg_maint_history where run_id = '{run_id}'")]


@pytest.fixture(scope="module")
def thrift_sql(thrift_server: ThriftServer) -> Iterator[ThriftSql]:
    sql = ThriftSql(thrift_server)
    yield sql
    sql.close()


class ThriftDbtProject:
    """The integration dbt project, run over the `thrift` target against the suite's server."""

    def __init__(self, server: ThriftServer, schema: str, target_path: Path, packages: Path) -> None:
        self.schema = schema
        self.target_path = target_path / "target"
        # Its own target and log paths: nothing leaks between modules or from other suites.
        self.env = {
            PACKAGES_PATH_ENV: str(packages),
            "DBT_ICEBERG_MAINT_TARGET": "thrift",
            "DBT_ICEBERG_MAINT_SCHEMA": schema,
            "DBT_TARGET_PATH": str(self.target_path),
            "DBT_LOG_PATH": str(target_path / "logs"),
            **server.profile_env(),
        }

    def __call__(self, *args: str, expect_success: bool = True, batch: int | None = None,
                 run_id: str | None = None) -> DbtInvocation:
        invocation = invoke_dbt([*args], env=invocation_env(self.env, batch, run_id))
        if expect_success and not invocation.success:
            failures = [(n.name, n.message) for n in invocation.failed_nodes()]
            raise AssertionError(f"dbt {' '.join(args)} over thrift failed: {failures or invocation.exception}")
        return invocation

    def table(self, name: str) -> str:
        return f"local.{self.schema}.{name}"

    def run_results(self) -> dict[str, Any]:
        """The last invocation's target/run_results.json: what dbt Cloud shows for a run."""
        return json.loads((self.target_path / "run_results.json").read_text())


@pytest.fixture(scope="module")
def thrift_project(
    thrift_server: ThriftServer, installed_package: Path, request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory
) -> ThriftDbtProject:
    module = request.module.__name__.rsplit(".", 1)[-1]
    return ThriftDbtProject(thrift_server, f"th_{module}", tmp_path_factory.mktemp(f"dbt_{module}"),
                            installed_package)
