"""The embedded runtime's driver memory (issue 55): sized from the machine, overridable, shown by
`env`, passed to Spark and to the profile. No JVM: tests/integration/test_fresh_warehouse.py
checks that a started session has it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dbt_iceberg_maint.cli import main
from dbt_iceberg_maint.errors import RuntimeSetupError
from dbt_iceberg_maint.runtime.driver_memory import (
    DRIVER_MEMORY_ENV,
    GIB,
    MIB,
    DriverMemory,
    choose_driver_memory,
    default_driver_memory,
    driver_memory,
    limit_bytes,
    memory_bytes,
)
from dbt_iceberg_maint.runtime.embedded_profile import embedded_environment
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT
from dbt_iceberg_maint.runtime.spark import CatalogSpec, IcebergRuntime, session_conf


@pytest.mark.parametrize(("machine", "expected"), [
    (24 * GIB, "6g"),
    (25_275_973_632, "5888m"),  # 23.5 GiB: a quarter rounded down to 256 MiB
    (16 * GIB, "4g"),
    (2 * GIB, "1g"),  # never below 1g, Spark's own default
    (512 * MIB, "1g"),
    (64 * GIB, "8g"),  # never above 8g: a laptop's dbt, not a cluster's executor
    (1024 * GIB, "8g"),
])
def test_the_default_is_a_quarter_of_the_machine_within_1g_and_8g(machine: int, expected: str) -> None:
    assert default_driver_memory(machine) == expected
    assert choose_driver_memory({}, machine) == DriverMemory(expected, "machine")


def test_the_variable_overrides_the_default_and_is_checked() -> None:
    assert choose_driver_memory({DRIVER_MEMORY_ENV: " 12g "}, 24 * GIB) == DriverMemory("12g", "environment")
    assert choose_driver_memory({DRIVER_MEMORY_ENV: "3072m"}, 24 * GIB).bytes == 3 * GIB
    assert choose_driver_memory({DRIVER_MEMORY_ENV: ""}, 24 * GIB).source == "machine"
    for bad in ("lots", "4", "4gb", "1.5g", "-1g"):
        with pytest.raises(RuntimeSetupError, match=f"{DRIVER_MEMORY_ENV}=.* is not a memory size"):
            choose_driver_memory({DRIVER_MEMORY_ENV: bad}, 24 * GIB)
    with pytest.raises(RuntimeSetupError, match="below the 512m"):
        choose_driver_memory({DRIVER_MEMORY_ENV: "256m"}, 24 * GIB)
    assert memory_bytes("1T") == 1024 * GIB


def test_a_container_limit_below_the_machine_wins() -> None:
    assert limit_bytes(24 * GIB, ["max\n"]) == 24 * GIB  # cgroup v2 without a limit
    assert limit_bytes(24 * GIB, [f"{4 * GIB}\n"]) == 4 * GIB
    assert limit_bytes(4 * GIB, ["9223372036854771712"]) == 4 * GIB  # cgroup v1's "no limit"


def test_spark_gets_the_memory_unless_the_caller_sets_its_own() -> None:
    runtime, catalog = IcebergRuntime("bundled", jars=("/x.jar",)), CatalogSpec(warehouse="/wh")
    assert session_conf(runtime, catalog, memory="6g")["spark.driver.memory"] == "6g"
    assert session_conf(runtime, catalog, {"spark.driver.memory": "2g"}, memory="6g")["spark.driver.memory"] == "2g"
    assert "spark.driver.memory" not in session_conf(runtime, catalog)


def test_env_prints_the_driver_memory_in_text_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DRIVER_MEMORY_ENV, raising=False)
    warehouse = str(tmp_path / "wh")
    text = CliRunner().invoke(main, ["env", "--warehouse", warehouse])
    assert text.exit_code == 0, text.output
    assert f"export {DRIVER_MEMORY_ENV}={driver_memory({}).value}" in text.output.splitlines()
    monkeypatch.setenv(DRIVER_MEMORY_ENV, "3g")
    as_json = CliRunner().invoke(main, ["env", "--warehouse", warehouse, "--output", "json"])
    assert json.loads(as_json.output)[DRIVER_MEMORY_ENV] == "3g"
    monkeypatch.setenv(DRIVER_MEMORY_ENV, "plenty")
    bad = CliRunner().invoke(main, ["env", "--warehouse", warehouse])
    assert bad.exit_code == 2
    assert bad.output.strip().splitlines() == [
        f"error: {DRIVER_MEMORY_ENV}='plenty' is not a memory size; expected a whole number with a unit k, m, g "
        "or t, e.g. 4g or 6144m"]


def test_the_commands_that_run_dbt_fill_in_the_profiles_memory() -> None:
    assert embedded_environment({}) == {DRIVER_MEMORY_ENV: driver_memory({}).value}
    assert embedded_environment({DRIVER_MEMORY_ENV: "2g"}) == {DRIVER_MEMORY_ENV: "2g"}
    # Every session output of the integration profile (the one users copy) reads the variable.
    profiles = (INTEGRATION_PROJECT / "profiles.yml").read_text()
    assert profiles.count(f"spark.driver.memory: \"{{{{ env_var('{DRIVER_MEMORY_ENV}', '1g') }}}}\"") == (
        profiles.count("method: session"))
