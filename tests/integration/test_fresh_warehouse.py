"""A new user's first steps on the embedded runtime, each in its own process and JVM.

- Issue 55: the warehouse named by `DBT_ICEBERG_MAINT_WAREHOUSE` alone, a directory nothing has
  prepared (`dbt-iceberg-maint env` ran for another one), works for dbt run through the package
  and for plain `dbt` (the package's dbt plugin): the catalog's tables are created before Spark
  opens it (it failed with `no such table: iceberg_tables` and a Java stack).
- Issue 55: that session's driver has the memory the package chose (a quarter of the machine
  within 1g..8g; DBT_ICEBERG_MAINT_DRIVER_MEMORY overrides it), as its conf and its JVM's heap say.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dbt_iceberg_maint.runtime.driver_memory import DRIVER_MEMORY_ENV, driver_memory
from dbt_iceberg_maint.runtime.spark import WAREHOUSE_ENV

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
SCHEMA = "it_fresh_warehouse"


def user_environment(tmp_path: Path) -> dict[str, str]:
    """The shell of a user who ran `eval "$(dbt-iceberg-maint env)"` for some other warehouse once,
    then pointed DBT_ICEBERG_MAINT_WAREHOUSE at a new directory."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("PYSPARK_GATEWAY") and key != DRIVER_MEMORY_ENV}
    env.update({"PYTHONPATH": str(REPO), "DBT_ICEBERG_MAINT_SCHEMA": SCHEMA, "DBT_ICEBERG_MAINT_TARGET": "session",
                "DBT_TARGET_PATH": str(tmp_path / "target"), "DBT_LOG_PATH": str(tmp_path / "logs")})
    printed = subprocess.run([str(BIN / "dbt-iceberg-maint"), "env", "--warehouse", str(tmp_path / "old"),
                              "--output", "json"], env=env, capture_output=True, text=True, check=True)
    env.update(json.loads(printed.stdout))
    env.pop(DRIVER_MEMORY_ENV)  # the machine's default, unless a test sets it
    env[WAREHOUSE_ENV] = str(tmp_path / "new" / "warehouse")
    return env


# Seeds a table through the package's in-process dbt, then reports what the session got.
SEED_AND_REPORT = textwrap.dedent("""\
    import json, sys
    from dbt_iceberg_maint.runtime.invoke import invoke_dbt
    invocation = invoke_dbt(["seed", "--select", "raw_users"])
    from pyspark.sql import SparkSession
    spark = SparkSession._instantiatedSession  # dbt's (the active one is per thread)
    print(json.dumps({
        "success": invocation.success, "exception": invocation.exception,
        "messages": [m for m in invocation.log_messages if "iceberg_tables" in m or "rror" in m][:5],
        "driver_memory": spark.conf.get("spark.driver.memory") if spark else None,
        "max_heap": spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory() if spark else None,
        "rows": spark.sql("select count(*) from SCHEMA.raw_users").collect()[0][0] if spark else None,
    }))
    """).replace("SCHEMA", SCHEMA)


def test_a_new_warehouse_named_by_the_variable_alone_works_with_the_machines_driver_memory(
        installed_package: Path, tmp_path: Path) -> None:
    env = user_environment(tmp_path)
    done = subprocess.run([sys.executable, "-c", SEED_AND_REPORT], env=env, capture_output=True, text=True,
                          timeout=600, start_new_session=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["success"], report
    assert report["rows"] > 0
    assert (tmp_path / "new" / "warehouse" / "iceberg_catalog.db").is_file()
    expected = driver_memory({})
    assert expected.source == "machine"
    assert report["driver_memory"] == expected.value
    # The JVM's max heap is -Xmx less one survivor space: within 15% below, never above.
    assert 0.85 * expected.bytes <= report["max_heap"] <= expected.bytes, (report["max_heap"], expected)


def test_plain_dbt_works_on_a_new_warehouse_named_by_the_variable_alone(installed_package: Path,
                                                                        tmp_path: Path) -> None:
    """The `dbt` command itself, no wrapper of ours: dbt runs the package's plugin
    (dbt_iceberg_maint/runtime/dbt_plugin.py) before it connects, which creates the catalog's tables."""
    from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT

    project = str(INTEGRATION_PROJECT)
    env = user_environment(tmp_path)
    done = subprocess.run([str(BIN / "dbt"), "seed", "--select", "raw_users", "--project-dir", project,
                           "--profiles-dir", project], env=env, capture_output=True, text=True, timeout=600,
                          start_new_session=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "iceberg_tables" not in done.stdout + done.stderr
    assert (Path(env[WAREHOUSE_ENV]) / "iceberg_catalog.db").is_file()


def test_maintain_output_json_prints_the_report_alone_on_stdout_and_dbts_log_on_stderr(
        installed_package: Path, tmp_path: Path) -> None:
    """Issue 55's third point, on the same kind of new warehouse (no `env` for it): machines read
    stdout. The selected model was never built, so its operations fail (exit 1) in the report."""
    from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT

    project = str(INTEGRATION_PROJECT)
    done = subprocess.run([str(BIN / "dbt-iceberg-maint"), "maintain", "--select", "event_log", "--output", "json",
                           "--project-dir", project, "--profiles-dir", project], env=user_environment(tmp_path),
                          capture_output=True, text=True, timeout=600, start_new_session=True, cwd=tmp_path)
    report = json.loads(done.stdout)  # the whole of stdout
    assert done.returncode == 1, done.stderr[-3000:]
    assert report["results"] and all(r["status"] == "failed" and "does not exist" in r["reason"]
                                     for r in report["results"]), report["results"]
    assert "Running with dbt=" in done.stderr  # dbt's log lines are there, on stderr
    assert "iceberg_tables" not in done.stderr


@pytest.mark.parametrize(("arguments", "error"), [
    # iceberg_maintenance's path: the macro refuses the selection
    (["maintain", "--select", "tag:nope"],
     "error: iceberg_maintenance stopped before planning: iceberg_maintenance: argument `select` contains "
     "'tag:nope', which selects no enabled Iceberg model (no Iceberg model has that tag); Iceberg models: "),
    # the fleet engine's path, on the new warehouse (it prepares the profile's catalog, as dbt would find it)
    (["maintain", "--include-catalog", "bench.nope"],
     "error: --include-catalog 'bench.nope' matches no table of catalog local"),
    (["plan", "--select", "tag:nope"],
     "error: --select 'tag:nope' selects no Iceberg model of the project (none has that tag); Iceberg models: "),
    (["plan", "--include-catalog", "bench.nope"],
     "error: --include-catalog 'bench.nope' matches no table of catalog local"),
], ids=["maintain-select", "maintain-include-catalog", "plan-select", "plan-include-catalog"])
def test_a_selection_that_matches_nothing_is_a_one_line_usage_error(
        installed_package: Path, tmp_path: Path, arguments: list[str], error: str) -> None:
    """Issue 55's fourth point: it exited 0 with a footer. Now exit 2, nothing on stdout, one line
    on stderr naming the argument and its value (after dbt's own log lines, for maintain). `plan`
    reads metadata only and creates no warehouse: its user ran `env` for the new one."""
    from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT

    env = user_environment(tmp_path)
    if arguments[0] == "plan":
        subprocess.run([str(BIN / "dbt-iceberg-maint"), "env", "--warehouse", env[WAREHOUSE_ENV]], env=env,
                       capture_output=True, check=True)
        arguments = [*arguments, "--warehouse", env[WAREHOUSE_ENV]]
    project = str(INTEGRATION_PROJECT)
    done = subprocess.run([str(BIN / "dbt-iceberg-maint"), *arguments, "--output", "json", "--project-dir", project,
                           "--profiles-dir", project], env=env, capture_output=True, text=True,
                          timeout=600, start_new_session=True, cwd=tmp_path)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout == ""
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(error), done.stderr[-3000:]
    assert done.stderr.rstrip().endswith(errors[0])  # the last word, after any log line
