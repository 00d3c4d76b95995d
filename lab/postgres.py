"""A private PostgreSQL server for a JDBC Iceberg catalog: installed with apt-get when missing,
initialised in a temporary directory as the `postgres` user, started on a free loopback port,
stopped by its own process id (and by the parent-death signal when the starting process dies)."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dbt_iceberg_maint.errors import RuntimeSetupError
from dbt_iceberg_maint.runtime import processes

JDBC_JAR = Path("/usr/share/java/postgresql.jar")
PACKAGES = ("postgresql", "libpostgresql-jdbc-java")


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def ensure_installed() -> Path:
    """The PostgreSQL bin directory; apt-get installs what is missing (needs root)."""
    if _bin_dir() is None or not JDBC_JAR.is_file():
        if os.geteuid() != 0:
            raise RuntimeSetupError(f"PostgreSQL or {JDBC_JAR} is missing and installing needs root: "
                                    f"apt-get install {' '.join(PACKAGES)}")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], check=True, capture_output=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-q", *PACKAGES], check=True, capture_output=True, env=env)
    bin_dir = _bin_dir()
    if bin_dir is None or not JDBC_JAR.is_file():
        raise RuntimeSetupError(f"apt-get install {' '.join(PACKAGES)} did not provide initdb and {JDBC_JAR}")
    return bin_dir


def ensure_jdbc_jar() -> Path | None:
    """The PostgreSQL JDBC driver jar, installed with apt-get when missing and possible."""
    if not JDBC_JAR.is_file() and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-q", PACKAGES[1]], capture_output=True, env=env)
    return JDBC_JAR if JDBC_JAR.is_file() else None


def free_port() -> int:
    """A loopback port free now (for servers that cannot bind port 0: retry when it is taken)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_postgres(args: list[str]) -> list[str]:
    return args if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--", *args]


@dataclass(frozen=True)
class PostgresServer:
    data_dir: Path
    port: int
    pid: int
    database: str

    @property
    def jdbc_uri(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{self.database}"

    def spark_catalog_properties(self, warehouse: str) -> dict[str, str]:
        """`spark.sql.catalog.<name>.*` of an Iceberg JDBC catalog on this server."""
        return {"type": "jdbc", "uri": self.jdbc_uri, "jdbc.user": "postgres", "jdbc.password": "postgres",
                "warehouse": warehouse}

    def stop(self) -> None:
        """SIGINT to the postmaster alone (fast shutdown: it ends its backends itself)."""
        processes.stop_pid(self.pid, first=signal.SIGINT, whole_group=False)


def _postmaster_command(bin_dir: Path, data_dir: Path, socket_dir: Path, port: int) -> list[str]:
    """The postmaster itself (no pg_ctl, which detaches it) under setpriv: the parent-death signal
    SIGINT (fast shutdown) ends it when the process that started it dies, even by SIGKILL; as
    root setpriv also switches to the `postgres` user (after which it sets the signal)."""
    # Every Thrift Server session opens JDBC catalog connections of its own and keeps them: 100
    # (the default) runs out after a few dozen dbt runs against one server.
    command = [str(bin_dir / "postgres"), "-D", str(data_dir), "-p", str(port), "-c", "listen_addresses=127.0.0.1",
               "-c", "max_connections=1000", "-k", str(socket_dir)]
    as_postgres = ["--reuid", "postgres", "--regid", "postgres", "--init-groups"] if os.geteuid() == 0 else []
    return processes.terminated_with_parent(command, "INT", as_postgres)


def _ready(bin_dir: Path, port: int) -> bool:
    result = subprocess.run([str(bin_dir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)],
                            capture_output=True)
    return result.returncode == 0


def _wait_ready(started: processes.Started, bin_dir: Path, port: int, timeout_s: float) -> None:
    processes.wait_until(lambda: True if _ready(bin_dir, port) else None, started, timeout_s, interval_s=0.2,
                         exited=lambda code: f"PostgreSQL exited with code {code}",
                         timed_out=lambda: f"PostgreSQL did not accept connections on port {port}")


def start_server(database: str = "iceberg", attempts: int = 5, timeout_s: float = 60.0) -> PostgresServer:
    """Start from the main thread: the parent-death signal follows the thread that started it."""
    bin_dir = ensure_installed()
    root = Path(tempfile.mkdtemp(prefix="lab-pg-"))
    data_dir = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    subprocess.run(_as_postgres([str(bin_dir / "initdb"), "-A", "trust", "-U", "postgres", "-D", str(data_dir)]),
                   check=True, capture_output=True)
    last_error: RuntimeSetupError | None = None
    for _ in range(attempts):
        port = free_port()  # the postmaster cannot bind port 0; another process may take it: retry
        started = processes.start(_postmaster_command(bin_dir, data_dir, root, port), root / "server.log")
        try:
            _wait_ready(started, bin_dir, port, timeout_s)
        except RuntimeSetupError as exc:
            PostgresServer(data_dir, port, started.pid, database).stop()
            last_error = exc
            continue
        subprocess.run([str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", database],
                       check=True, capture_output=True)
        return PostgresServer(data_dir, port, started.pid, database)
    raise RuntimeSetupError(f"PostgreSQL did not start after {attempts} attempts: {last_error}")
