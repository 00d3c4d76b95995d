"""A user's own dbt project on the first try (issue 23): a typical project written for this test
(seeds, staging views, a table, an incremental merge on a date partition) on the embedded default
catalog, with the README's post-hooks and policy copied in, built twice with dbt in-process. The
first build maintains every Iceberg model (the post-hook sees the table its model just created),
the second replaces the views and really merges. The lint finds the policy mistakes that would
fail the next run, and the error cases say what happened instead of exiting 0."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from benchmarks.post_hooks import HOOKS_CONFIG
from dbt_iceberg_maint.cli import main
from dbt_iceberg_maint.maintenance.results import parse_result_lines
from dbt_iceberg_maint.runtime.invoke import DbtInvocation, invoke_dbt

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

SCHEMA = "first_try"
PROFILE = f"""\
first_try:
  target: session
  outputs:
    session: {{type: spark, method: session, host: NA, schema: {SCHEMA}, threads: 1}}
"""
# The README's post-hooks and policy (benchmarks/post_hooks.py holds them word for word, and a unit
# test keeps that copy equal to README.md) on the marts; staging stays views, as most shops have it.
PROJECT = """\
name: first_try
version: "1.0"
config-version: 2
profile: first_try
models:
  first_try:
    staging:
      +materialized: view
    marts:
      +file_format: iceberg
{hooks}"""
SEEDS = {
    "raw_customers.csv": "customer_id,name,country\n1,Ann,DE\n2,Bo,SE\n3,Cy,DE\n",
    "raw_orders.csv": ("order_id,customer_id,order_date,amount\n1,1,2026-11-01,10.5\n2,2,2026-11-01,7.0\n"
                       "3,1,2026-11-02,3.25\n4,3,2026-11-03,12.0\n"),
}
MODELS = {
    "staging/stg_customers.sql": "select customer_id, name, country from {{ ref('raw_customers') }}\n",
    "staging/stg_orders.sql": ("select order_id, customer_id, cast(order_date as date) as order_date, amount\n"
                               "from {{ ref('raw_orders') }}\n"),
    "marts/customers.sql": textwrap.dedent("""\
        {{ config(materialized='table') }}
        select c.customer_id, c.name, c.country, count(o.order_id) as orders
        from {{ ref('stg_customers') }} c left join {{ ref('stg_orders') }} o using (customer_id)
        group by 1, 2, 3
        """),
    "marts/orders_daily.sql": textwrap.dedent("""\
        {{ config(materialized='incremental', incremental_strategy='merge', unique_key=['order_date', 'country'],
                  partition_by=['order_date'],
                  incremental_predicates=["DBT_INTERNAL_DEST.order_date >= date'2026-10-01'"]) }}
        select o.order_date, c.country, count(*) as orders, sum(o.amount) as amount
        from {{ ref('stg_orders') }} o join {{ ref('stg_customers') }} c using (customer_id)
        group by 1, 2
        """),
}


def write_project(root: Path, hooks: str = HOOKS_CONFIG) -> Path:
    for folder in ("seeds", "models/staging", "models/marts"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "dbt_project.yml").write_text(PROJECT.format(hooks=textwrap.indent(hooks, "  ")))
    (root / "profiles.yml").write_text(PROFILE)
    (root / "packages.yml").write_text(f"packages:\n  - local: {Path(__file__).resolve().parents[2]}\n")
    for name, text in SEEDS.items():
        (root / "seeds" / name).write_text(text)
    for name, text in MODELS.items():
        (root / "models" / name).write_text(text)
    return root


def dbt(project: Path, *args: str, expect_success: bool = True) -> DbtInvocation:
    invocation = invoke_dbt(list(args), project_dir=project, profiles_dir=project)
    assert invocation.success is expect_success, (args, invocation.exception, invocation.log_messages[-40:])
    return invocation


@pytest.fixture(scope="module")
def project(spark: SparkSession, warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """On a fresh embedded default warehouse (`warehouse`): the session's catalog is otherwise
    whatever the worker's previous module left, e.g. a Hadoop catalog, which keeps no views."""
    root = write_project(tmp_path_factory.mktemp("first_try"))
    dbt(root, "deps", "--quiet")
    spark.sql(f"drop namespace if exists {SCHEMA} cascade")
    return root


def test_a_typical_project_builds_and_is_maintained_from_its_first_build(spark: SparkSession, project: Path) -> None:
    dbt(project, "seed")
    first = dbt(project, "run")
    results = parse_result_lines(first.log_messages)
    marts = {"customers", "orders_daily"}
    # Every Iceberg model's hooks ran on the table its build created, none saw "does not exist".
    assert {r.table.rsplit(".", 1)[-1] for r in results} == marts, results
    assert not [r for r in results if r.status == "failed" or "does not exist" in (r.reason or "")], results
    assert {(r.table.rsplit(".", 1)[-1], r.operation, r.status) for r in results
            if r.operation in ("apply_table_properties", "remove_orphan_files")} == {
        (m, op, status) for m in marts
        for op, status in (("apply_table_properties", "success"), ("remove_orphan_files", "skipped"))}
    # A table minutes old holds no file older than the 72 h window: no listing, and no check
    # recorded, so a later run asks the table's age again.
    assert all("younger than older_than_hours 72" in (r.reason or "") for r in results
               if r.operation == "remove_orphan_files"), results
    properties = dict(spark.sql(f"show tblproperties {SCHEMA}.orders_daily").collect())
    assert properties["write.merge.isolation-level"] == "snapshot"
    assert properties["commit.retry.num-retries"] == "10"
    assert "dbt-iceberg-maint.checked-at.remove_orphan_files" not in properties

    # The second build replaces the views, merges new rows into existing partitions and skips the
    # maintenance checked a moment ago.
    spark.sql(f"insert into {SCHEMA}.raw_orders values (5, 2, date'2026-11-03', 1.0)")
    second = dbt(project, "run")
    again = parse_result_lines(second.log_messages)
    assert not [r for r in again if r.status not in ("skipped",)], again
    daily = {(str(r[0]), r[1]): (r[2], float(r[3])) for r in spark.sql(
        f"select order_date, country, orders, amount from {SCHEMA}.orders_daily").collect()}
    assert daily[("2026-11-03", "DE")] == (1, 12.0) and daily[("2026-11-03", "SE")] == (1, 1.0)
    assert len(daily) == 5  # 4 (day, country) rows before, one new: merged, no row duplicated
    # The catalog's views (dbt leaves session-wide temporary __dbt_tmp views beside them).
    views = {r[1] for r in spark.sql(f"show views in {SCHEMA}").collect() if not r[2]}
    assert views == {"stg_customers", "stg_orders"}


# One mistake per model, as a user makes them: a mistyped section, then a negative window and a
# `where` on a column the model does not produce (dbt merges `+meta` by key: each model's policy
# is exactly what it declares here).
MISTAKES = """\
    customers:
      +meta: {iceberg_maint: {compactoin: {min_input_files: 2}}}
    orders_daily:
      +meta: {iceberg_maint: {compaction: {cold_partitions_hours: -6, where: "no_such_column < 3"}}}
"""


def test_lint_finds_the_policy_mistakes_that_would_fail_the_next_run(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", HOOKS_CONFIG + MISTAKES)
    dbt(root, "deps", "--quiet")
    result = CliRunner().invoke(main, ["lint", "--project-dir", str(root), "--output", "json"])
    assert result.exit_code == 1, result.output
    errors = {(f["node"].rsplit(".", 1)[-1], f["rule"], f["message"].split(";")[0])
              for f in json.loads(result.output) if f["severity"] == "error"}
    assert errors == {
        ("customers", "invalid_policy", "meta.iceberg_maint has unknown key `compactoin` (did you mean `compaction`?)"),
        ("orders_daily", "invalid_policy", "policy compaction: argument `cold_partitions_hours` is -6"),
        ("orders_daily", "invalid_where", "meta.iceberg_maint.compaction.where 'no_such_column < 3': names "
                                          "no_such_column, which the model does not produce (columns: order_date, "
                                          "country, orders, amount)"),
    }, result.output
    # The summary counts the two Iceberg models, not the views.
    text = CliRunner().invoke(main, ["lint", "--project-dir", str(root)])
    assert text.output.splitlines()[-1].startswith("2 model(s) checked: 3 errors"), text.output


def test_the_error_cases_say_what_happened_and_fail(project: Path) -> None:
    mistyped = dbt(project, "run-operation", "dbt_iceberg_maint.maintain", "--args",
                   json.dumps({"relation": f"{SCHEMA}.orders_dialy"}), expect_success=False)
    failed = parse_result_lines(mistyped.log_messages)
    assert failed and all(r.status == "failed" and "does not exist" in (r.reason or "") for r in failed), failed
    unknown = CliRunner().invoke(main, ["maintain", "--select", "orders_dialy", "--project-dir", str(project),
                                        "--profiles-dir", str(project)])
    assert unknown.exit_code == 2, unknown.output
    assert "orders_dialy" in unknown.output
