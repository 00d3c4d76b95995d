"""The documented path of the embedded runtime's session (docs/python-cli.md); it lives in runtime/spark.py."""

from __future__ import annotations

from dbt_iceberg_maint.runtime.spark import CatalogSpec, start_session

__all__ = ["CatalogSpec", "start_session"]
