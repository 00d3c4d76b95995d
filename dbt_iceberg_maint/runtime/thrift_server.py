"""A local Spark Thrift Server with the embedded Iceberg catalog: what dbt Cloud connects to.

dbt Cloud reaches Spark through a server (Thrift/HTTP) and can only send SQL, so the package's
macros are proven over a real `HiveThriftServer2` started from pyspark's own jars. What to
start (the `spark-submit` command line) is pure and built from the same pieces as the embedded
session (`dbt_iceberg_maint.runtime.spark`); `ThriftServer` is the thin process shell around it.

    python -m dbt_iceberg_maint.runtime.thrift_server start --warehouse /tmp/wh   # prints host/port/pid
    python -m dbt_iceberg_maint.runtime.thrift_server stop --state-dir <dir>

Starting, waiting, log reading and stopping are `dbt_iceberg_maint.runtime.processes`' (shared with the
lab's cluster, PostgreSQL and workers). Over 300 lines: what to start (the spec), the handle on
the running server (ports read from its log, readiness, stop) and the `python -m` command are one
feature that changes together; the handle alone would be a module of one class.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType

from dbt_iceberg_maint.errors import RuntimeSetupError
from dbt_iceberg_maint.runtime import embedded_catalog, processes
from dbt_iceberg_maint.runtime.spark import (
    DEFAULT_CATALOG,
    ICEBERG_JAR_ENV,
    ICEBERG_PACKAGES_ENV,
    CatalogSpec,
    IcebergRuntime,
    catalog_driver_jars,
    check_java,
    prepare_warehouse,
    resolve_iceberg_runtime,
    session_conf,
)

THRIFT_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
THRIFT_SERVER_JAR_PREFIX = "spark-hive-thriftserver_"
HOST_ENV = "DBT_ICEBERG_MAINT_THRIFT_HOST"
PORT_ENV = "DBT_ICEBERG_MAINT_THRIFT_PORT"
LOOPBACK = "127.0.0.1"
STATE_FILE = "thrift_server.json"
LOG_FILE = "thrift_server.log"
DEFAULT_START_TIMEOUT_S = 180.0
DEFAULT_STOP_TIMEOUT_S = 30.0
# Port 0 lets the server bind whatever port is free at that moment (no "find a free port,
# release it, bind it later" race); these log lines say which ports it got.
THRIFT_PORT_LINE = re.compile(r"Starting ThriftBinaryCLIService on port (\d+) ")
UI_PORT_LINE = re.compile(r"Successfully started service 'SparkUI' on port (\d+)\.")


@dataclass(frozen=True)
class ThriftServerSpec:
    """Everything that decides how the server starts; `command()` turns it into argv."""

    catalog: CatalogSpec
    runtime: IcebergRuntime
    port: int  # 0: the server binds a free port itself and logs it
    host: str = LOOPBACK
    driver_memory: str = "1g"
    master: str = "local[2]"
    # The Spark UI's REST API (`/api/v1`) shows which statements are executing; off unless asked
    # (0: a free port, logged).
    ui_port: int | None = None
    extra_conf: Mapping[str, str] = field(default_factory=dict)

    def spark_conf(self) -> dict[str, str]:
        conf = session_conf(self.runtime, self.catalog)
        # The Hive metastore the server insists on (it enables Hive support itself) lives in
        # the server's own working directory; Iceberg tables never use it.
        conf.pop("spark.sql.catalogImplementation", None)
        conf["spark.sql.shuffle.partitions"] = "2"
        conf["spark.app.name"] = f"dbt_iceberg_maint thrift server :{self.port or 'auto'}"
        if self.ui_port is not None:
            conf["spark.ui.enabled"] = "true"
            conf["spark.ui.port"] = str(self.ui_port)
        conf.update(self.extra_conf)
        return conf

    def command(self, spark_submit: str | os.PathLike[str]) -> list[str]:
        argv = [
            str(spark_submit),
            "--class",
            THRIFT_SERVER_CLASS,
            "--master",
            self.master,
            "--driver-memory",
            self.driver_memory,
            "--name",
            f"dbt_iceberg_maint-thrift-{self.port or 'auto'}",
        ]
        if self.runtime.packages or not self.runtime.jars:
            raise RuntimeSetupError(
                "the Spark Thrift Server needs the Iceberg runtime jar on its driver class path, which "
                f"Maven coordinates ({ICEBERG_PACKAGES_ENV}) cannot provide; give a jar instead "
                f"(jar=... or {ICEBERG_JAR_ENV}=/path/to/iceberg-spark-runtime-3.5_2.12-1.10.2.jar)")
        # With the runtime only in spark.jars the server's session cannot load the `iceberg`
        # source or the catalog class; the driver class path can.
        argv += ["--driver-class-path", os.pathsep.join(self.runtime.jars)]
        for key, value in sorted(self.spark_conf().items()):
            argv += ["--conf", f"{key}={value}"]
        argv += [
            "--hiveconf",
            f"hive.server2.thrift.bind.host={self.host}",
            "--hiveconf",
            f"hive.server2.thrift.port={self.port}",
            "--hiveconf",
            "hive.server2.transport.mode=binary",
            # spark-submit needs a primary resource; the server's class lives in pyspark's jars.
            "spark-internal",
        ]
        return argv


def server_catalog(warehouse: str | os.PathLike[str], name: str | None = None,
                   properties: Mapping[str, str] | None = None) -> CatalogSpec:
    """The embedded default catalog, as served to many client sessions.

    Every client connection gets its own Spark session (its own catalog instance); with
    Iceberg's table cache on (30 s by default) one connection would read another's tables
    stale, so the cache is off unless the caller says otherwise.
    """
    path = str(warehouse)
    if "://" not in path:
        path = str(Path(path).expanduser().resolve())
    return CatalogSpec(
        warehouse=path,
        name=name or DEFAULT_CATALOG,
        properties={"cache-enabled": "false", **dict(properties or {})},
    )


def prepare_default_namespace(catalog: CatalogSpec) -> None:
    """Clients run `USE default` on connect: the namespace must exist (the embedded SQLite
    catalog: its row; a Hadoop catalog: its directory)."""
    prepare_warehouse(catalog)
    if catalog.sqlite_database is not None:
        embedded_catalog.create_namespace(catalog.sqlite_database, catalog.name, "default")
    if catalog.catalog_type == "hadoop" and "://" not in catalog.warehouse:
        (Path(catalog.warehouse) / "default").mkdir(parents=True, exist_ok=True)


def pyspark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def find_spark_submit(spark_home: Path | None = None) -> Path:
    """pyspark's own `spark-submit`, after checking its jars carry the Thrift server."""
    home = spark_home or pyspark_home()
    submit = home / "bin" / "spark-submit"
    if not submit.is_file():
        raise RuntimeSetupError(f"{submit} does not exist; reinstall pyspark (`pip install 'pyspark>=3.5.3,<3.6'`)")
    if not any(jar.name.startswith(THRIFT_SERVER_JAR_PREFIX) for jar in (home / "jars").glob("*.jar")):
        raise RuntimeSetupError(
            f"{home / 'jars'} has no {THRIFT_SERVER_JAR_PREFIX}*.jar, so {THRIFT_SERVER_CLASS} "
            "cannot start; use the pyspark wheel from PyPI (it ships the Hive Thrift server)"
        )
    return submit


def accepts_connections(host: str, port: int, timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


class ThriftServer:
    """One running `HiveThriftServer2` process group; a context manager that stops it."""

    def __init__(self, spec: ThriftServerSpec, state_dir: Path, process: subprocess.Popen[bytes],
                 log_offset: int = 0) -> None:
        self.spec = spec
        self.state_dir = state_dir
        self.process = process
        self.started = processes.Started(process, state_dir / LOG_FILE, log_offset)
        self.started_in_s: float | None = None
        self._port: int | None = spec.port or None
        self._ui_port: int | None = spec.ui_port or None

    @property
    def host(self) -> str:
        return self.spec.host

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeSetupError("the Spark Thrift Server has not reported its port yet; call wait_until_ready()")
        return self._port

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def ui_url(self) -> str | None:
        return None if self._ui_port is None else f"http://{self.host}:{self._ui_port}"

    @property
    def log_path(self) -> Path:
        return self.state_dir / LOG_FILE

    def profile_env(self) -> dict[str, str]:
        """What the `thrift` target of a dbt profile reads (see integration_tests/profiles.yml)."""
        return {HOST_ENV: self.host, PORT_ENV: str(self.port)}

    def _where(self) -> str:
        return f"{self.host}:{self._port}" if self._port is not None else f"{self.host} (port not reported yet)"

    def _read_ports(self) -> None:
        """The ports a server started on port 0 reports, read from its own part of the log."""
        ui_missing = self.spec.ui_port is not None and self._ui_port is None
        if self._port is not None and not ui_missing:
            return
        text = self.started.output()
        if self._port is None and (match := THRIFT_PORT_LINE.search(text)):
            self._port = int(match.group(1))
        if ui_missing and (match := UI_PORT_LINE.search(text)):
            self._ui_port = int(match.group(1))

    def wait_until_ready(self, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> float:
        """Block until the server accepts connections; seconds waited, or a clear error."""
        begun = time.monotonic()

        def accepting() -> bool | None:
            self._read_ports()
            return True if self._port is not None and accepts_connections(self.host, self._port) else None

        processes.wait_until(
            accepting, self.started, timeout_s, interval_s=0.5,
            exited=lambda code: f"the Spark Thrift Server exited with code {code} before accepting connections on "
                                f"{self._where()}",
            timed_out=lambda: f"the Spark Thrift Server did not accept connections on {self._where()}")
        self.started_in_s = time.monotonic() - begun
        return self.started_in_s

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> int | None:
        """SIGTERM the server's own process group, SIGKILL it if it lingers; its exit code."""
        code = processes.stop(self.process, timeout_s)
        (self.state_dir / STATE_FILE).unlink(missing_ok=True)
        return code

    def __enter__(self) -> ThriftServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()


def start_thrift_server(
    warehouse: str | os.PathLike[str],
    state_dir: str | os.PathLike[str],
    *,
    port: int | None = None,
    catalog_name: str | None = None,
    catalog_properties: Mapping[str, str] | None = None,
    jar: str | os.PathLike[str] | None = None,
    packages: str | None = None,
    extra_jars: Sequence[str] = (),
    master: str = "local[2]",
    driver_memory: str = "1g",
    with_ui: bool = False,
    extra_conf: Mapping[str, str] | None = None,
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    stop_with_parent: bool = False,
) -> ThriftServer:
    """Start a Spark Thrift Server on 127.0.0.1 and return once it accepts connections.

    port: None (default) lets the server bind a free port itself and reads it from the server's
    log, so no other process can take the port between choosing and binding it; `server.port`
    is the real one. The UI (with_ui) binds a free port the same way.

    stop_with_parent: the server gets SIGTERM when the thread that started it ends, the whole
    process included, even by SIGKILL (Linux, util-linux's setpriv), so a test run that is
    killed leaves no server behind; start it from the main thread. The `start` command leaves it
    off: there the server is meant to outlive the command.

    extra_jars: more jars for the driver class path and spark.jars (e.g. a JDBC catalog's
    driver); master: where the server's executors run (e.g. a standalone cluster's URL).
    """
    check_java()
    catalog = server_catalog(warehouse, catalog_name, catalog_properties)
    runtime = resolve_iceberg_runtime(jar, packages)
    spec = ThriftServerSpec(
        catalog=catalog,
        runtime=replace(runtime, jars=(*runtime.jars, *extra_jars, *catalog_driver_jars(catalog))),
        port=0 if port is None else port,
        master=master,
        driver_memory=driver_memory,
        ui_port=0 if with_ui else None,
        extra_conf=dict(extra_conf or {}),
    )
    if spec.port and accepts_connections(spec.host, spec.port):
        raise RuntimeSetupError(f"port {spec.port} on {spec.host} is already in use; choose another port "
                                "or stop what listens there")
    command = spec.command(find_spark_submit())
    prepare_default_namespace(catalog)
    state = Path(state_dir).resolve()
    state.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SPARK_LOCAL_IP": spec.host}
    env.pop("PYSPARK_GATEWAY_PORT", None)  # never attach to the test process's own JVM
    # Its own session (process group): stop() ends the server and nothing else.
    started = processes.start(command, state / LOG_FILE, env=env, cwd=state, with_parent=stop_with_parent)
    process = started.process
    server = ThriftServer(spec, state, process, log_offset=started.offset)
    (state / STATE_FILE).write_text(json.dumps({"pid": process.pid, "host": spec.host, "port": spec.port or None}))
    try:
        server.wait_until_ready(start_timeout_s)
    except BaseException:
        server.stop()  # an early exit, a timeout or Ctrl-C: leave no process or state file behind
        raise
    (state / STATE_FILE).write_text(json.dumps({"pid": process.pid, "host": spec.host, "port": server.port}))
    return server


def stop_recorded_server(state_dir: str | os.PathLike[str], timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> bool:
    """Stop the server that `start` recorded in `state_dir`; False when none was running."""
    state_file = Path(state_dir) / STATE_FILE
    if not state_file.is_file():
        return False
    processes.stop_pid(int(json.loads(state_file.read_text())["pid"]), timeout_s)
    state_file.unlink(missing_ok=True)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dbt_iceberg_maint.runtime.thrift_server",
                                     description="Start or stop a local Spark Thrift Server with Iceberg.")
    sub = parser.add_subparsers(dest="action", required=True)
    start = sub.add_parser("start", help="start in the background; prints host, port and pid as JSON")
    start.add_argument("--warehouse", required=True, help="Iceberg warehouse directory (the embedded catalog)")
    start.add_argument("--state-dir", default=".thrift_server", help="log, metastore and pid file live here")
    start.add_argument("--port", type=int, default=None, help="default: a free port the server binds itself")
    start.add_argument("--driver-memory", default="1g")
    stop = sub.add_parser("stop", help="stop the server recorded in --state-dir")
    stop.add_argument("--state-dir", default=".thrift_server")
    args = parser.parse_args(argv)
    try:
        if args.action == "start":
            server = start_thrift_server(args.warehouse, args.state_dir, port=args.port,
                                         driver_memory=args.driver_memory)
            print(json.dumps({"host": server.host, "port": server.port, "pid": server.pid,
                              "started_in_s": round(server.started_in_s or 0.0, 1), "log": str(server.log_path),
                              **server.profile_env()}))
            return 0
        stopped = stop_recorded_server(args.state_dir)
        print("stopped" if stopped else f"no server recorded in {args.state_dir}")
        return 0
    except RuntimeSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
