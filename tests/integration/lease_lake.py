"""The lease modules' lake: a warehouse on the PostgreSQL JDBC catalog or on the Hive Metastore,
made the session's `local` catalog, and the dbt environment that reaches it (the integration
project's `session_jdbc` or `session` target; on the metastore also `session_hive`, for processes
whose session catalog is the metastore)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dbt_iceberg_maint.maintenance.leases import RUN_ID_ENV
from dbt_iceberg_maint.runtime.invoke import DbtInvocation, invoke_dbt
from dbt_iceberg_maint.runtime.spark import switch_warehouse
from tests.conftest import CATALOG_TYPE_ENV, CATALOG_URI_ENV

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lab.hive_metastore import HiveMetastore
    from lab.postgres import PostgresServer
    from tests.conftest import DbtProject


@dataclass
class Lake:
    schema: str
    env: dict[str, str]
    catalog_properties: dict[str, str]  # spark.sql.catalog.local.*, the worker processes' too
    # On the metastore: the Spark conf that makes the same catalog Spark's session catalog
    # (SparkSessionCatalog), for worker processes that reach the tables by two-part names.
    session_catalog_conf: dict[str, str] | None = None

    def dbt(self, *args: str, run_id: str | None = None) -> DbtInvocation:
        return invoke_dbt(list(args), env={**self.env, **({RUN_ID_ENV: run_id} if run_id else {})})


def open_lake(spark: SparkSession, dbt_project: DbtProject, path: Path, postgres: PostgresServer,
              metastore: HiveMetastore | None = None) -> Lake:
    """A warehouse at `path` on the metastore when given, else on PostgreSQL's JDBC catalog."""
    session_catalog_conf = None
    if metastore is not None:
        properties = metastore.spark_catalog_properties(str(path))
        session_catalog_conf = metastore.session_catalog_conf((path / "hive_warehouse").as_uri())
        env = {**dbt_project.env, "DBT_ICEBERG_MAINT_TARGET": "session", CATALOG_TYPE_ENV: "hive",
               CATALOG_URI_ENV: metastore.uri, "DBT_ICEBERG_MAINT_WAREHOUSE": str(path)}
    else:
        properties = {**postgres.spark_catalog_properties(str(path)), "jdbc.schema-version": "V1"}
        env = {**dbt_project.env, "DBT_ICEBERG_MAINT_TARGET": "session_jdbc",
               "DBT_ICEBERG_MAINT_JDBC_URI": postgres.jdbc_uri, "DBT_ICEBERG_MAINT_WAREHOUSE": str(path)}
    switch_warehouse(spark, path, properties=properties)
    spark.sql(f"create namespace if not exists local.{dbt_project.schema}")
    return Lake(dbt_project.schema, env, properties, session_catalog_conf)
