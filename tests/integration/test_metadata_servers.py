"""The metadata planner on the catalogs a server keeps: a PostgreSQL-backed JDBC catalog and a Hive
Metastore (both real servers started by the suite), each added to the shared SparkSession, read by
pyiceberg's SqlCatalog or HiveCatalog from the same Spark settings.

The equality on the metastore is one of its own modules' claims (the test tier); on PostgreSQL it
repeats test_metadata_equality.py's on another JDBC database (marker `catalogs`: the lab tier). The
JDBC URI test stays in the test tier: it is about the planner's own reading of the URI."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dbt_iceberg_maint.metadata.catalog import config_from_options, open_catalog
from lab.equality import assert_same_health, cases_for, macro_side, planner_side
from lab.lake import build_varied

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lab.postgres import PostgresServer
    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

# Spark catalog name -> the session fixture of the server that keeps it.
SERVER_CATALOGS = {"pgcat": "postgres_server", "hmscat": "hive_metastore"}
SESSION_SERVICES = tuple(SERVER_CATALOGS.values())  # asked for by name (tests/conftest.py)


@pytest.mark.parametrize("name", [pytest.param("pgcat", marks=pytest.mark.catalogs), "hmscat"])
def test_planner_equals_macros_on_a_server_catalog(spark: SparkSession, dbt_project: DbtProject, tmp_path: Path,
                                                   request: pytest.FixtureRequest, name: str) -> None:
    server = request.getfixturevalue(SERVER_CATALOGS[name])
    properties = server.spark_catalog_properties(str(tmp_path / f"{name}_warehouse"))
    spark.conf.set(f"spark.sql.catalog.{name}", "org.apache.iceberg.spark.SparkCatalog")
    for key, value in properties.items():
        spark.conf.set(f"spark.sql.catalog.{name}.{key}", value)
    tables = build_varied(spark, name, dbt_project.schema, qualify=True)
    cases = cases_for(tables)
    # The same description a user passes: --catalog-property KEY=VALUE, Spark's keys.
    catalog = open_catalog(config_from_options(None, [f"{k}={v}" for k, v in properties.items()], name))

    assert set(catalog.list_tables()) >= {t.split(".", 1)[1] for t in tables}
    macro_health, macro_plan = macro_side(dbt_project, cases)
    planner_health, planner_plan = planner_side(catalog, cases)

    assert_same_health(macro_health, planner_health, tables)
    assert planner_plan == macro_plan
    # `partial_progress: auto`: both engines read the same size (the summary's total-files-size), far
    # below partial_progress_above_mb, so the small table's groups run in parallel and commit once.
    compaction = planner_plan[(f"{name}.{dbt_project.schema}.small_files", "rewrite_data_files")]
    assert compaction[0] == "dry_run" and "partial-progress" not in compaction[2], compaction[2]
    assert compaction[2].startswith(f"CALL {name}.system.rewrite_data_files(")


def test_jdbc_uri_parameters_reach_pyiceberg(spark: SparkSession, tmp_path: Path,
                                             postgres_server: PostgresServer) -> None:
    """Spark's JDBC catalog keeps its tables in the schema `currentSchema` names; the planner's
    pyiceberg connection must read the same schema (and keep the other parameters), or it sees an
    empty catalog in `public` (issue 22)."""
    import psycopg2

    name = database = "pgparams"

    def connect(dbname: str) -> Any:
        connection = psycopg2.connect(host="127.0.0.1", port=postgres_server.port, dbname=dbname,
                                      user="postgres", password="postgres")
        connection.autocommit = True
        return connection

    # A database of its own: Iceberg's JdbcCatalog looks for an existing `iceberg_tables` in any
    # schema (another test's in `public` would be found) but queries the one on the search path.
    server = connect(postgres_server.database)
    with server.cursor() as cursor:
        cursor.execute(f"create database {database}")
    server.close()
    connection = connect(database)
    with connection.cursor() as cursor:
        cursor.execute("create schema iceberg_meta")
    properties = postgres_server.spark_catalog_properties(str(tmp_path / "params_warehouse"))
    properties["uri"] = (properties["uri"].rsplit("/", 1)[0] + f"/{database}"
                         "?currentSchema=iceberg_meta&ApplicationName=dbt_iceberg_maint&sslmode=disable")
    spark.conf.set(f"spark.sql.catalog.{name}", "org.apache.iceberg.spark.SparkCatalog")
    for key, value in properties.items():
        spark.conf.set(f"spark.sql.catalog.{name}.{key}", value)
    spark.sql(f"create namespace if not exists {name}.params")
    spark.sql(f"create table {name}.params.events (id bigint) using iceberg")
    spark.sql(f"insert into {name}.params.events values (1), (2)")
    with connection.cursor() as cursor:  # Spark put the catalog's rows in that schema
        cursor.execute("select table_name from iceberg_meta.iceberg_tables where catalog_name = %s", (name,))
        assert cursor.fetchall() == [("events",)]
    connection.close()

    catalog = open_catalog(config_from_options(None, [f"{k}={v}" for k, v in properties.items()], name))
    assert catalog.list_tables() == ["params.events"]
    table = catalog.load("params.events")
    assert table.current_snapshot() is not None
    assert table.current_snapshot().summary["total-records"] == "2"
