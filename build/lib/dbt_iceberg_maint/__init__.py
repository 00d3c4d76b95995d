"""dbt_iceberg_maint: keep Iceberg tables built by dbt on Spark healthy, and dbt runs alive."""

from __future__ import annotations

from dbt_iceberg_maint.errors import IcebergMaintError

__all__ = ["IcebergMaintError", "__version__"]
__version__ = "0.1.0"
