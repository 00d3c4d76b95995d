"""A real Hive Metastore 2.3.9 (the standalone `HiveMetaStore` service from pyspark's own jars) on
the lab's PostgreSQL server: a database of its own, started on a free loopback port and stopped by
its own process id (and by the parent-death signal when the starting process dies).

Two things the metastore does not do itself on PostgreSQL:
- `datanucleus.schema.autoCreateAll` creates the metadata schema but not the transaction tables
  Iceberg's commit lock uses (`lock`/`check_lock`/`unlock`); Hive's own test-mode creation of them
  writes Derby-only DDL. They are created here first, with PostgreSQL types.
- It creates some metadata tables lazily, on first use, with DDL on a connection of its own. The
  first Hive (non-Iceberg) table Spark creates makes it create TBL_PRIVS with a foreign key to TBLS
  while its own open transaction holds a TBLS row lock: PostgreSQL blocks the DDL and the request
  hangs forever. Listing privileges once at start creates those tables outside any write.
- It binds every interface; clients use 127.0.0.1.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.errors import RuntimeSetupError
from dbt_iceberg_maint.runtime import processes
from dbt_iceberg_maint.runtime.thrift_server import accepts_connections, pyspark_home
from lab.postgres import JDBC_JAR, PostgresServer, ensure_installed, free_port

METASTORE_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"
LOOPBACK = "127.0.0.1"

# The tables the metastore's lock API reads and writes (unquoted names: PostgreSQL folds them as the
# metastore's own unquoted SQL does). Iceberg takes table locks outside any transaction, but the
# lock checks still join the transaction tables. The compaction and write-set tables are those the
# housekeeping threads read when a metastore times out abandoned locks (lab/torture.py).
LOCK_TABLES_DDL = """
CREATE TABLE IF NOT EXISTS TXNS (TXN_ID bigint PRIMARY KEY, TXN_STATE char(1) NOT NULL,
  TXN_STARTED bigint NOT NULL, TXN_LAST_HEARTBEAT bigint NOT NULL, TXN_USER varchar(128) NOT NULL,
  TXN_HOST varchar(128) NOT NULL);
CREATE TABLE IF NOT EXISTS TXN_COMPONENTS (TC_TXNID bigint REFERENCES TXNS (TXN_ID),
  TC_DATABASE varchar(128) NOT NULL, TC_TABLE varchar(128), TC_PARTITION varchar(767),
  TC_OPERATION_TYPE char(1) NOT NULL);
CREATE TABLE IF NOT EXISTS COMPLETED_TXN_COMPONENTS (CTC_TXNID bigint, CTC_DATABASE varchar(128) NOT NULL,
  CTC_TABLE varchar(128), CTC_PARTITION varchar(767));
CREATE TABLE IF NOT EXISTS NEXT_TXN_ID (NTXN_NEXT bigint NOT NULL);
CREATE TABLE IF NOT EXISTS HIVE_LOCKS (HL_LOCK_EXT_ID bigint NOT NULL, HL_LOCK_INT_ID bigint NOT NULL,
  HL_TXNID bigint, HL_DB varchar(128) NOT NULL, HL_TABLE varchar(128), HL_PARTITION varchar(767),
  HL_LOCK_STATE char(1) NOT NULL, HL_LOCK_TYPE char(1) NOT NULL, HL_LAST_HEARTBEAT bigint NOT NULL,
  HL_ACQUIRED_AT bigint, HL_USER varchar(128) NOT NULL, HL_HOST varchar(128) NOT NULL,
  HL_HEARTBEAT_COUNT integer, HL_AGENT_INFO varchar(128), HL_BLOCKEDBY_EXT_ID bigint,
  HL_BLOCKEDBY_INT_ID bigint, PRIMARY KEY (HL_LOCK_EXT_ID, HL_LOCK_INT_ID));
CREATE INDEX IF NOT EXISTS HL_TXNID_INDEX ON HIVE_LOCKS (HL_TXNID);
CREATE TABLE IF NOT EXISTS NEXT_LOCK_ID (NL_NEXT bigint NOT NULL);
CREATE TABLE IF NOT EXISTS AUX_TABLE (MT_KEY1 varchar(128) NOT NULL, MT_KEY2 bigint NOT NULL,
  MT_COMMENT varchar(255), PRIMARY KEY (MT_KEY1, MT_KEY2));
CREATE TABLE IF NOT EXISTS COMPACTION_QUEUE (CQ_ID bigint PRIMARY KEY, CQ_DATABASE varchar(128) NOT NULL,
  CQ_TABLE varchar(128) NOT NULL, CQ_PARTITION varchar(767), CQ_STATE char(1) NOT NULL, CQ_TYPE char(1) NOT NULL,
  CQ_TBLPROPERTIES varchar(2048), CQ_WORKER_ID varchar(128), CQ_START bigint, CQ_RUN_AS varchar(128),
  CQ_HIGHEST_TXN_ID bigint, CQ_META_INFO bytea, CQ_HADOOP_JOB_ID varchar(32));
CREATE TABLE IF NOT EXISTS NEXT_COMPACTION_QUEUE_ID (NCQ_NEXT bigint NOT NULL);
CREATE TABLE IF NOT EXISTS COMPLETED_COMPACTIONS (CC_ID bigint PRIMARY KEY, CC_DATABASE varchar(128) NOT NULL,
  CC_TABLE varchar(128) NOT NULL, CC_PARTITION varchar(767), CC_STATE char(1) NOT NULL, CC_TYPE char(1) NOT NULL,
  CC_TBLPROPERTIES varchar(2048), CC_WORKER_ID varchar(128), CC_START bigint, CC_END bigint, CC_RUN_AS varchar(128),
  CC_HIGHEST_TXN_ID bigint, CC_META_INFO bytea, CC_HADOOP_JOB_ID varchar(32));
CREATE TABLE IF NOT EXISTS WRITE_SET (WS_DATABASE varchar(128) NOT NULL, WS_TABLE varchar(128) NOT NULL,
  WS_PARTITION varchar(767), WS_TXNID bigint NOT NULL, WS_COMMIT_ID bigint NOT NULL,
  WS_OPERATION_TYPE char(1) NOT NULL);
INSERT INTO NEXT_TXN_ID SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM NEXT_TXN_ID);
INSERT INTO NEXT_COMPACTION_QUEUE_ID SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM NEXT_COMPACTION_QUEUE_ID);
INSERT INTO NEXT_LOCK_ID SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM NEXT_LOCK_ID);
"""


@dataclass(frozen=True)
class HiveMetastore:
    port: int
    root: Path  # the service's log and default warehouse directory
    process: subprocess.Popen[bytes] = field(compare=False, repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def uri(self) -> str:
        return f"thrift://{LOOPBACK}:{self.port}"

    def spark_catalog_properties(self, warehouse: str) -> dict[str, str]:
        """`spark.sql.catalog.<name>.*` of an Iceberg Hive catalog on this metastore."""
        return {"type": "hive", "uri": self.uri, "warehouse": warehouse}

    def session_catalog_conf(self, hive_warehouse: str) -> dict[str, str]:
        """The Spark conf that makes Spark's session catalog Iceberg's `SparkSessionCatalog` on this
        metastore: Iceberg tables through Iceberg's Hive catalog, every other table through Spark's
        own Hive client, as EMR, Dataproc and on-premise clusters set it up. `hive_warehouse`:
        where Spark's Hive client puts new schemas and Hive tables (a URI)."""
        return {"spark.sql.catalog.spark_catalog": "org.apache.iceberg.spark.SparkSessionCatalog",
                "spark.sql.catalogImplementation": "hive",
                "spark.hadoop.hive.metastore.uris": self.uri,
                "spark.sql.warehouse.dir": hive_warehouse}

    @property
    def log(self) -> Path:
        return self.root / "metastore.log"

    def stop(self) -> None:
        processes.stop(self.process)


def _create_database(postgres: PostgresServer, database: str) -> None:
    bin_dir = ensure_installed()
    connection = ["-h", LOOPBACK, "-p", str(postgres.port), "-U", "postgres"]
    exists = subprocess.run([str(bin_dir / "psql"), *connection, "-Atc",
                             f"select 1 from pg_database where datname = '{database}'"],
                            check=True, capture_output=True, text=True).stdout.strip()
    if not exists:
        subprocess.run([str(bin_dir / "createdb"), *connection, database], check=True, capture_output=True)
    subprocess.run([str(bin_dir / "psql"), *connection, "-v", "ON_ERROR_STOP=1", "-q", "-d", database],
                   input=LOCK_TABLES_DDL, check=True, capture_output=True, text=True)


def _command(postgres: PostgresServer, database: str, port: int, warehouse: Path,
             extra: Mapping[str, str]) -> list[str]:
    settings = {
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        "javax.jdo.option.ConnectionURL": f"jdbc:postgresql://{LOOPBACK}:{postgres.port}/{database}",
        "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
        "javax.jdo.option.ConnectionUserName": "postgres",
        "javax.jdo.option.ConnectionPassword": "postgres",
        "hive.metastore.warehouse.dir": warehouse.as_uri(),
        **extra,
    }
    classpath = f"{pyspark_home() / 'jars'}/*:{JDBC_JAR}"
    # Without synchronous logging the service dies on a missing LMAX disruptor class.
    command = ["java", "-Xmx512m", "-cp", classpath, "-Dhive.async.log.enabled=false", METASTORE_CLASS,
               "-p", str(port)]
    for key, value in settings.items():
        command += ["--hiveconf", f"{key}={value}"]
    return command


def open_client(port: int) -> tuple[Any, Any]:
    """A thrift client of the metastore on `port` and its open transport (close it when done)."""
    from hive_metastore.ThriftHiveMetastore import Client  # type: ignore[import-untyped]
    from thrift.protocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport

    transport = TTransport.TBufferedTransport(TSocket.TSocket(LOOPBACK, port))
    transport.open()
    return Client(TBinaryProtocol.TBinaryProtocol(transport)), transport


def _create_privilege_tables(port: int) -> None:
    """Read privileges of each kind once, so the metastore creates their tables now (see above)."""
    from hive_metastore.ttypes import HiveObjectRef, HiveObjectType, PrincipalType  # type: ignore[import-untyped]

    client, transport = open_client(port)
    try:
        for kind, extra in ((HiveObjectType.GLOBAL, {}), (HiveObjectType.DATABASE, {}), (HiveObjectType.TABLE, {}),
                            (HiveObjectType.COLUMN, {"columnName": "c"})):
            client.list_privileges("nobody", PrincipalType.USER,
                                   HiveObjectRef(objectType=kind, dbName="default", objectName="none", **extra))
    finally:
        transport.close()


def _wait_listening(started: processes.Started, port: int, timeout_s: float) -> None:
    processes.wait_until(lambda: True if accepts_connections(LOOPBACK, port) else None, started, timeout_s,
                         exited=lambda code: f"the Hive Metastore exited with code {code}",
                         timed_out=lambda: f"the Hive Metastore did not listen on port {port}")


def start_metastore(postgres: PostgresServer, root: Path, database: str = "metastore",
                    attempts: int = 3, timeout_s: float = 90.0, settings: Mapping[str, str] | None = None
                    ) -> HiveMetastore:
    """Start from the main thread: the parent-death signal follows the thread that started it.
    `settings` are more `--hiveconf` settings of the service."""
    _create_database(postgres, database)
    root.mkdir(parents=True, exist_ok=True)
    warehouse = root / "warehouse"
    warehouse.mkdir(exist_ok=True)
    last_error: RuntimeSetupError | None = None
    for _ in range(attempts):
        port = free_port()  # the service cannot bind port 0; another process may take it: retry
        started = processes.start(_command(postgres, database, port, warehouse, settings or {}), root / "metastore.log",
                                  with_parent=True)
        begun = time.monotonic()
        try:
            _wait_listening(started, port, timeout_s)
            _create_privilege_tables(port)
        except RuntimeSetupError as exc:
            processes.stop(started.process)
            last_error = exc
            continue
        print(f"Hive Metastore on {LOOPBACK}:{port} ready in {time.monotonic() - begun:.1f} s", flush=True)
        return HiveMetastore(port, root, started.process)
    raise RuntimeSetupError(f"the Hive Metastore did not start after {attempts} attempts: {last_error}")
