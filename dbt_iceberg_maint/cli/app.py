"""The `dbt-iceberg-maint` click group, `main`, on which every command module registers.

`dbt_iceberg_maint.cli.main` (the console script's entry point) is this group with every command
registered: `cli/__init__.py` imports the command modules when `main` is first asked for.
"""

from __future__ import annotations

import click


@click.group()
@click.version_option(package_name="dbt_iceberg_maint")
def main() -> None:
    """Keep Apache Iceberg tables built by dbt on Spark healthy."""


