"""PySpark UDFs built on dbt_iceberg_maint's pure modules.

`register(spark)` makes them callable from Spark SQL, e.g. to classify the failures an
orchestrator logged into a table:

    select msg, iceberg_classify_failure(msg).kind from failures
"""

from __future__ import annotations

from python_udfs.conflicts import ICEBERG_CLASSIFY_FAILURE, register

__all__ = ["ICEBERG_CLASSIFY_FAILURE", "register"]
