"""Jar resolution, Java detection and Spark configuration, without starting a JVM."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]

from dbt_iceberg_maint.errors import RuntimeSetupError
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT
from dbt_iceberg_maint.runtime.spark import (
    ICEBERG_JAR_ENV,
    ICEBERG_PACKAGES_ENV,
    LOG4J2_ADDITIONS,
    REQUIRED_JAR_ENTRY,
    SPARK_LOG4J2_DEFAULTS,
    CatalogSpec,
    IcebergRuntime,
    bundled_iceberg_jar,
    check_iceberg_jar,
    check_java,
    log4j2_java_options,
    parse_java_major,
    prepare_warehouse,
    resolve_iceberg_runtime,
    session_conf,
)


def make_jar(path: Path, entries: list[str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for entry in entries:
            archive.writestr(entry, b"")
    return path


@pytest.fixture
def good_jar(tmp_path: Path) -> Path:
    return make_jar(tmp_path / "good.jar", [REQUIRED_JAR_ENTRY, "org/apache/iceberg/Table.class"])


@pytest.fixture
def broken_jar(tmp_path: Path) -> Path:
    # The shape of wheel 1.0.3's jar: Iceberg classes present, shaded Jackson missing.
    return make_jar(tmp_path / "iceberg-spark-runtime-broken.jar", ["org/apache/iceberg/Table.class"])


def test_explicit_jar_wins_over_environment(good_jar: Path, broken_jar: Path) -> None:
    runtime = resolve_iceberg_runtime(jar=good_jar, environ={ICEBERG_JAR_ENV: str(broken_jar)})
    assert runtime == IcebergRuntime("argument", jars=(str(good_jar),))


def test_environment_jar_wins_over_maven_and_bundle(good_jar: Path) -> None:
    environ = {ICEBERG_JAR_ENV: str(good_jar), ICEBERG_PACKAGES_ENV: "a:b:1"}
    assert resolve_iceberg_runtime(environ=environ) == IcebergRuntime("environment", jars=(str(good_jar),))


def test_maven_coordinates_when_asked() -> None:
    runtime = resolve_iceberg_runtime(
        environ={ICEBERG_PACKAGES_ENV: "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"}
    )
    assert runtime.source == "maven"
    assert runtime.spark_conf() == {
        "spark.jars.packages": "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"
    }


def test_malformed_maven_coordinates_are_refused() -> None:
    with pytest.raises(RuntimeSetupError, match="not Maven coordinates"):
        resolve_iceberg_runtime(packages="iceberg-1.10")


def test_bundled_jar_is_the_default_and_is_sound() -> None:
    runtime = resolve_iceberg_runtime(environ={})
    assert runtime.source == "bundled"
    assert runtime.jars == (str(bundled_iceberg_jar()),)
    assert runtime.jars[0].endswith("iceberg-spark-runtime-3.5_2.12-1.10.2.jar")


def test_jar_without_shaded_jackson_fails_with_the_jar_and_the_fix(broken_jar: Path) -> None:
    with pytest.raises(RuntimeSetupError) as excinfo:
        resolve_iceberg_runtime(jar=broken_jar)
    message = str(excinfo.value)
    assert str(broken_jar) in message
    assert "JsonFactoryBuilder" in message
    assert "snowpark-connect-deps-iceberg==1.0.2" in message
    assert "Exception" not in message  # a readable message, not a Java stack trace


def test_missing_jar_and_non_zip_jar(tmp_path: Path) -> None:
    with pytest.raises(RuntimeSetupError, match="does not exist"):
        check_iceberg_jar(tmp_path / "absent.jar")
    not_a_jar = tmp_path / "text.jar"
    not_a_jar.write_text("hello")
    with pytest.raises(RuntimeSetupError, match="not a jar"):
        check_iceberg_jar(not_a_jar)


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ("no version here", None),
    ],
)
def test_parse_java_major(output: str, major: int | None) -> None:
    assert parse_java_major(output) == major


def test_missing_java_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(RuntimeSetupError, match="install Java 17"):
        check_java(environ={"JAVA_HOME": str(tmp_path)})


def test_no_java_on_path_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no java anywhere
    with pytest.raises(RuntimeSetupError, match="Spark needs Java, but no `java` on PATH; install Java 17"):
        check_java(environ={})


def test_old_java_is_refused(tmp_path: Path) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text('#!/bin/sh\necho \'java version "1.8.0_392"\' >&2\n')
    java.chmod(0o755)
    with pytest.raises(RuntimeSetupError, match="the Iceberg 1.10 runtime needs Java 11\\+, found Java 8"):
        check_java(environ={"JAVA_HOME": str(tmp_path)})


def test_default_catalog_is_an_iceberg_jdbc_catalog_on_a_sqlite_file_in_the_warehouse() -> None:
    conf = session_conf(IcebergRuntime("bundled", jars=("/x.jar",)), CatalogSpec(warehouse="/wh"))
    assert conf["spark.sql.catalog.local"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.local.type"] == "jdbc"
    assert conf["spark.sql.catalog.local.uri"] == "jdbc:sqlite:/wh/iceberg_catalog.db"
    assert conf["spark.sql.catalog.local.jdbc.schema-version"] == "V1"  # views
    # The catalog tables are created before Spark starts (prepare_warehouse), never by Iceberg: its
    # start-up on existing tables leaves a read open that makes every commit of the process fail.
    assert conf["spark.sql.catalog.local.jdbc.init-catalog-tables"] == "false"
    assert int(conf["spark.sql.catalog.local.jdbc.busy_timeout"]) >= 30000
    assert conf["spark.sql.catalog.local.warehouse"] == "/wh"
    assert conf["spark.sql.defaultCatalog"] == "local"
    assert conf["spark.jars"] == "/x.jar"
    assert "IcebergSparkSessionExtensions" in conf["spark.sql.extensions"]


def test_every_local_profile_output_shuffles_into_as_few_partitions_as_start_session() -> None:
    """The profile users copy starts its own local Spark (a `maintain` in a new process): Spark's
    cluster-sized default of 200 shuffle partitions made each small table's expiry about three times
    slower on the peers benchmark."""
    conf = session_conf(IcebergRuntime("bundled", jars=("/x.jar",)), CatalogSpec(warehouse="/wh"))
    outputs = yaml.safe_load((INTEGRATION_PROJECT / "profiles.yml").read_text())[
        "iceberg_maint_integration_tests"]["outputs"]
    local = {name: output for name, output in outputs.items() if output["method"] == "session"}
    assert len(local) == 3, sorted(local)
    for name, output in local.items():
        assert output["server_side_parameters"]["spark.sql.shuffle.partitions"] == (
            conf["spark.sql.shuffle.partitions"]), name


def test_the_driver_reads_sparks_log_defaults_plus_the_packages_one_filter(tmp_path: Path) -> None:
    """Spark's defaults stay (a classpath resource), the package's file adds a filter for one
    message; a file URI keeps spaces and commas from splitting the option or the list."""
    conf = session_conf(IcebergRuntime("bundled", jars=("/x.jar",)), CatalogSpec(warehouse="/wh"))
    options = conf["spark.driver.extraJavaOptions"].split()
    assert options == ["-Duser.timezone=UTC", log4j2_java_options()]
    assert log4j2_java_options() == (f"-Dlog4j2.configurationFile={SPARK_LOG4J2_DEFAULTS},"
                                     f"{LOG4J2_ADDITIONS.resolve().as_uri()}")
    odd = tmp_path / "a dir, with a comma" / "log4j2.properties"
    assert log4j2_java_options(odd).endswith("/a%20dir%2C%20with%20a%20comma/log4j2.properties")
    settings = dict(line.split(" = ", 1) for line in LOG4J2_ADDITIONS.read_text().splitlines()
                    if line and not line.startswith("#"))
    # Exactly one context-wide filter that denies Iceberg's version-hint warning and nothing else.
    assert settings == {"filter.versionhint.type": "RegexFilter",
                        "filter.versionhint.regex": "Error reading version hint file \\\\{\\\\}",
                        "filter.versionhint.useRawMsg": "true", "filter.versionhint.onMatch": "DENY",
                        "filter.versionhint.onMismatch": "NEUTRAL"}


def test_the_hadoop_catalog_stays_selectable() -> None:
    conf = CatalogSpec(warehouse="/wh", properties={"type": "hadoop"}).spark_conf()
    assert conf["spark.sql.catalog.local.type"] == "hadoop"
    assert conf["spark.sql.catalog.local.warehouse"] == "/wh"
    assert not any(key.startswith("spark.sql.catalog.local.jdbc.") or key.endswith(".uri") for key in conf)
    assert CatalogSpec(warehouse="/wh", properties={"type": "hadoop"}).sqlite_database is None


def test_caller_properties_override_the_sqlite_defaults() -> None:
    catalog = CatalogSpec(warehouse="/wh", properties={"jdbc.busy_timeout": "5", "uri": "jdbc:sqlite:/c/cat.db"})
    conf = catalog.spark_conf()
    assert (conf["spark.sql.catalog.local.jdbc.busy_timeout"], conf["spark.sql.catalog.local.uri"]) == (
        "5", "jdbc:sqlite:/c/cat.db")
    assert catalog.sqlite_database == Path("/c/cat.db")
    postgres = CatalogSpec(warehouse="/wh", properties={"type": "jdbc", "uri": "jdbc:postgresql://h/db"})
    assert postgres.sqlite_database is None
    assert "spark.sql.catalog.local.jdbc.init-catalog-tables" not in postgres.spark_conf()


def test_the_embedded_default_needs_a_local_warehouse() -> None:
    with pytest.raises(RuntimeSetupError, match="not a local directory; pass the catalog's properties"):
        CatalogSpec(warehouse="s3://bucket/wh").spark_conf()
    assert CatalogSpec(warehouse="file:/wh").sqlite_database == Path("/wh/iceberg_catalog.db")


def test_more_jars_are_added_to_the_runtime_never_replacing_it() -> None:
    conf = session_conf(IcebergRuntime("bundled", jars=("/x.jar",)), CatalogSpec(warehouse="/wh"),
                        {"spark.jars": ",/pg.jar,/x.jar,/sqlite.jar"})
    assert conf["spark.jars"] == "/x.jar,/pg.jar,/sqlite.jar"


def test_more_driver_options_follow_the_runtimes_never_replacing_them() -> None:
    runtime, catalog = IcebergRuntime("bundled", jars=("/x.jar",)), CatalogSpec(warehouse="/wh")
    conf = session_conf(runtime, catalog, {"spark.driver.extraJavaOptions": " -Xss4m "})
    assert conf["spark.driver.extraJavaOptions"].split() == ["-Duser.timezone=UTC", log4j2_java_options(), "-Xss4m"]


def test_prepare_warehouse_creates_the_catalog_tables_in_wal_mode(tmp_path: Path) -> None:
    import sqlite3

    catalog = CatalogSpec(warehouse=str(tmp_path / "wh"))
    prepare_warehouse(catalog)
    prepare_warehouse(catalog)  # idempotent
    database = tmp_path / "wh" / "iceberg_catalog.db"
    with sqlite3.connect(database) as connection:
        assert connection.execute("pragma journal_mode").fetchone()[0] == "wal"
        columns = [row[1] for row in connection.execute("pragma table_info(iceberg_tables)")]
        tables = {row[0] for row in connection.execute("select name from sqlite_master where type = 'table'")}
    assert "iceberg_type" in columns  # schema V1: views
    assert {"iceberg_tables", "iceberg_namespace_properties"} <= tables


def test_a_missing_sqlite_driver_is_explained(tmp_path: Path) -> None:
    from dbt_iceberg_maint.runtime.embedded_catalog import SQLITE_JDBC_JAR_ENV, find_sqlite_jdbc_jar

    with pytest.raises(RuntimeSetupError, match=f"{SQLITE_JDBC_JAR_ENV}=.*does not exist"):
        find_sqlite_jdbc_jar({SQLITE_JDBC_JAR_ENV: str(tmp_path / "nope.jar")})
    jar = tmp_path / "sqlite-jdbc.jar"
    jar.write_bytes(b"")
    assert find_sqlite_jdbc_jar({SQLITE_JDBC_JAR_ENV: str(jar)}) == jar


def test_other_catalog_types_through_properties() -> None:
    rest = CatalogSpec(warehouse="s3://bucket/wh", name="lake",
                       properties={"type": "rest", "uri": "http://127.0.0.1:8181"})
    conf = rest.spark_conf()
    assert conf["spark.sql.catalog.lake.type"] == "rest"
    assert conf["spark.sql.catalog.lake.uri"] == "http://127.0.0.1:8181"
    glue = CatalogSpec(warehouse="s3://b/wh", properties={"catalog-impl": "org.apache.iceberg.aws.glue.GlueCatalog"})
    assert "spark.sql.catalog.local.type" not in glue.spark_conf()


def test_invalid_catalog_name_is_refused() -> None:
    with pytest.raises(RuntimeSetupError, match="not a valid Spark identifier"):
        CatalogSpec(warehouse="/wh", name="my-catalog").spark_conf()


def test_env_prints_export_lines_or_json_through_the_output_layer(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from dbt_iceberg_maint.cli import main
    from dbt_iceberg_maint.runtime.spark import DRIVER_JAVA_OPTIONS_ENV, WAREHOUSE_ENV

    warehouse = tmp_path / "wh" / ("long_folder_name_" * 12)  # export lines are never wrapped
    text = CliRunner().invoke(main, ["env", "--warehouse", str(warehouse)])
    assert text.exit_code == 0, text.output
    assert f"export {WAREHOUSE_ENV}={warehouse.resolve()}" in text.output.splitlines()
    assert f"export {DRIVER_JAVA_OPTIONS_ENV}={log4j2_java_options()}" in text.output.splitlines()
    as_json = CliRunner().invoke(main, ["env", "--warehouse", str(warehouse), "--output", "json"])
    assert json.loads(as_json.output)[WAREHOUSE_ENV] == str(warehouse.resolve())
    spaced = CliRunner().invoke(main, ["env", "--warehouse", str(tmp_path / "my warehouse")])
    assert f"export {WAREHOUSE_ENV}='{(tmp_path / 'my warehouse').resolve()}'" in spaced.output.splitlines()
