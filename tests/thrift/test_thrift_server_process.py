"""The Thrift Server's process shell: a start that fails explains itself and leaves nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dbt_iceberg_maint.errors import RuntimeSetupError
from dbt_iceberg_maint.thrift_server import STATE_FILE, ThriftServer, accepts_connections, start_thrift_server

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
