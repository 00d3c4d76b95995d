"""The embedded Spark + Iceberg runtime: a local SparkSession with an Iceberg catalog.

Everything that decides *what* to start (jar resolution, Spark configuration) is pure and
tested without a JVM; `start_session` is the thin shell that starts one.

Over 300 lines on purpose: the catalog's Spark settings (`CatalogSpec`) and the shells that apply
them to a starting or running session (`start_session`, `register_catalog`, `switch_warehouse`)
change together; the embedded catalog's own files and driver live in `embedded_catalog`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dbt_iceberg_maint.errors import RuntimeSetupError
from dbt_iceberg_maint.runtime import embedded_catalog
from dbt_iceberg_maint.runtime.driver_memory import DRIVER_MEMORY_CONF, driver_memory

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ICEBERG_JAR_ENV = "DBT_ICEBERG_MAINT_ICEBERG_JAR"
ICEBERG_PACKAGES_ENV = "DBT_ICEBERG_MAINT_ICEBERG_PACKAGES"
WAREHOUSE_ENV = "DBT_ICEBERG_MAINT_WAREHOUSE"

DEFAULT_CATALOG = "local"
DEFAULT_WAREHOUSE = "iceberg_warehouse"
BUNDLED_WHEEL = "snowpark-connect-deps-iceberg==1.0.2"
BUNDLED_JAR_NAME = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
ICEBERG_MAVEN_COORDINATES = "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"
# A runtime jar without this class fails deep inside the JVM on first catalog use
# (wheel 1.0.3 shipped such a jar); checking it up front turns that into a clear message.
REQUIRED_JAR_ENTRY = "org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactoryBuilder.class"
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
MIN_JAVA_MAJOR = 11
# The driver's log settings: Spark's own defaults, then the package's additions (one filter for a
# harmless Iceberg warning that prints ~130 lines of stack trace per new table: see the file).
# A dbt `method: session` profile gets them from DRIVER_JAVA_OPTIONS_ENV (`dbt-iceberg-maint env`).
SPARK_LOG4J2_DEFAULTS = "org/apache/spark/log4j2-defaults.properties"
LOG4J2_ADDITIONS = Path(__file__).with_name("log4j2.properties")
DRIVER_JAVA_OPTIONS_ENV = "DBT_ICEBERG_MAINT_DRIVER_JAVA_OPTIONS"


@dataclass(frozen=True)
class IcebergRuntime:
    """Where the Iceberg Spark runtime comes from: local jars or Maven coordinates."""

    source: str  # "argument", "environment", "maven" or "bundled"
    jars: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()

    def spark_conf(self) -> dict[str, str]:
        conf: dict[str, str] = {}
        if self.jars:
            conf["spark.jars"] = ",".join(self.jars)
        if self.packages:
            conf["spark.jars.packages"] = ",".join(self.packages)
        return conf


@dataclass(frozen=True)
class CatalogSpec:
    """An Iceberg catalog registered in Spark and made its default catalog.

    With no `type` (nor `catalog-impl`) among `properties` it is the embedded default: Iceberg's
    JDBC catalog on the SQLite file `<warehouse>/iceberg_catalog.db` (views, multi-process commits;
    see `dbt_iceberg_maint.runtime.embedded_catalog`). `properties` are passed through as
    `spark.sql.catalog.<name>.<key>` and override the defaults, so `{"type": "hadoop"}` selects
    Iceberg's Hadoop catalog, `{"type": "rest", "uri": "http://..."}` a REST catalog, and
    `{"type": "jdbc", "uri": "jdbc:postgresql://..."}` a JDBC one (see docs/python-cli.md).
    """

    warehouse: str
    name: str = DEFAULT_CATALOG
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def catalog_type(self) -> str | None:
        if "catalog-impl" in self.properties:
            return None
        return self.properties.get("type", "jdbc")

    def resolved_properties(self) -> dict[str, str]:
        """The catalog's properties with the embedded default's filled in (no `warehouse`)."""
        props = {key: str(value) for key, value in self.properties.items()}
        if "catalog-impl" in props:
            return props
        if "type" not in props:
            props = {"type": "jdbc", "uri": embedded_catalog.default_uri(self.warehouse), **props}
        if props["type"] == "jdbc" and props.get("uri", "").startswith(embedded_catalog.SQLITE_URI_PREFIX):
            props = {**embedded_catalog.SQLITE_CATALOG_DEFAULTS, **props}
        return props

    @property
    def sqlite_database(self) -> Path | None:
        """The SQLite file of a JDBC catalog on SQLite (the embedded default), else None."""
        props = self.resolved_properties()
        if props.get("type") != "jdbc":
            return None
        return embedded_catalog.sqlite_path(props.get("uri", ""))

    def spark_conf(self) -> dict[str, str]:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.name):
            raise RuntimeSetupError(
                f"catalog name {self.name!r} is not a valid Spark identifier "
                "(letters, digits and underscores, not starting with a digit)"
            )
        prefix = f"spark.sql.catalog.{self.name}"
        conf = {prefix: "org.apache.iceberg.spark.SparkCatalog", f"{prefix}.warehouse": self.warehouse}
        conf.update({f"{prefix}.{key}": value for key, value in self.resolved_properties().items()})
        conf["spark.sql.defaultCatalog"] = self.name
        return conf


def catalog_driver_jars(catalog: CatalogSpec, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Jars the catalog needs on the driver's class path: the SQLite JDBC driver for the embedded
    default (installed when missing and possible), none otherwise."""
    if catalog.sqlite_database is None:
        return ()
    return (str(embedded_catalog.ensure_sqlite_jdbc_jar(environ)),)


def bundled_iceberg_jar() -> Path:
    """The Apache Iceberg runtime jar shipped inside the pinned PyPI wheel."""
    try:
        import snowpark_connect_deps_iceberg
    except ImportError as exc:
        raise RuntimeSetupError(
            f"the bundled Iceberg runtime is not installed; run `pip install '{BUNDLED_WHEEL}'`, "
            f"or point {ICEBERG_JAR_ENV} at an iceberg-spark-runtime-3.5_2.12 jar"
        ) from exc
    jar = Path(snowpark_connect_deps_iceberg.__file__).parent / "jars" / BUNDLED_JAR_NAME
    if not jar.is_file():
        raise RuntimeSetupError(
            f"{jar} is missing from the installed wheel; reinstall it with "
            f"`pip install --force-reinstall '{BUNDLED_WHEEL}'`"
        )
    return jar


def check_iceberg_jar(path: str | os.PathLike[str]) -> Path:
    """Fail with a readable message unless `path` is a usable Iceberg Spark runtime jar."""
    jar = Path(path).expanduser()
    fix = (
        f"use the Apache iceberg-spark-runtime-3.5_2.12 jar (the PyPI wheel {BUNDLED_WHEEL} "
        f"carries one; version 1.0.3 of that wheel is broken), set {ICEBERG_JAR_ENV} to a good "
        f"jar, or set {ICEBERG_PACKAGES_ENV}={ICEBERG_MAVEN_COORDINATES} where Maven is reachable"
    )
    if not jar.is_file():
        raise RuntimeSetupError(f"Iceberg runtime jar {jar} does not exist; {fix}")
    try:
        with zipfile.ZipFile(jar) as archive:
            names = set(archive.namelist())
    except zipfile.BadZipFile as exc:
        raise RuntimeSetupError(f"Iceberg runtime jar {jar} is not a jar (zip) file; {fix}") from exc
    if REQUIRED_JAR_ENTRY not in names:
        raise RuntimeSetupError(
            f"Iceberg runtime jar {jar} lacks the shaded Jackson class {REQUIRED_JAR_ENTRY}, "
            f"so Iceberg cannot start with it; {fix}"
        )
    return jar


def resolve_iceberg_runtime(
    jar: str | os.PathLike[str] | None = None,
    packages: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> IcebergRuntime:
    """Pick the Iceberg runtime: explicit jar, then Maven coordinates, then the bundled wheel."""
    env = os.environ if environ is None else environ
    if jar is not None:
        return IcebergRuntime("argument", jars=(str(check_iceberg_jar(jar)),))
    if env.get(ICEBERG_JAR_ENV):
        return IcebergRuntime("environment", jars=(str(check_iceberg_jar(env[ICEBERG_JAR_ENV])),))
    coordinates = packages or env.get(ICEBERG_PACKAGES_ENV)
    if coordinates:
        if not re.fullmatch(r"[\w.\-]+:[\w.\-]+:[\w.\-]+(,[\w.\-]+:[\w.\-]+:[\w.\-]+)*", coordinates):
            raise RuntimeSetupError(
                f"Iceberg packages {coordinates!r} are not Maven coordinates; "
                f"expected group:artifact:version, e.g. {ICEBERG_MAVEN_COORDINATES}"
            )
        return IcebergRuntime("maven", packages=tuple(coordinates.split(",")))
    return IcebergRuntime("bundled", jars=(str(check_iceberg_jar(bundled_iceberg_jar())),))


def parse_java_major(version_output: str) -> int | None:
    """`java -version` prints `openjdk version "17.0.15"` or `java version "1.8.0_392"`."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if match is None:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2) is not None:
        return int(match.group(2))
    return major


def check_java(environ: Mapping[str, str] | None = None) -> int:
    """Return the Java major version, or explain what to install."""
    env = os.environ if environ is None else environ
    install = "install Java 17 (Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`)"
    java_home = env.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        where = f"JAVA_HOME={java_home} has no bin/java" if java_home else "no `java` on PATH"
        raise RuntimeSetupError(f"Spark needs Java, but {where}; {install}")
    result = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    major = parse_java_major(result.stderr + result.stdout)
    if major is None:
        raise RuntimeSetupError(f"cannot read the Java version from `{java} -version`; {install}")
    if major < MIN_JAVA_MAJOR:
        raise RuntimeSetupError(
            f"the Iceberg 1.10 runtime needs Java {MIN_JAVA_MAJOR}+, found Java {major} at {java}; {install}"
        )
    return major


def log4j2_java_options(additions: Path = LOG4J2_ADDITIONS) -> str:
    """`-Dlog4j2.configurationFile=` Spark's defaults (a classpath resource) and `additions` (a
    file URI: spaces and commas percent-encoded, so neither the option nor the list splits)."""
    return f"-Dlog4j2.configurationFile={SPARK_LOG4J2_DEFAULTS},{additions.resolve().as_uri()}"


DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def session_conf(
    runtime: IcebergRuntime,
    catalog: CatalogSpec,
    extra: Mapping[str, str] | None = None,
    memory: str | None = None,
) -> dict[str, str]:
    """The complete Spark configuration of the embedded runtime; `memory`: its driver memory
    (dbt_iceberg_maint.runtime.driver_memory), which a `spark.driver.memory` in `extra` overrides."""
    conf = {
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        # No Hive metastore: the Iceberg catalog is the default catalog (see docs/python-cli.md).
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",  # progress bars garble the demo and dbt logs
        "spark.sql.session.timeZone": "UTC",
        DRIVER_JAVA_OPTIONS: f"-Duser.timezone=UTC {log4j2_java_options()}",
    }
    if memory is not None:
        conf[DRIVER_MEMORY_CONF] = memory
    conf.update(runtime.spark_conf())
    conf.update(catalog.spark_conf())
    extra = dict(extra or {})
    if "spark.jars" in extra:  # more jars (a JDBC driver...): added to the runtime's, never replacing them
        jars = [*runtime.jars, *(j.strip() for j in extra.pop("spark.jars").split(",") if j.strip())]
        conf["spark.jars"] = ",".join(dict.fromkeys(jars))
    if DRIVER_JAVA_OPTIONS in extra:  # more driver options: after ours (time zone, log settings), never replacing them
        conf[DRIVER_JAVA_OPTIONS] = f"{conf[DRIVER_JAVA_OPTIONS]} {extra.pop(DRIVER_JAVA_OPTIONS).strip()}"
    conf.update(extra)
    return conf


def prepare_warehouse(catalog: CatalogSpec) -> None:
    """Create what the catalog needs before Spark opens it: a Hadoop catalog cannot list namespaces
    of a missing directory; the embedded SQLite catalog's tables are created here, not by Iceberg."""
    database = catalog.sqlite_database
    if database is not None:
        embedded_catalog.create_catalog_tables(database)
    if catalog.catalog_type == "hadoop" and "://" not in catalog.warehouse:
        Path(catalog.warehouse).mkdir(parents=True, exist_ok=True)
    elif catalog.warehouse.startswith("file:"):
        Path(catalog.warehouse.removeprefix("file:")).mkdir(parents=True, exist_ok=True)
    elif database is not None and "://" not in catalog.warehouse:
        Path(catalog.warehouse).mkdir(parents=True, exist_ok=True)


def start_session(
    warehouse: str | os.PathLike[str] | None = None,
    *,
    catalog_name: str | None = None,
    catalog_properties: Mapping[str, str] | None = None,
    jar: str | os.PathLike[str] | None = None,
    packages: str | None = None,
    extra_conf: Mapping[str, str] | None = None,
    app_name: str = "dbt_iceberg_maint",
    master: str = "local[2]",
) -> SparkSession:
    """Start (or reuse) the local SparkSession with Iceberg as its default catalog. Its driver
    memory: `extra_conf`'s spark.driver.memory, else DBT_ICEBERG_MAINT_DRIVER_MEMORY, else a quarter
    of the machine's memory within 1g..8g (only a starting JVM takes it)."""
    check_java()
    runtime = resolve_iceberg_runtime(jar, packages)
    memory = None if DRIVER_MEMORY_CONF in (extra_conf or {}) else driver_memory().value
    warehouse_path = str(warehouse or os.environ.get(WAREHOUSE_ENV) or DEFAULT_WAREHOUSE)
    if "://" not in warehouse_path:
        warehouse_path = str(Path(warehouse_path).expanduser().resolve())
    catalog = CatalogSpec(
        warehouse=warehouse_path,
        name=catalog_name or DEFAULT_CATALOG,
        properties=dict(catalog_properties or {}),
    )
    prepare_warehouse(catalog)
    driver_jars = catalog_driver_jars(catalog)
    if driver_jars:  # added to the runtime's jars and the caller's (session_conf merges spark.jars)
        extra_conf = {**dict(extra_conf or {})}
        extra_conf["spark.jars"] = ",".join([extra_conf.get("spark.jars", ""), *driver_jars])
    # A local runtime talks to itself only; binding to loopback also avoids Spark's
    # "hostname resolves to a loopback address" warning.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in session_conf(runtime, catalog, extra_conf, memory).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def register_catalog(spark: SparkSession, catalog: CatalogSpec) -> None:
    """Add another Iceberg catalog to a running session and make it the default one.

    The catalog is defined by `catalog` alone: settings a previous catalog of the same name left
    in the session are removed (e.g. the embedded default's `jdbc.init-catalog-tables=false` would
    keep a JDBC catalog on a fresh PostgreSQL database from creating its tables)."""
    prepare_warehouse(catalog)
    conf = catalog.spark_conf()
    prefix = f"spark.sql.catalog.{catalog.name}."
    for key in _session_conf_keys(spark):
        if key.startswith(prefix) and key not in conf:
            spark.conf.unset(key)
    for key, value in conf.items():
        spark.conf.set(key, value)


def switch_warehouse(
    spark: SparkSession, warehouse: str | os.PathLike[str], catalog_name: str = DEFAULT_CATALOG,
    properties: Mapping[str, str] | None = None,
) -> CatalogSpec:
    """Point the session's default Iceberg catalog at another warehouse directory.

    Spark caches catalog instances, so the cached ones are dropped and the catalog is
    initialised again, from the new warehouse, on first use. Used to give each test module a
    warehouse of its own while the whole suite shares one JVM. `properties`: the catalog's
    (default: the embedded default); the JVM must already have any driver jar they need.
    """
    catalog = CatalogSpec(warehouse=str(Path(warehouse).resolve()), name=catalog_name,
                          properties=dict(properties or {}))
    register_catalog(spark, catalog)
    spark._jsparkSession.sessionState().catalogManager().reset()  # noqa: SLF001
    return catalog


def _session_conf_keys(spark: SparkSession) -> list[str]:
    """Every key set in the session's SQL configuration. Read from the JVM, not with `SET`: any
    statement would load the session's current catalog from the settings being replaced."""
    keys = spark._jsparkSession.sessionState().conf().getAllConfs().keysIterator()  # noqa: SLF001
    found: list[str] = []
    while keys.hasNext():
        found.append(str(keys.next()))
    return found
