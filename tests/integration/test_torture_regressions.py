"""Defects the torture suite found (docs/torture.md), each pinned by its own test."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.results import parse_result_lines

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

FOUR_DAYS = 96 * 3600


def test_remove_orphan_files_refuses_a_location_outside_the_table(spark: SparkSession,
                                                                  dbt_project: DbtProject) -> None:
    """Fuzzed `location` values were passed to Iceberg unchecked: a location above the table
    (here the schema folder, shared with another table) deletes that table's files too."""
    schema = dbt_project.schema
    spark.sql(f"create namespace if not exists local.{schema}")
    for name in ("keeper", "neighbour"):
        spark.sql(f"create table local.{schema}.{name} (id bigint) using iceberg")
        spark.sql(f"insert into local.{schema}.{name} values (1)")
    keeper_file = spark.sql(f"select file_path from local.{schema}.keeper.data_files").collect()[0][0]
    table_dir = Path(keeper_file.removeprefix("file:")).parent.parent
    neighbour_dir = table_dir.parent / "neighbour"
    for path in neighbour_dir.rglob("*"):  # old enough for any window
        os.utime(path, (time.time() - FOUR_DAYS, time.time() - FOUR_DAYS))
    before = sorted(p for p in neighbour_dir.rglob("*") if p.is_file())

    def remove(location: str, expect_success: bool) -> tuple[bool, list[str]]:
        kwargs = {"relation": f"{schema}.keeper", "location": location}
        invocation = dbt_project("run-operation", "iceberg_maint_call", "--args",
                                 json.dumps({"macro_name": "remove_orphan_files", "kwargs": kwargs}),
                                 expect_success=expect_success)
        return invocation.success, list(invocation.log_messages)

    success, messages = remove(str(table_dir.parent), expect_success=False)
    refusal = " ".join(m for m in messages if "Encountered an error" in m)
    assert not success and "argument `location`" in refusal and "must be the table's location" in refusal
    assert sorted(p for p in neighbour_dir.rglob("*") if p.is_file()) == before
    assert spark.sql(f"select count(*) from local.{schema}.neighbour").collect()[0][0] == 1
    for outside in (f"{table_dir}/../neighbour", f"{table_dir}-other"):
        assert not remove(outside, expect_success=False)[0], outside

    success, messages = remove(f"file:{table_dir}/data", expect_success=True)
    assert success and [r.status for r in parse_result_lines(messages)] == ["success"]

    # The same check guards the policy's `location` (maintain / iceberg_maintenance).
    invocation = dbt_project("run-operation", "iceberg_maint_call", "--args", json.dumps({
        "macro_name": "maintain", "kwargs": {"relation": f"{schema}.keeper", "operations": ["remove_orphan_files"],
                                             "policy": {"remove_orphan_files": {"location": str(table_dir.parent)}}}}),
        expect_success=False)
    assert not invocation.success
    assert any("argument `location`" in m for m in invocation.log_messages)
    assert sorted(p for p in neighbour_dir.rglob("*") if p.is_file()) == before
