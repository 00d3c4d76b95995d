"""maintain() in `on-run-start` and `on-run-end` (integration_tests/hooks_project, switched on by
vars), driving `rewrite_position_delete_files` by the policy on real merge-on-read deletes.

Two tables get real position delete files from merge-on-read DELETEs: three on one (the policy's
`min_input_files: 2` makes the rewrite due; it runs in on-run-start), one on the other (not due;
on-run-end skips it, saying why). One `dbt run` invocation runs both hooks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.maintenance.results import MaintenanceResult, parse_result_lines
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT, invoke_dbt

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration
CATALOGS = ("embedded", "hive_metastore")

HOOKS_PROJECT = INTEGRATION_PROJECT / "hooks_project"


@dataclass(frozen=True)
class Hooked:
    results: tuple[MaintenanceResult, ...]
    before: dict[str, tuple[int, list[tuple[int, str]]]]  # table: (delete files, rows)


def delete_files(spark: SparkSession, table: str) -> int:
    return int(spark.sql(f"select count(*) from {table}.delete_files").collect()[0][0])


def rows(spark: SparkSession, table: str) -> list[tuple[int, str]]:
    return [(r[0], r[1]) for r in spark.sql(f"select id, v from {table} order by id").collect()]


@pytest.fixture(scope="module")
def hooked(
    spark: SparkSession, dbt_project: DbtProject, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Hooked]:
    schema = dbt_project.schema
    spark.sql(f"create namespace if not exists local.{schema}")
    tables = {"due": f"local.{schema}.deletes_due", "not_due": f"local.{schema}.deletes_not_due"}
    for name, table in tables.items():
        spark.sql(f"create table {table} (id bigint, v string) using iceberg tblproperties "
                  "('format-version' = '2', 'write.delete.mode' = 'merge-on-read')")
        # Iceberg keeps one position delete file per data file: three data files, one row
        # deleted from each, give three delete files.
        for start in (0, 10, 20):
            spark.sql(f"insert into {table} select id, cast(id as string) from range({start}, {start + 10})")
        for id_ in ((3, 13, 23) if name == "due" else (5,)):
            spark.sql(f"delete from {table} where id = {id_}")
    before = {table: (delete_files(spark, table), rows(spark, table)) for table in tables.values()}
    assert [count for count, _ in before.values()] == [3, 1]
    target = tmp_path_factory.mktemp("hooks_target")

    def dbt(*args: str) -> list[str]:
        invocation = invoke_dbt(list(args), project_dir=HOOKS_PROJECT,
                                profiles_dir=INTEGRATION_PROJECT, env=dbt_project.env)
        assert invocation.success, (args, [(n.name, n.message) for n in invocation.failed_nodes()],
                                    invocation.exception)
        return list(invocation.log_messages)

    dbt("deps", "--quiet")
    messages = dbt("run", "--target-path", str(target), "--vars",
                   f"{{maintain_on_run_start: {schema}.deletes_due, maintain_on_run_end: {schema}.deletes_not_due}}")
    yield Hooked(parse_result_lines(messages), before)


def test_on_run_start_runs_the_due_rewrite_and_the_data_is_unchanged(hooked: Hooked, spark: SparkSession,
                                                                      dbt_project: DbtProject) -> None:
    table = dbt_project.table("deletes_due")
    [result] = [r for r in hooked.results if r.table.endswith(".deletes_due")]
    assert (result.operation, result.status) == ("rewrite_position_delete_files", "success"), result.reason
    assert "CALL" in (result.sql or "") and "'min-input-files', '2'" in (result.sql or "")
    assert result.metrics["rewritten_delete_files_count"] == 3
    assert result.metrics["added_delete_files_count"] >= 1
    assert rows(spark, table) == hooked.before[table][1]
    assert sorted({i for i, _ in rows(spark, table)} ^ set(range(30))) == [3, 13, 23]


def test_on_run_end_skips_what_the_policy_does_not_make_due(hooked: Hooked, spark: SparkSession,
                                                              dbt_project: DbtProject) -> None:
    table = dbt_project.table("deletes_not_due")
    [result] = [r for r in hooked.results if r.table.endswith(".deletes_not_due")]
    assert (result.operation, result.status) == ("rewrite_position_delete_files", "skipped")
    assert result.reason == "only 1 delete files, below threshold of 2"
    assert (delete_files(spark, table), rows(spark, table)) == hooked.before[table]
