"""Where the dbt package and the demo's dbt project are: a checkout, or the copy a wheel carries.

A wheel carries the repository's `dbt_project.yml`, `macros/`, `models/` and `integration_tests/` under
`dbt_iceberg_maint/_project/` (setup.py). dbt writes `target/`, `logs/` and `dbt_packages/` into
the project it runs, so a bundled project is copied to a directory of the user's before use.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from dbt_iceberg_maint.errors import RuntimeSetupError

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # dbt_iceberg_maint/, above runtime/
CHECKOUT_ROOT = PACKAGE_DIR.parent
BUNDLED_ROOT = PACKAGE_DIR / "_project"
INTEGRATION_DIR = "integration_tests"


def _is_project_root(root: Path) -> bool:
    return (root / "dbt_project.yml").is_file() and (root / INTEGRATION_DIR / "dbt_project.yml").is_file()


def integration_project(workdir: Path) -> Path:
    """The integration dbt project to run: the checkout's own in a checkout, else a fresh copy of
    the bundled one under `workdir/project` (its `packages.yml` installs the package from `../`)."""
    if _is_project_root(CHECKOUT_ROOT):
        return CHECKOUT_ROOT / INTEGRATION_DIR
    if not _is_project_root(BUNDLED_ROOT):
        raise RuntimeSetupError(
            f"neither {CHECKOUT_ROOT} nor {BUNDLED_ROOT} holds the dbt project the demo builds; "
            "reinstall dbt_iceberg_maint from its wheel or run from a checkout"
        )
    copy = workdir.resolve() / "project"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(BUNDLED_ROOT, copy)
    return copy / INTEGRATION_DIR
