"""What the commands that run dbt prepare from a `method: session` profile before Spark opens its
catalog (issue 57), without a JVM: the integration test is tests/integration/test_fresh_warehouse.py."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from dbt_iceberg_maint.runtime.embedded_profile import prepare_profile_catalog
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT


def catalog_tables(database: Path) -> set[str]:
    with sqlite3.connect(database) as connection:
        return {row[0] for row in connection.execute("select name from sqlite_master where type = 'table'")}


def test_the_integration_profiles_new_warehouse_gets_its_catalog_tables_again_when_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    warehouse = tmp_path / "new" / "warehouse"
    monkeypatch.setenv("DBT_ICEBERG_MAINT_WAREHOUSE", str(warehouse))
    monkeypatch.delenv("DBT_ICEBERG_MAINT_CATALOG_TYPE", raising=False)
    monkeypatch.delenv("DBT_ICEBERG_MAINT_CATALOG_URI", raising=False)
    prepare_profile_catalog(INTEGRATION_PROJECT, INTEGRATION_PROJECT, "session")
    assert catalog_tables(warehouse / "iceberg_catalog.db") == {"iceberg_tables", "iceberg_namespace_properties"}
    shutil.rmtree(warehouse)  # prepared once per process, unless its file has gone
    prepare_profile_catalog(INTEGRATION_PROJECT, INTEGRATION_PROJECT, "session")
    assert (warehouse / "iceberg_catalog.db").is_file()


def test_a_hadoop_catalog_gets_its_directory_and_other_targets_nothing(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBT_ICEBERG_MAINT_WAREHOUSE", str(tmp_path / "hadoop"))
    monkeypatch.setenv("DBT_ICEBERG_MAINT_CATALOG_TYPE", "hadoop")
    prepare_profile_catalog(INTEGRATION_PROJECT, INTEGRATION_PROJECT, "session")
    assert (tmp_path / "hadoop").is_dir() and not (tmp_path / "hadoop" / "iceberg_catalog.db").exists()
    monkeypatch.setenv("DBT_ICEBERG_MAINT_WAREHOUSE", str(tmp_path / "thrift"))
    prepare_profile_catalog(INTEGRATION_PROJECT, INTEGRATION_PROJECT, "thrift")  # the server's business
    prepare_profile_catalog(INTEGRATION_PROJECT, INTEGRATION_PROJECT, "no_such_target")  # dbt will say so
    prepare_profile_catalog(tmp_path, tmp_path, None)  # no project here: dbt will say so
    assert not (tmp_path / "thrift").exists()


def test_dbt_runs_the_package_plugin_which_prepares_the_profiles_catalog(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain `dbt`: dbt's plugin manager finds `plugins` on the installed `dbt_iceberg_maint` and
    instantiates it with dbt's flags set; an offline command prepares nothing."""
    from argparse import Namespace

    from dbt.flags import set_flags
    from dbt.plugins.manager import PluginManager

    from dbt_iceberg_maint.runtime.dbt_plugin import EmbeddedCatalogPlugin

    assert PluginManager.get_prefixed_modules()["dbt_iceberg_maint"].plugins == [EmbeddedCatalogPlugin]
    warehouse = tmp_path / "new" / "warehouse"
    monkeypatch.setenv("DBT_ICEBERG_MAINT_WAREHOUSE", str(warehouse))
    monkeypatch.delenv("DBT_ICEBERG_MAINT_CATALOG_TYPE", raising=False)
    monkeypatch.delenv("DBT_ICEBERG_MAINT_CATALOG_URI", raising=False)
    project = str(INTEGRATION_PROJECT)
    try:
        set_flags(Namespace(WHICH="parse", PROJECT_DIR=project, PROFILES_DIR=project, TARGET="session"))
        PluginManager.from_modules("iceberg_maint_integration_tests")
        assert not warehouse.exists()
        set_flags(Namespace(WHICH="seed", PROJECT_DIR=project, PROFILES_DIR=project, TARGET="session"))
        PluginManager.from_modules("iceberg_maint_integration_tests")
        assert catalog_tables(warehouse / "iceberg_catalog.db") == {"iceberg_tables", "iceberg_namespace_properties"}
    finally:
        set_flags(Namespace())
