"""`lint`: models that will collide with Iceberg maintenance or each other, from `dbt parse`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dbt_iceberg_maint.cli.app import main
from dbt_iceberg_maint.cli.output import handle_errors, output_option_for, render_report


@main.command("lint")
@click.option("--project-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=Path("."), show_default=True)
@click.option("--profiles-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="Default: DBT_PROFILES_DIR, the project directory if it has profiles.yml, ~/.dbt.")
@click.option("--target", help="The dbt target (profile output); dbt parse connects to nothing.")
@click.option("--vars", "vars_yaml", help="dbt --vars for dbt parse (YAML), e.g. to enable var-gated models.")
@click.option("--run-results", "run_results", multiple=True,
              type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="A run_results.json with observed durations (repeatable), for orphan_window_too_short.")
@output_option_for("the findings by model, each with its fix")
@handle_errors
def lint_command(project_dir: Path, profiles_dir: Path | None, target: str | None, vars_yaml: str | None,
                 run_results: tuple[Path, ...], output: str) -> None:
    """Report models that will collide with Iceberg maintenance or each other (from dbt parse).

    Exit 1 when any error finding remains, else 0; 2 on usage errors (incl. a project dbt
    cannot parse). Rules and silencing: docs/lint.md.
    """
    from dbt_iceberg_maint.lint import render_text, run_lint

    result = run_lint(project_dir, profiles_dir, target, vars_yaml, run_results)
    render_report(output, result.to_json(), render_text(result))
    sys.exit(result.exit_code)
