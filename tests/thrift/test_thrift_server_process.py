"""The Thrift Server's process shell: a start that fails explains itself and leaves nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dbt_iceberg_maint.errors import RuntimeSetupError
from dbt_iceberg_maint.runtime.processes import group_alive
from dbt_iceberg_maint.runtime.thrift_server import (
    STATE_FILE,
    ThriftServer,
    accepts_connections,
    start_thrift_server,
)

pytestmark = pytest.mark.integration


def test_running_server_is_its_own_process_group_on_loopback(thrift_server: ThriftServer) -> None:
    assert os.getpgid(thrift_server.pid) == thrift_server.pid  # stop() signals exactly this group
    assert thrift_server.host == "127.0.0.1" and accepts_connections(thrift_server.host, thrift_server.port)
    assert (thrift_server.state_dir / STATE_FILE).is_file()
    assert thrift_server.started_in_s is not None and thrift_server.started_in_s > 0


def test_failed_start_names_the_exit_and_shows_the_log_tail(tmp_path: Path) -> None:
    with pytest.raises(RuntimeSetupError) as failure:
        start_thrift_server(tmp_path / "wh", tmp_path / "state", driver_memory="1x", start_timeout_s=60)
    message = str(failure.value)
    assert "exited with code" in message and "before accepting connections" in message
    assert "Invalid maximum heap size" in message  # the JVM's own words, from the log tail
    assert not (tmp_path / "state" / STATE_FILE).exists()  # nothing recorded as running


def test_a_port_in_use_is_refused_before_anything_starts(thrift_server: ThriftServer, tmp_path: Path) -> None:
    with pytest.raises(RuntimeSetupError, match=f"port {thrift_server.port} on 127.0.0.1 is already in use"):
        start_thrift_server(tmp_path / "wh", tmp_path / "state", port=thrift_server.port)
    assert not (tmp_path / "state" / STATE_FILE).exists()


STARTER = """
import sys, time
from dbt_iceberg_maint.runtime.thrift_server import start_thrift_server
server = start_thrift_server(sys.argv[1], sys.argv[2], stop_with_parent=True)
print(server.pid, flush=True)
time.sleep(600)
"""


def test_a_killed_starter_leaves_no_server_behind(tmp_path: Path) -> None:
    """SIGKILL gives the starter no chance to clean up: the kernel stops the server (pdeathsig)."""
    # Raw on purpose: the starter is the process under test (SIGKILLed alone, the server's pid
    # read from its stdout); the server itself is started by start_thrift_server.
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path / "wh"), str(tmp_path / "state")],
                               stdout=subprocess.PIPE, text=True)
    server_pid = None
    try:
        line = starter.stdout.readline()
        assert line.strip().isdigit(), f"the starter printed no server pid: {line!r}"
        server_pid = int(line)
        assert accepts_connections("127.0.0.1", json.loads((tmp_path / "state" / STATE_FILE).read_text())["port"])
        starter.kill()
        starter.wait(timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and group_alive(server_pid):
            time.sleep(0.2)
        assert not group_alive(server_pid), f"the server (process group {server_pid}) outlived its killed starter"
    finally:
        starter.kill()
        if server_pid is not None and group_alive(server_pid):
            os.killpg(server_pid, signal.SIGKILL)  # never leave a JVM behind, even when the test fails

