"""Commands about the embedded runtime (local Spark + Iceberg): `demo` and `env`."""

from __future__ import annotations

import json
from pathlib import Path

import click

from dbt_iceberg_maint.cli.app import main
from dbt_iceberg_maint.cli.output import EXIT_USAGE, fail, handle_errors, output_option_for, render_report


@main.command()
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".demo"),
    show_default=True,
    help="Where the demo keeps its warehouse (wiped at start).",
)
@handle_errors
def demo(workdir: Path) -> None:
    """Build the integration project on local Spark + Iceberg and report table health."""
    from dbt_iceberg_maint.cli.demo import run_demo

    run_demo(workdir)


@main.command()
@click.option("--warehouse", type=click.Path(file_okay=False, path_type=Path),
              default=Path("iceberg_warehouse"), show_default=True)
@output_option_for("`export` lines for a POSIX shell")
def env(warehouse: Path, output: str) -> None:
    """Print `export` lines that let plain `dbt` use the embedded runtime's profile (json: the
    variables as an object): the Iceberg jar, the SQLite JDBC driver, the warehouse, the driver's
    log settings and memory (DBT_ICEBERG_MAINT_DRIVER_MEMORY as set, else a quarter of the
    machine's memory within 1g..8g)."""
    import os
    import shlex

    from dbt_iceberg_maint.errors import IcebergMaintError
    from dbt_iceberg_maint.runtime.driver_memory import DRIVER_MEMORY_ENV, driver_memory
    from dbt_iceberg_maint.runtime.embedded_catalog import SQLITE_JDBC_JAR_ENV
    from dbt_iceberg_maint.runtime.spark import (
        DRIVER_JAVA_OPTIONS_ENV,
        ICEBERG_JAR_ENV,
        ICEBERG_PACKAGES_ENV,
        WAREHOUSE_ENV,
        CatalogSpec,
        catalog_driver_jars,
        check_java,
        log4j2_java_options,
        prepare_warehouse,
        resolve_iceberg_runtime,
    )

    catalog = CatalogSpec(warehouse=str(warehouse.resolve()))
    try:
        check_java()
        runtime = resolve_iceberg_runtime()
        driver_jars = catalog_driver_jars(catalog)
        memory = driver_memory()
        prepare_warehouse(catalog)  # the embedded catalog's tables: Spark expects them (docs/python-cli.md)
    except IcebergMaintError as exc:  # a set-up the user must fix before anything runs
        fail(str(exc), EXIT_USAGE)
    variables = {}
    if runtime.jars:
        variables[ICEBERG_JAR_ENV] = runtime.jars[0]
    if runtime.packages:
        variables[ICEBERG_PACKAGES_ENV] = ",".join(runtime.packages)
    variables[SQLITE_JDBC_JAR_ENV] = driver_jars[0]
    variables[WAREHOUSE_ENV] = str(warehouse.resolve())
    variables[DRIVER_JAVA_OPTIONS_ENV] = log4j2_java_options()
    variables[DRIVER_MEMORY_ENV] = memory.value
    # As start_session does: the local runtime binds to loopback (and Spark does not warn that
    # the host name resolves to it).
    variables["SPARK_LOCAL_IP"] = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")
    lines = "\n".join(f"export {name}={shlex.quote(value)}" for name, value in variables.items())
    render_report(output, json.dumps(variables, indent=2), lines)
