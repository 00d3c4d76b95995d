"""Classify Iceberg commit failures from the text a user meets (pure, no I/O).

Input is any failure text: a raw `Py4JJavaError` string, a dbt `run_results.json` message
("Runtime Error in model ..."), a Spark Thrift Server error as dbt-spark, PyHive
(`TExecuteStatementResp(status=TStatus(..., infoMessages=[...]))`) or beeline print it, a dbt log
excerpt, a Spark driver log, with or without Java stack frames, `Caused by:` chains or a
truncated tail. The text is split into exception records (`records`), each record is matched
against Iceberg 1.10's own message templates (`templates`), and the most cautious verdict wins
(`verdict`): an unknown commit state beats a bad request, which beats a data conflict, which
beats a catalog CAS failure. Anything not recognised is `not_iceberg_conflict` and is never
retryable.

`retryable` answers one question: would re-running the *same idempotent statement* be safe?
Whether the statement is idempotent is decided elsewhere (`dbt_iceberg_maint.runner.idempotency`).
"""

from __future__ import annotations

from dbt_iceberg_maint.conflicts.kinds import (
    CONFLICT_KINDS,
    RETRYABLE_KINDS,
    SUMMARIES,
    Classification,
    ConflictKind,
)
from dbt_iceberg_maint.conflicts.verdict import classify

__all__ = ["CONFLICT_KINDS", "RETRYABLE_KINDS", "SUMMARIES", "Classification", "ConflictKind", "classify"]
