"""`iceberg_classify_failure(string)`: `conflicts.classify` as a Spark SQL function."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dbt_iceberg_maint.conflicts import classify

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ICEBERG_CLASSIFY_FAILURE = "iceberg_classify_failure"
RETURN_TYPE = "struct<kind:string, retryable:boolean, exception_class:string>"


def classify_failure(text: str | None) -> tuple[str, bool, str | None] | None:
    """The row-level function: NULL in, NULL out; otherwise (kind, retryable, exception_class)."""
    if text is None:
        return None
    verdict = classify(text)
    return (verdict.kind, verdict.retryable, verdict.exception_class)


def register(spark: SparkSession) -> None:
    """Register the UDFs of this package on `spark` (session-scoped, like any Python UDF)."""
    spark.udf.register(ICEBERG_CLASSIFY_FAILURE, classify_failure, RETURN_TYPE)
