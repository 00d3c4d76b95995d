"""dbt_iceberg_maint: keep Iceberg tables built by dbt on Spark healthy, and dbt runs alive."""

from __future__ import annotations

from typing import Any

from dbt_iceberg_maint.errors import IcebergMaintError

__all__ = ["IcebergMaintError", "__version__"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """`plugins`, which dbt asks every installed `dbt_*` module for (runtime/dbt_plugin.py): imported only
    then, so importing the package does not import dbt."""
    if name == "plugins":
        from dbt_iceberg_maint.runtime.dbt_plugin import EmbeddedCatalogPlugin

        return [EmbeddedCatalogPlugin]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
