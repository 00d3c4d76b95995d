"""A package-shaped project, set up the way getting-started shows (issue 55): a dbt package with
its own `on-run-start` hook, seeds, views, an ephemeral model, an incremental merge on daily
partitions, a table and a date spine, installed into a root project that sets the post-hooks and
the policy for the whole package (`models: <package>:`) and checks the policies in its
`on-run-start`. On the embedded default it parses, builds twice and is maintained: the hooks do
nothing on the package's on-run-start, its views and its ephemeral model; the first build pays no
orphan listing on tables younger than the window; a policy mistake stops the run before any model
replaces its table."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from dbt_iceberg_maint.cli import main
from dbt_iceberg_maint.maintenance.results import parse_result_lines
from tests.integration.test_first_try import PROFILE as PROFILE_OF_FIRST_TRY
from tests.integration.test_first_try import SCHEMA as FIRST_TRY_SCHEMA
from tests.integration.test_first_try import dbt

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dbt_iceberg_maint.runtime.invoke import DbtInvocation

pytestmark = pytest.mark.integration

SCHEMA = "package_shop"
REPO = Path(__file__).resolve().parents[2]
PACKAGE = {
    "dbt_project.yml": """\
        name: shop
        version: "1.0"
        config-version: 2
        profile: app
        # Every packaged source of this shape announces itself before a run (dbt hands the
        # project's `models: shop:` hooks to this operation too, where `this` is none).
        on-run-start: ["{{ shop.shop_run_started() }}"]
        models:
          shop:
            staging: {+materialized: view}
            intermediate: {+materialized: ephemeral}
            marts: {+materialized: table}
            utils: {+materialized: table}
        """,
    "macros/shop_run_started.sql": """\
        {% macro shop_run_started() %}{% do log('shop: run started', info=true) %}{% endmacro %}
        """,
    "seeds/raw_shop_orders.csv": """\
        order_id,customer_id,order_date,amount
        1,1,2026-11-01,10.5
        2,2,2026-11-01,7.0
        3,1,2026-11-02,3.25
        4,3,2026-11-03,12.0
        """,
    "seeds/raw_shop_customers.csv": """\
        customer_id,name,country
        1,Ann,DE
        2,Bo,SE
        3,Cy,DE
        """,
    "models/staging/stg_shop_orders.sql": """\
        select order_id, customer_id, cast(order_date as date) as order_date, amount from {{ ref('raw_shop_orders') }}
        """,
    "models/staging/stg_shop_customers.sql": """\
        select customer_id, name, country from {{ ref('raw_shop_customers') }}
        """,
    "models/intermediate/int_orders_by_country.sql": """\
        select o.order_date, c.country, o.amount
        from {{ ref('stg_shop_orders') }} o join {{ ref('stg_shop_customers') }} c using (customer_id)
        """,
    "models/marts/shop_orders_daily.sql": """\
        {{ config(materialized='incremental', incremental_strategy='merge', unique_key=['order_date', 'country'],
                  partition_by=['order_date']) }}
        select order_date, country, count(*) as orders, sum(amount) as amount
        from {{ ref('int_orders_by_country') }}
        group by 1, 2
        """,
    "models/marts/shop_customers.sql": """\
        select customer_id, name, country from {{ ref('stg_shop_customers') }}
        """,
    # Two years of days, a partition each: the calendar most packages carry (it ran the embedded
    # session out of memory at 1 GiB of driver memory; docs/getting-started.md, driver memory).
    "models/utils/shop_date_spine.sql": """\
        {{ config(partition_by=['date_day']) }}
        select explode(sequence(date'2025-01-01', date'2026-12-31', interval 1 day)) as date_day
        """,
    "models/schema.yml": """\
        version: 2
        models:
          - name: shop_customers
            columns:
              - name: customer_id
                data_tests: [not_null, unique]
        """,
}
PROFILE = PROFILE_OF_FIRST_TRY.replace(f"schema: {FIRST_TRY_SCHEMA}", f"schema: {SCHEMA}").replace("first_try:", "app:")
POLICY = """\
        isolation_level: snapshot
        commit_retry: {num_retries: 10}
        compaction: {min_input_files: 5}
        expire_snapshots: {older_than_hours: 168, retain_last: 5}
        remove_orphan_files: {older_than_hours: 72}"""
# As getting-started shows it: the policy check first, the hooks and the policy for the whole package.
ROOT = """\
name: app
version: "1.0"
config-version: 2
profile: app
on-run-start: ["{{{{ dbt_iceberg_maint.validate_policies() }}}}"]
seeds:
  shop:
    +file_format: iceberg
models:
  shop:
    +file_format: iceberg
    +post-hook:
      - "{{{{ dbt_iceberg_maint.apply_table_properties() }}}}"
      - "{{{{ dbt_iceberg_maint.maintain() }}}}"
    +meta:
      iceberg_maint:
{policy}
"""
TABLES = {"shop_orders_daily", "shop_customers", "shop_date_spine"}
VIEWS = {"stg_shop_orders", "stg_shop_customers"}
SPINE_DAYS = 730


def write_root(root: Path, policy: str = POLICY) -> None:
    (root / "dbt_project.yml").write_text(ROOT.format(policy=policy))


def run_with_policy(root: Path, policy: str) -> DbtInvocation:
    """`dbt run` with `policy` in the root project, which must fail; the policy is put back after."""
    write_root(root, policy)
    try:
        return dbt(root, "run", expect_success=False)
    finally:
        write_root(root)


@pytest.fixture(scope="module")
def project(spark: SparkSession, warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("package_project")
    for name, text in PACKAGE.items():
        path = base / "shop" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    root = base / "app"
    root.mkdir()
    write_root(root)
    (root / "profiles.yml").write_text(PROFILE)
    (root / "packages.yml").write_text(f"packages:\n  - local: ../shop\n  - local: {REPO}\n")
    dbt(root, "deps", "--quiet")
    spark.sql(f"drop namespace if exists {SCHEMA} cascade")
    return root


def test_the_package_level_hooks_parse(project: Path) -> None:
    """dbt renders the package's on-run-start with the project's `models: shop:` post-hooks at
    parse time; the hooks do nothing there instead of failing the parse."""
    parsed = dbt(project, "parse")
    assert not [m for m in parsed.log_messages if "relation is none" in m]


def test_a_package_builds_twice_and_is_maintained(spark: SparkSession, project: Path) -> None:
    first = dbt(project, "build")
    results = parse_result_lines(first.log_messages)
    # Only the tables the package built are maintained: not the on-run-start, the views, the
    # ephemeral model or the seeds (whose hooks come from `seeds:`, which sets none).
    assert {r.table.rsplit(".", 1)[-1] for r in results} == TABLES, results
    assert not [r for r in results if r.status == "failed"], results
    altered = [sql for sql, _, _ in first.sql_statements if "set tblproperties" in sql.lower()]
    assert altered and not [sql for sql in altered if any(view in sql for view in VIEWS)], altered
    for view in VIEWS:
        assert any(f"nothing to do for model.shop.{view}: it is view" in m for m in first.log_messages), view
    # dbt runs no hook of the ephemeral model (it renders them at parse only, where they do nothing).
    # A table minutes old cannot hold an orphan older than 72 h: no listing on the first build.
    orphans = {r.table.rsplit(".", 1)[-1]: r for r in results if r.operation == "remove_orphan_files"}
    assert set(orphans) == TABLES, results
    for name, result in orphans.items():
        assert result.status == "skipped", (name, result)
        assert "younger than older_than_hours 72" in (result.reason or ""), (name, result)
    properties = dict(spark.sql(f"show tblproperties {SCHEMA}.shop_orders_daily").collect())
    assert properties["write.merge.isolation-level"] == "snapshot"
    assert spark.table(f"{SCHEMA}.shop_date_spine").count() == SPINE_DAYS
    partitions = spark.sql(f"select count(*) from {SCHEMA}.shop_date_spine.partitions").first()[0]
    assert partitions == SPINE_DAYS

    # New orders land; the second build merges them into their partitions and maintains again.
    orders = Path(project.parent / "shop" / "seeds" / "raw_shop_orders.csv")
    orders.write_text(orders.read_text() + "5,2,2026-11-03,1.0\n")
    second = dbt(project, "build")
    again = parse_result_lines(second.log_messages)
    assert {r.table.rsplit(".", 1)[-1] for r in again} == TABLES, again
    assert not [r for r in again if r.status == "failed"], again
    daily = {(str(r[0]), r[1]): (r[2], float(r[3])) for r in spark.sql(
        f"select order_date, country, orders, amount from {SCHEMA}.shop_orders_daily").collect()}
    assert daily[("2026-11-03", "DE")] == (1, 12.0) and daily[("2026-11-03", "SE")] == (1, 1.0)
    assert len(daily) == 5  # one new (day, country) row, none duplicated
    operations = {s[0] for s in spark.sql(f"select operation from {SCHEMA}.shop_orders_daily.snapshots").collect()}
    assert "overwrite" in operations or "append" in operations, operations

    # The nightly job over the package's tables.
    nightly = CliRunner().invoke(main, ["maintain", "--project-dir", str(project), "--profiles-dir", str(project),
                                        "--select", "shop_orders_daily", "--select", "shop_date_spine"])
    assert nightly.exit_code == 0, nightly.output


def test_a_policy_mistake_stops_the_run_before_any_model(spark: SparkSession, project: Path) -> None:
    dbt(project, "build", "--select", "shop_orders_daily+")
    before = spark.sql(f"select snapshot_id from {SCHEMA}.shop_orders_daily.refs where name = 'main'").first()[0]
    failed = run_with_policy(project, POLICY.replace("compaction:", "compation:"))
    text = failed.exception or ""
    # Each mistake once, as maintain() words it, with the models that inherit it.
    assert text.count("has unknown key `compation`") == 1, text
    assert "found before any model ran" in text and "(3 node(s): " in text, text
    assert not [m for m in failed.log_messages if "START sql" in m and "shop_orders_daily" in m]
    # A mistake both maintain() and apply_table_properties() check is listed once, with its models once each.
    text = run_with_policy(project, POLICY.replace("retain_last: 5}", "retain_last: 5, retain_metadata_files: 0}")
                           ).exception or ""
    assert text.count("argument `retain_metadata_files` is 0; it must be greater than 0 (3 node(s): ") == 1, text
    assert "1 mistake(s) in meta.iceberg_maint" in text, text
    after = spark.sql(f"select snapshot_id from {SCHEMA}.shop_orders_daily.refs where name = 'main'").first()[0]
    assert after == before
