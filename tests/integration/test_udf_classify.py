"""`iceberg_classify_failure` in Spark SQL, over failure texts that real Spark + Iceberg produced."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import python_udfs
from dbt_iceberg_maint.conflicts import classify
from dbt_iceberg_maint.runtime._conflict_gate import ConflictGate
from dbt_iceberg_maint.runtime.spark import CatalogSpec, register_catalog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

TABLE = "udf.t"


def failure_text(spark: SparkSession, sql: str) -> str:
    with pytest.raises(Exception) as caught:  # noqa: PT011 - any failure is the subject here
        spark.sql(sql).collect()
    return str(caught.value)


def current_snapshot(spark: SparkSession) -> int:
    return spark.sql(f"select snapshot_id from {TABLE}.snapshots order by committed_at desc limit 1").collect()[0][0]


def lose_merge_to_compaction(spark: SparkSession, maintenance: SparkSession, gate: ConflictGate, key: str) -> str:
    """A MERGE held by the gate while `maintenance` compacts the target; the MERGE's error text."""
    gate.arm(key)
    commit = gate.commit_when_reached(
        key, maintenance,
        f"CALL local.system.rewrite_data_files(table => '{TABLE}', "
        "options => map('min-input-files', '1', 'rewrite-all', 'true'))",
    )
    text = failure_text(
        spark,
        f"merge into {TABLE} t using (select id, day, v from udf.src where iceberg_maint_conflict_gate('{key}', id)) s "
        "on t.id = s.id when matched then update set * when not matched then insert *",
    )
    commit.join(timeout=60)
    assert commit.reached and commit.error is None, commit.error
    return text


@pytest.fixture(scope="module")
def failures(spark: SparkSession, warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    spark.sql("create namespace if not exists udf")
    spark.sql(f"create or replace table {TABLE} (id bigint, day date, v string) using iceberg partitioned by (day)")
    for batch in range(3):  # several small files per partition
        spark.sql(f"insert into {TABLE} select id, date_add(date'2026-11-01', cast(id % 2 as int)), 'v{batch}' "
                  f"from range({batch * 10}, {batch * 10 + 10})")
    spark.sql("create or replace table udf.src using iceberg as "
              "select id, date_add(date'2026-11-01', cast(id % 2 as int)) as day, 'new' as v from range(0, 40)")
    gate = ConflictGate(tmp_path_factory.mktemp("udf_gate"))
    gate.register(spark)
    maintenance = spark.newSession()
    register_catalog(maintenance, CatalogSpec(warehouse=str(warehouse.resolve())))

    before = current_snapshot(spark)
    an_hour_ago = (datetime.now(timezone.utc) - timedelta(hours=1)).strftime("%Y-%m-%d %H:%M:%S")
    texts = {
        "merge_vs_compaction": lose_merge_to_compaction(spark, maintenance, gate, "separate_session"),
        "sql_error": failure_text(spark, "select no_such_column from udf.t"),
        "missing_table": failure_text(spark, "select * from udf.no_such_table"),
        "orphan_guard": failure_text(
            spark, f"CALL local.system.remove_orphan_files(table => '{TABLE}', older_than => TIMESTAMP '{an_hour_ago}')"
        ),
        "retain_last": failure_text(spark, f"CALL local.system.expire_snapshots(table => '{TABLE}', retain_last => 0)"),
        "unknown_argument": failure_text(
            spark, f"CALL local.system.rewrite_data_files(table => '{TABLE}', no_such_argument => 'x')"
        ),
        "bad_where": failure_text(
            spark, f"CALL local.system.rewrite_data_files(table => '{TABLE}', where => 'id >>> 3')"
        ),
    }
    after_conflict = current_snapshot(spark)
    # The losing MERGE committed nothing: only the compaction moved the table.
    operation = spark.sql(f"select operation from {TABLE}.snapshots where snapshot_id = {after_conflict}").collect()
    assert operation[0][0] == "replace" and after_conflict != before
    spark.sql(f"alter table {TABLE} set tblproperties ('write.merge.isolation-level' = 'strict')")
    texts["bad_isolation_level"] = failure_text(
        spark, f"merge into {TABLE} t using udf.src s on t.id = s.id when matched then update set *"
    )
    spark.sql(f"alter table {TABLE} unset tblproperties ('write.merge.isolation-level')")
    assert current_snapshot(spark) == after_conflict  # refused requests change nothing
    texts["same_session"] = lose_merge_to_compaction(spark, spark, gate, "same_session")
    # A Python UDF that fails, its message quoting Iceberg: user code, never a conflict.
    spark.udf.register("udf_failing_parser", failing_parser, "string")
    texts["python_udf_error"] = failure_text(spark, f"select udf_failing_parser(v) from {TABLE}")
    return texts


def failing_parser(value: str) -> str:
    raise ValueError(
        "org.apache.iceberg.exceptions.ValidationException: Missing required files to delete: "
        f"/wh/t/data/{value}.parquet"
    )


EXPECTED = {
    "merge_vs_compaction": ("missing_files_to_delete", True, "org.apache.iceberg.exceptions.ValidationException"),
    "sql_error": ("not_iceberg_conflict", False, None),
    "missing_table": ("not_iceberg_conflict", False, None),
    "orphan_guard": ("invalid_request", False, None),
    "retain_last": ("invalid_request", False, None),
    "unknown_argument": ("invalid_request", False, None),
    "bad_where": ("invalid_request", False, None),
    "bad_isolation_level": ("invalid_request", False, None),
    "python_udf_error": ("not_iceberg_conflict", False, None),
}


def test_udf_classifies_a_column_of_real_failure_texts(spark: SparkSession, failures: dict[str, str]) -> None:
    python_udfs.register(spark)
    rows = [(name, text) for name, text in failures.items()] + [("null", None)]
    spark.createDataFrame(rows, "name string, failure string").createOrReplaceTempView("failures")
    result = {
        row["name"]: row["c"]
        for row in spark.sql("select name, iceberg_classify_failure(failure) as c from failures").collect()
    }
    assert result.pop("null") is None
    for name, (kind, retryable, exception_class) in EXPECTED.items():
        verdict = result[name]
        assert (verdict["kind"], verdict["retryable"]) == (kind, retryable), (name, failures[name][:600])
        if exception_class is not None:
            assert verdict["exception_class"] == exception_class
    # Built on conflicts.classify: the same verdict as in Python, for every text.
    for name, text in failures.items():
        expected = classify(text)
        assert (result[name]["kind"], result[name]["retryable"], result[name]["exception_class"]) == (
            expected.kind,
            expected.retryable,
            expected.exception_class,
        )


def test_real_conflict_names_the_replaced_files(failures: dict[str, str], spark: SparkSession) -> None:
    verdict = classify(failures["merge_vs_compaction"])
    assert verdict.files
    assert all(path.endswith(".parquet") and "/udf/t/data/" in path for path in verdict.files)


def test_same_session_conflict_is_a_retryable_conflict(failures: dict[str, str]) -> None:
    # Several threads of one session share its catalog instance: the MERGE either aborts at
    # runtime filtering (the plan was made against a replaced snapshot) or at commit.
    verdict = classify(failures["same_session"])
    if "Runtime file filtering is not possible" in failures["same_session"]:
        assert (verdict.kind, verdict.exception_class) == ("concurrent_modification", "java.lang.IllegalStateException")
    else:
        assert verdict.kind == "missing_files_to_delete"
    assert verdict.retryable
