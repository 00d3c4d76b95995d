"""The `dbt-iceberg-maint` command line."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dbt_iceberg_maint.errors import IcebergMaintError
from dbt_iceberg_maint.spark import (
    ICEBERG_JAR_ENV,
    WAREHOUSE_ENV,
    check_java,
    resolve_iceberg_runtime,
)

EXIT_FAILURES = 1
EXIT_USAGE = 2


@click.group()
@click.version_option(package_name="dbt_iceberg_maint")
def main() -> None:
    """Keep Apache Iceberg tables built by dbt on Spark healthy."""


@main.command()
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".demo"),
    show_default=True,
    help="Where the demo keeps its warehouse (wiped at start).",
)
def demo(workdir: Path) -> None:
    """Build the integration project on local Spark + Iceberg and report table health."""
    from dbt_iceberg_maint.demo import run_demo

    try:
        run_demo(workdir)
    except IcebergMaintError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FAILURES)


@main.command()
@click.option("--warehouse", type=click.Path(file_okay=False, path_type=Path),
              default=Path("iceberg_warehouse"), show_default=True)
def env(warehouse: Path) -> None:
    """Print `export` lines that let plain `dbt` use the embedded runtime's profile."""
    try:
        check_java()
        runtime = resolve_iceberg_runtime()
    except IcebergMaintError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    if runtime.jars:
        click.echo(f"export {ICEBERG_JAR_ENV}={runtime.jars[0]}")
    click.echo(f"export {WAREHOUSE_ENV}={warehouse.resolve()}")
    warehouse.mkdir(parents=True, exist_ok=True)
