"""The `dbt-iceberg-maint` command line: one module per command group, one function per command.

- `app`: the click group `main`; `options`: options and checks several commands share;
  `output`: the output layer every command prints through (one console, `--output text|json`,
  `error: ...` on stderr, exit 2 for usage errors and 1 for failures).
- The command groups: `embedded` (demo, env), `runner` (run, classify), `maintenance` (maintain,
  leases), `metadata` (health, plan, report), `lint` (lint).
- `demo`: the demo's steps (`dbt-iceberg-maint demo`).

Heavy modules (dbt, pyspark, a report's rich tables) are imported inside the command that needs
them, so `--help` and `classify` start fast and work without the `[embedded]` extra.

`main` (the console script `dbt_iceberg_maint.cli:main`) is the group with every command
registered. The command modules are imported when `main` is first asked for, not when this
package is: the modules that draw a command's tables import `cli.output` alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dbt_iceberg_maint.cli.app import main

__all__ = ["main"]


def __getattr__(name: str) -> object:
    if name != "main":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # Each command module registers its commands on `main` when imported; --help lists them by name.
    from dbt_iceberg_maint.cli import embedded, lint, maintenance, metadata, runner  # noqa: F401
    from dbt_iceberg_maint.cli.app import main

    globals()["main"] = main
    return main
