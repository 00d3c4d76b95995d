"""tests/conftest.py's session settings. The per-worker dbt folders under pytest-xdist: the
target folder must be relative, so that each dbt project (the integration project, a test's own
lake project) keeps its own manifest.json; one absolute folder let the fleet engine read another
project's manifest. The suite's JVM options: added to a user's own, once."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import SUITE_JAVA_OPTIONS, module_groups, pytest_configure, suite_java_options


def test_a_worker_gets_a_relative_target_folder_and_its_own_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    monkeypatch.delenv("DBT_TARGET_PATH", raising=False)
    monkeypatch.delenv("DBT_LOG_PATH", raising=False)
    pytest_configure(pytest.Config.__new__(pytest.Config))
    assert os.environ["DBT_TARGET_PATH"] == "target/gw7"
    assert not Path(os.environ["DBT_TARGET_PATH"]).is_absolute()
    assert Path(os.environ["DBT_LOG_PATH"]).parts[-3:] == ("integration_tests", "logs", "gw7")


def test_without_xdist_dbt_keeps_its_own_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("DBT_TARGET_PATH", raising=False)
    monkeypatch.delenv("DBT_LOG_PATH", raising=False)
    pytest_configure(pytest.Config.__new__(pytest.Config))
    assert "DBT_TARGET_PATH" not in os.environ and "DBT_LOG_PATH" not in os.environ


def test_the_suite_java_options_follow_a_users_own_once() -> None:
    mine = "-Xmx2g -XX:TieredStopAtLevel=1"
    combined = suite_java_options(mine).split()
    assert combined[:2] == ["-Xmx2g", "-XX:TieredStopAtLevel=1"]
    assert sorted(combined) == sorted({"-Xmx2g", *SUITE_JAVA_OPTIONS})
    assert suite_java_options(suite_java_options("")) == " ".join(SUITE_JAVA_OPTIONS)


def test_a_jvm_the_session_starts_runs_with_the_suite_java_options() -> None:
    """A real JVM, started from this session as any test starts one: its final flag values."""
    done = subprocess.run(["java", "-XX:+UnlockDiagnosticVMOptions", "-XX:+PrintFlagsFinal", "-version"],
                          capture_output=True, text=True, check=True, timeout=60)
    flags = {parts[1]: parts[3] for parts in (line.split() for line in done.stdout.splitlines())
             if len(parts) >= 4 and parts[2] in (":=", "=")}
    assert (flags["TieredStopAtLevel"], flags["BytecodeVerificationRemote"]) == ("1", "false"), done.stderr
    assert flags["ReservedCodeCacheSize"] == str(240 * 1024 * 1024), done.stderr  # not C1's 48 MB default


def test_modules_that_share_a_service_are_one_work_unit() -> None:
    """--dist loadgroup: a module using the Thrift Server, PostgreSQL or the Hive Metastore (directly,
    through another fixture, or named in SESSION_SERVICES) runs with the others that use it."""
    def item(nodeid: str, *fixtures: str, module: Any = None) -> Any:
        return SimpleNamespace(nodeid=nodeid, fixturenames=list(fixtures), module=module)

    by_name = SimpleNamespace(SESSION_SERVICES=("hive_metastore",))
    groups = module_groups([
        item("tests/thrift/test_a.py::test_1", "thrift_project"),
        item("tests/thrift/test_b.py::test_1", "thrift_server"),
        item("tests/integration/test_c.py::test_1", "spark"),
        item("tests/integration/test_c.py::test_2", "postgres_server"),
        item("tests/integration/test_d.py::test_1", "spark", module=by_name),
        item("tests/unit/test_e.py::test_1")])
    assert groups == {"tests/thrift/test_a.py": "thrift_server", "tests/thrift/test_b.py": "thrift_server",
                      "tests/integration/test_c.py": "postgres", "tests/integration/test_d.py": "postgres",
                      "tests/unit/test_e.py": "tests/unit/test_e.py"}
