"""Options and checks shared by several commands: dbt's paths around a wrapped dbt invocation,
where the Iceberg catalog is, DBT_ARGS that swallowed the command's own options, whole numbers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from dbt_iceberg_maint import protocol
from dbt_iceberg_maint.cli.output import EXIT_USAGE, fail, output_option

MAINTENANCE_OPERATIONS = ("compaction", *protocol.OPERATIONS)
# The context of a command whose DBT_ARGS follow its own options (run, maintain, leases): the
# first argument it does not know, and everything after it, goes to dbt.
DBT_ARGS_FOLLOW = {"ignore_unknown_options": True, "allow_interspersed_args": False}


def dbt_wrapper_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options of the commands that run dbt for the user: report, output and dbt's paths."""
    options: list[Callable[[Callable[..., None]], Callable[..., None]]] = [
        click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
                     help="Also write the JSON report to this file."),
        output_option,
        click.option("--project-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
                     default=Path("."), show_default=True),
        click.option("--profiles-dir", type=click.Path(file_okay=False, path_type=Path),
                     help="Default: DBT_PROFILES_DIR, the project directory if it has profiles.yml, ~/.dbt."),
    ]
    for option in reversed(options):
        command = option(command)
    return command



def catalog_options(command: Callable[..., None]) -> Callable[..., None]:
    """Where the Iceberg catalog is, in Spark's vocabulary (docs/health-and-plans.md)."""
    for option in reversed([
        click.option("--warehouse", help="The embedded catalog's warehouse directory (its SQLite catalog "
                                          "file, or a Hadoop catalog's tables; --catalog-property "
                                          "type=hadoop forces the latter)."),
        click.option("--catalog-property", "catalog_properties", multiple=True, metavar="KEY=VALUE",
                     help="A spark.sql.catalog.<name>.* setting, e.g. type=jdbc, uri=jdbc:postgresql://... "
                          "(repeatable)."),
        click.option("--catalog-name", default=None, help="The Spark catalog name (default: local, or the "
                                                          "profile's)."),
        click.option("--workers", type=click.IntRange(min=1), default=8, show_default=True,
                     help="Tables read concurrently."),
    ]):
        command = option(command)
    return command


def open_metadata_catalog(warehouse: str | None, properties: tuple[str, ...], name: str | None,
                           project_dir: Path, profiles_dir: Path | None, target: str | None) -> object:
    import os

    from dbt_iceberg_maint.metadata.catalog import config_from_options, config_from_profile, open_catalog
    from dbt_iceberg_maint.runtime.invoke import default_profiles_dir

    if warehouse is None and not properties:
        config = config_from_profile(project_dir, profiles_dir or default_profiles_dir(project_dir, os.environ),
                                     target)
    else:
        config = config_from_options(warehouse, properties, name or "local")
    return open_catalog(config)



def refuse_misplaced_options(dbt_args: tuple[str, ...]) -> None:
    """Exit 2 when the command's own options come after DBT_ARGS (they would go to dbt)."""
    context = click.get_current_context()
    misplaced = own_options_among(context.command, dbt_args)
    if misplaced:
        fail(f"{', '.join(misplaced)} after the dbt arguments would go to dbt; give dbt-iceberg-maint's own "
             f"options first: dbt-iceberg-maint {context.info_name} [OPTIONS] [DBT_ARGS]...", EXIT_USAGE)


def own_options_among(command: click.Command, dbt_args: tuple[str, ...]) -> list[str]:
    """`command`'s own options found among DBT_ARGS.

    `run` stops parsing its options at the first argument it does not know
    (allow_interspersed_args=False), so `run --select x --max-attempts 5` hands
    `--max-attempts 5` to dbt.
    """
    own = {name for param in command.params if isinstance(param, click.Option) for name in param.opts}
    return [flag for flag in (arg.split("=", 1)[0] for arg in dbt_args) if flag in own]



def whole_number(option: str, value: str | None) -> int | None:
    from dbt_iceberg_maint.errors import UsageError

    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        raise UsageError(f"{option} is {value!r}; expected a whole number >= 1") from None
