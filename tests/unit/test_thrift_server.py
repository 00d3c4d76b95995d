"""How the Spark Thrift Server is started and stopped, without starting a JVM."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from dbt_iceberg_maint.errors import RuntimeSetupError
from dbt_iceberg_maint.runtime.processes import group_alive, start, tail
from dbt_iceberg_maint.runtime.spark import CatalogSpec, IcebergRuntime
from dbt_iceberg_maint.runtime.thrift_server import (
    THRIFT_SERVER_CLASS,
    ThriftServer,
    ThriftServerSpec,
    find_spark_submit,
    prepare_default_namespace,
    server_catalog,
    stop_recorded_server,
)

RUNTIME = IcebergRuntime("argument", jars=("/jars/iceberg-spark-runtime.jar",))


def conf_pairs(argv: list[str]) -> dict[str, str]:
    pairs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def hiveconf(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == "--hiveconf"]


def spec(tmp_path: Path, **overrides: object) -> ThriftServerSpec:
    return ThriftServerSpec(catalog=server_catalog(tmp_path / "wh"), runtime=RUNTIME, port=10123, **overrides)  # type: ignore[arg-type]


def test_command_starts_the_thrift_server_class_on_loopback(tmp_path: Path) -> None:
    argv = spec(tmp_path).command("/spark/bin/spark-submit")
    assert argv[:3] == ["/spark/bin/spark-submit", "--class", THRIFT_SERVER_CLASS]
    assert argv[argv.index("--driver-memory") + 1] == "1g"
    assert hiveconf(argv) == [
        "hive.server2.thrift.bind.host=127.0.0.1",
        "hive.server2.thrift.port=10123",
        "hive.server2.transport.mode=binary",
    ]
    assert argv[-1] == "spark-internal"


def test_iceberg_runtime_goes_on_the_driver_class_path(tmp_path: Path) -> None:
    argv = spec(tmp_path).command("spark-submit")
    # Only --jars/spark.jars leaves the server unable to find the `iceberg` source.
    assert argv[argv.index("--driver-class-path") + 1] == "/jars/iceberg-spark-runtime.jar"


def test_maven_coordinates_are_refused_for_the_server(tmp_path: Path) -> None:
    # Maven jars land in spark.jars only, where the server cannot load the `iceberg` source.
    maven = IcebergRuntime("maven", packages=("org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2",))
    with pytest.raises(RuntimeSetupError, match="needs the Iceberg runtime jar on its driver class path.*"
                                                 "DBT_ICEBERG_MAINT_ICEBERG_JAR"):
        ThriftServerSpec(catalog=server_catalog(tmp_path), runtime=maven, port=1).command("spark-submit")


def test_catalog_is_the_embedded_default_with_the_table_cache_off(tmp_path: Path) -> None:
    conf = conf_pairs(spec(tmp_path).command("spark-submit"))
    warehouse = str((tmp_path / "wh").resolve())
    assert conf["spark.sql.catalog.local"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.local.type"] == "jdbc"
    assert conf["spark.sql.catalog.local.uri"] == f"jdbc:sqlite:{warehouse}/iceberg_catalog.db"
    assert conf["spark.sql.catalog.local.jdbc.schema-version"] == "V1"
    assert conf["spark.sql.catalog.local.warehouse"] == warehouse
    assert conf["spark.sql.defaultCatalog"] == "local"
    assert conf["spark.sql.extensions"] == "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
    # One session per connection: a cached table would read other connections' commits stale.
    assert conf["spark.sql.catalog.local.cache-enabled"] == "false"
    assert conf["spark.sql.shuffle.partitions"] == "2"
    assert conf["spark.ui.enabled"] == "false"
    # The server enables Hive support itself; the embedded in-memory setting must not fight it.
    assert "spark.sql.catalogImplementation" not in conf


def test_caller_properties_override_the_cache_default(tmp_path: Path) -> None:
    catalog = server_catalog(tmp_path, name="lake", properties={"cache-enabled": "true", "type": "rest", "uri": "http://x"})
    conf = ThriftServerSpec(catalog=catalog, runtime=RUNTIME, port=1).spark_conf()
    assert conf["spark.sql.catalog.lake.cache-enabled"] == "true"
    assert conf["spark.sql.catalog.lake.type"] == "rest"
    assert conf["spark.sql.defaultCatalog"] == "lake"


def test_ui_is_enabled_only_when_a_port_is_given(tmp_path: Path) -> None:
    conf = spec(tmp_path, ui_port=4077).spark_conf()
    assert (conf["spark.ui.enabled"], conf["spark.ui.port"]) == ("true", "4077")


def test_extra_conf_wins(tmp_path: Path) -> None:
    assert (
        spec(tmp_path, extra_conf={"spark.sql.shuffle.partitions": "8"}).spark_conf()["spark.sql.shuffle.partitions"]
        == "8"
    )


def test_default_namespace_exists_before_the_first_connection(tmp_path: Path) -> None:
    import sqlite3

    catalog = server_catalog(tmp_path / "wh")
    prepare_default_namespace(catalog)
    prepare_default_namespace(catalog)  # idempotent
    with sqlite3.connect(tmp_path / "wh" / "iceberg_catalog.db") as connection:
        rows = connection.execute("select catalog_name, namespace from iceberg_namespace_properties").fetchall()
    assert rows == [("local", "default")]


def test_default_namespace_directory_exists_on_a_hadoop_catalog(tmp_path: Path) -> None:
    catalog = server_catalog(tmp_path / "wh", properties={"type": "hadoop"})
    prepare_default_namespace(catalog)
    assert (tmp_path / "wh" / "default").is_dir()
    assert not (tmp_path / "wh" / "iceberg_catalog.db").exists()


def test_remote_warehouses_are_left_alone(tmp_path: Path) -> None:
    prepare_default_namespace(CatalogSpec(warehouse="s3://bucket/wh", properties={"type": "hadoop"}))
    assert not (tmp_path / "s3:").exists()
    with pytest.raises(RuntimeSetupError, match="not a local directory"):
        prepare_default_namespace(CatalogSpec(warehouse="s3://bucket/wh"))


def test_the_catalog_driver_goes_on_the_driver_class_path(tmp_path: Path) -> None:
    runtime = IcebergRuntime("argument", jars=(*RUNTIME.jars, "/usr/share/java/sqlite-jdbc.jar"))
    argv = ThriftServerSpec(catalog=server_catalog(tmp_path / "wh"), runtime=runtime, port=1).command("submit")
    assert argv[argv.index("--driver-class-path") + 1] == (
        "/jars/iceberg-spark-runtime.jar:/usr/share/java/sqlite-jdbc.jar")


def test_pyspark_ships_the_thrift_server() -> None:
    assert find_spark_submit().name == "spark-submit"


def test_spark_home_without_the_thrift_server_jar_is_explained(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    (tmp_path / "jars").mkdir()
    with pytest.raises(RuntimeSetupError, match="no spark-hive-thriftserver_"):
        find_spark_submit(tmp_path)
    with pytest.raises(RuntimeSetupError, match="does not exist"):
        find_spark_submit(tmp_path / "missing")


def test_tail_of_a_missing_log() -> None:
    assert tail(Path("/nonexistent/thrift.log")) == "(no log written)"


def test_stop_ends_the_whole_process_group_and_nothing_else(tmp_path: Path) -> None:
    # Raw processes on purpose: what stop must end is a bare process group with a child, as
    # spark-submit leaves one (bash -> java), and a bystander group it must not touch.
    process = subprocess.Popen(["bash", "-c", "sleep 300 & wait"], start_new_session=True)
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        server = ThriftServer(spec(tmp_path), tmp_path, process)
        assert group_alive(process.pid)
        assert server.stop(timeout_s=5) == -signal.SIGTERM
        deadline = time.monotonic() + 5
        while group_alive(process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not group_alive(process.pid)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_stop_recorded_server_without_a_state_file(tmp_path: Path) -> None:
    assert stop_recorded_server(tmp_path) is False


def test_cli_stop_without_a_recorded_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dbt_iceberg_maint.runtime.thrift_server import main

    assert main(["stop", "--state-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == f"no server recorded in {tmp_path}"


def test_cli_requires_an_action(capsys: pytest.CaptureFixture[str]) -> None:
    from dbt_iceberg_maint.runtime.thrift_server import main

    with pytest.raises(SystemExit) as usage:
        main([])
    assert usage.value.code == 2


# A stand-in that binds port 0 and logs the line the real server logs (the real server is
# started on port 0 by tests/thrift; this checks the reading of its log without a JVM).
LISTENER = (
    "import socket, time\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
    "print('26/11/23 16:22:00 INFO ThriftCLIService: Starting ThriftBinaryCLIService on port %d with 5...500 "
    "worker threads' % s.getsockname()[1], flush=True)\n"
    "time.sleep(60)\n"
)


def auto_port_spec(tmp_path: Path) -> ThriftServerSpec:
    return ThriftServerSpec(catalog=server_catalog(tmp_path / "wh"), runtime=RUNTIME, port=0)


def test_port_zero_is_read_from_this_servers_own_log_lines(tmp_path: Path) -> None:
    log = tmp_path / "thrift_server.log"
    # A previous server's lines in the same (appended) log must not be taken for this one's.
    log.write_text("26/11/22 10:00:00 INFO ThriftCLIService: Starting ThriftBinaryCLIService on port 1 with x\n")
    offset = log.stat().st_size
    started = start(["python3", "-c", LISTENER], log)  # as start_thrift_server starts the real one
    assert started.offset == offset
    server = ThriftServer(auto_port_spec(tmp_path), tmp_path, started.process, log_offset=started.offset)
    try:
        with pytest.raises(RuntimeSetupError, match="has not reported its port yet"):
            _ = server.port
        server.wait_until_ready(timeout_s=30)
        assert server.port > 1
        assert f"on port {server.port} with" in log.read_text()
    finally:
        server.stop(timeout_s=5)


def test_a_server_that_never_reports_its_port_times_out_clearly(tmp_path: Path) -> None:
    server = ThriftServer(auto_port_spec(tmp_path), tmp_path, start(["sleep", "30"], tmp_path / "sleep.log").process)
    try:
        with pytest.raises(RuntimeSetupError, match=r"accept connections on 127\.0\.0\.1 \(port not reported"):
            server.wait_until_ready(timeout_s=1)
    finally:
        server.stop(timeout_s=5)
