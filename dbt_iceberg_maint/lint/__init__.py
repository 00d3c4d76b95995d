"""Conflict-risk lint: read a dbt project (dbt parse, no warehouse) and report the models that
will collide with Iceberg maintenance or with each other, and how to fix them.

`project` builds a typed model from manifest.json, `sql` reads SQL fragments with sqlglot's
Spark dialect, `rules` holds the pure rules, `shell` runs dbt parse; see docs/lint.md.
"""

from __future__ import annotations

from dbt_iceberg_maint.lint.output import render_text
from dbt_iceberg_maint.lint.rules import RULES, Finding, LintResult, lint_project
from dbt_iceberg_maint.lint.shell import lint_manifest, run_lint

__all__ = ["RULES", "Finding", "LintResult", "lint_manifest", "lint_project", "render_text", "run_lint"]
