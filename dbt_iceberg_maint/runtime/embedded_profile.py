"""What a dbt `method: session` profile needs before dbt starts Spark in this process.

`dbt-iceberg-maint env` prepares a warehouse; so does every dbt invocation where the package is
installed (dbt_plugin: dbt runs it before it connects), and the fleet engine before it reads the
catalog, so a warehouse named by `DBT_ICEBERG_MAINT_WAREHOUSE` alone works too: the embedded SQLite
catalog's tables are created (Iceberg is told not to: embedded_catalog), a Hadoop catalog's
directory made, and the driver memory the profile reads is filled in when unset.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dbt_iceberg_maint.errors import IcebergMaintError
from dbt_iceberg_maint.runtime.driver_memory import DRIVER_MEMORY_ENV, driver_memory
from dbt_iceberg_maint.runtime.spark import CatalogSpec

# dbt commands that open no connection: nothing to prepare for them (lint promises no warehouse).
OFFLINE_COMMANDS = frozenset({"parse", "deps", "ls", "list", "clean"})
# The catalog each profile target resolved to in this process (None: nothing to prepare), by the
# inputs of its rendering: reading and rendering profiles.yml costs ~50 ms, and a fleet worker
# invokes dbt hundreds of times (~0.1 s each).
_ProfileKey = tuple[str, str, str | None, tuple[int, ...], tuple[tuple[str, str], ...]]
_resolved: dict[_ProfileKey, CatalogSpec | None] = {}
# Catalogs prepared by this process: prepared once, unless their SQLite file has gone since (a
# test's warehouse removed).
_prepared: set[tuple[str, str, tuple[tuple[str, str], ...]]] = set()


def embedded_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Variables the embedded profile reads that the Python layer fills in: the driver memory
    (DBT_ICEBERG_MAINT_DRIVER_MEMORY, checked when set, else the machine's default)."""
    return {DRIVER_MEMORY_ENV: driver_memory(environ).value}


def prepare_profile_catalog(project_dir: Path, profiles_dir: Path, target: str | None,
                            environ: Mapping[str, str] | None = None) -> None:
    """Create what the profile target's Iceberg catalog needs before Spark opens it, as `env` does.

    Only a `method: session` target whose server_side_parameters name an Iceberg catalog; any
    problem reading the profile is left to dbt, which reports it in its own words."""
    from dbt_iceberg_maint.runtime.spark import prepare_warehouse

    env = dict(os.environ if environ is None else environ)
    files = (project_dir / "dbt_project.yml", profiles_dir / "profiles.yml")
    try:
        stamps = tuple(path.stat().st_mtime_ns for path in files)
    except OSError:
        return
    profile_key = (str(project_dir), str(profiles_dir), target, stamps, tuple(sorted(env.items())))
    if profile_key not in _resolved:
        _resolved[profile_key] = _profile_catalog(project_dir, profiles_dir, target, env)
    catalog = _resolved[profile_key]
    if catalog is None:
        return
    key = (catalog.name, catalog.warehouse, tuple(sorted(catalog.properties.items())))
    database = catalog.sqlite_database
    if key in _prepared and (database is None or database.is_file()):
        return
    prepare_warehouse(catalog)
    _prepared.add(key)


def _profile_catalog(project_dir: Path, profiles_dir: Path, target: str | None,
                     env: Mapping[str, str]) -> CatalogSpec | None:
    from dbt_iceberg_maint.metadata.catalog import config_from_spark_settings, profile_setting

    try:
        if profile_setting(project_dir, profiles_dir, target, "method", env) != "session":
            return None
        config = config_from_spark_settings(
            profile_setting(project_dir, profiles_dir, target, "server_side_parameters", env) or {})
    except (IcebergMaintError, OSError, ValueError):
        return None
    properties = dict(config.properties)
    warehouse = properties.pop("warehouse", "")
    return CatalogSpec(warehouse=warehouse, name=config.name, properties=properties) if warehouse else None
