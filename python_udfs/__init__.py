"""PySpark UDFs built on dbt_iceberg_maint's pure modules."""

from __future__ import annotations
