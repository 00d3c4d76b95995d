"""The embedded default catalog: Iceberg's JDBC catalog on a SQLite file in the warehouse.

Why this set-up (docs/python-cli.md, "The embedded catalog"): it supports views (`jdbc.schema-version=V1`),
its commit is a conditional UPDATE, so separate processes commit to one table safely, pyiceberg's
`SqlCatalog` reads the same file, and no server runs. Two facts of Iceberg 1.10 with SQLite shape it:

- Iceberg's catalog start-up, when the catalog tables already exist, leaves a metadata query open on a
  pooled connection. In SQLite an open query is an open read transaction, so that connection's
  later commits fail (`SQLITE_BUSY_SNAPSHOT`, or `SQLITE_BUSY` for every other process without WAL)
  and a second process loses every commit. The tables are therefore created here, before Spark
  starts, and Iceberg is told not to create them (`jdbc.init-catalog-tables=false`).
- Writers of several processes wait for each other: WAL journal (set once, kept in the file) and
  the driver's `busy_timeout`.

The SQLite JDBC driver comes from Debian's `libxerial-sqlite-jdbc-java` (its JNI library links the
system SQLite) or from the jar `DBT_ICEBERG_MAINT_SQLITE_JDBC_JAR` names.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Mapping
from pathlib import Path

from dbt_iceberg_maint.errors import RuntimeSetupError

CATALOG_FILE = "iceberg_catalog.db"
SQLITE_URI_PREFIX = "jdbc:sqlite:"
SQLITE_JDBC_JAR_ENV = "DBT_ICEBERG_MAINT_SQLITE_JDBC_JAR"
DEBIAN_SQLITE_JDBC_JAR = Path("/usr/share/java/sqlite-jdbc.jar")
DEBIAN_SQLITE_JDBC_PACKAGE = "libxerial-sqlite-jdbc-java"
BUSY_TIMEOUT_MS = "60000"
# Spark catalog properties of a JDBC catalog on SQLite; the caller's own properties win.
SQLITE_CATALOG_DEFAULTS: Mapping[str, str] = {
    "jdbc.schema-version": "V1",  # views
    "jdbc.init-catalog-tables": "false",  # see the module docstring: create_catalog_tables does it
    "jdbc.busy_timeout": BUSY_TIMEOUT_MS,
}

# Iceberg's JDBC catalog schema, version V1 (views: the `iceberg_type` column), as Iceberg 1.10
# and pyiceberg's SqlCatalog read it.
_TABLES_DDL = (
    "create table if not exists iceberg_tables ("
    "catalog_name varchar(255) not null, table_namespace varchar(255) not null, table_name varchar(255) not null, "
    "metadata_location varchar(1000), previous_metadata_location varchar(1000), iceberg_type varchar(5), "
    "primary key (catalog_name, table_namespace, table_name))",
    "create table if not exists iceberg_namespace_properties ("
    "catalog_name varchar(255) not null, namespace varchar(255) not null, property_key varchar(255), "
    "property_value varchar(1000), primary key (catalog_name, namespace, property_key))",
)


def default_uri(warehouse: str) -> str:
    """The SQLite catalog file of a local warehouse directory (`file:` prefix allowed)."""
    path = warehouse.removeprefix("file://").removeprefix("file:")
    if "://" in path:
        raise RuntimeSetupError(
            f"the embedded catalog keeps its SQLite file in the warehouse directory, but warehouse {warehouse} "
            "is not a local directory; pass the catalog's properties for remote storage (e.g. type=rest, uri=...)")
    return SQLITE_URI_PREFIX + str(Path(path) / CATALOG_FILE)


def sqlite_path(uri: str) -> Path | None:
    """The database file of a `jdbc:sqlite:PATH` URI (None for any other URI or an in-memory one)."""
    if not uri.startswith(SQLITE_URI_PREFIX):
        return None
    path = uri.removeprefix(SQLITE_URI_PREFIX).split("?", 1)[0]
    if not path or path.startswith(":memory:") or path.startswith("file::memory:"):
        return None
    return Path(path.removeprefix("file:"))


def create_catalog_tables(database: Path) -> None:
    """Create the catalog's tables (idempotent) in WAL mode; the folder is created as needed."""
    database.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(database, timeout=float(BUSY_TIMEOUT_MS) / 1000)
    try:
        connection.execute("pragma journal_mode=wal")
        for statement in _TABLES_DDL:
            connection.execute(statement)
        connection.commit()
    except sqlite3.Error as exc:
        raise RuntimeSetupError(f"cannot create the Iceberg catalog tables in {database}: {exc}") from exc
    finally:
        connection.close()


def create_namespace(database: Path, catalog_name: str, namespace: str) -> None:
    """Make `namespace` exist in catalog `catalog_name` as Iceberg's JDBC catalog records one."""
    create_catalog_tables(database)
    connection = sqlite3.connect(database, timeout=float(BUSY_TIMEOUT_MS) / 1000)
    try:
        connection.execute(
            "insert or ignore into iceberg_namespace_properties values (?, ?, 'exists', 'true')",
            (catalog_name, namespace))
        connection.commit()
    finally:
        connection.close()


def find_sqlite_jdbc_jar(environ: Mapping[str, str] | None = None) -> Path | None:
    """The SQLite JDBC driver jar: `DBT_ICEBERG_MAINT_SQLITE_JDBC_JAR`, else Debian's."""
    env = os.environ if environ is None else environ
    if env.get(SQLITE_JDBC_JAR_ENV):
        jar = Path(env[SQLITE_JDBC_JAR_ENV]).expanduser()
        if not jar.is_file():
            raise RuntimeSetupError(f"{SQLITE_JDBC_JAR_ENV}={jar} does not exist; point it at a sqlite-jdbc jar")
        return jar
    return DEBIAN_SQLITE_JDBC_JAR if DEBIAN_SQLITE_JDBC_JAR.is_file() else None


def ensure_sqlite_jdbc_jar(environ: Mapping[str, str] | None = None) -> Path:
    """The SQLite JDBC driver jar; as root on Debian/Ubuntu, apt-get installs it when missing."""
    jar = find_sqlite_jdbc_jar(environ)
    if jar is not None:
        return jar
    install = f"apt-get install {DEBIAN_SQLITE_JDBC_PACKAGE}"
    if os.geteuid() == 0 and Path("/usr/bin/apt-get").is_file():
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, check=False)
        subprocess.run(["apt-get", "install", "-y", "-q", DEBIAN_SQLITE_JDBC_PACKAGE], capture_output=True,
                       env=env, check=False)
        if DEBIAN_SQLITE_JDBC_JAR.is_file():
            return DEBIAN_SQLITE_JDBC_JAR
    raise RuntimeSetupError(
        f"the embedded Iceberg catalog (a SQLite file) needs the SQLite JDBC driver, and "
        f"{DEBIAN_SQLITE_JDBC_JAR} is missing: run `{install}` (Debian/Ubuntu, as root), or set "
        f"{SQLITE_JDBC_JAR_ENV} to a sqlite-jdbc jar, or choose the Hadoop catalog "
        "(catalog properties type=hadoop: no views)")
