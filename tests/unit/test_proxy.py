"""The commit-cut proxy on real loopback sockets, with a tiny upstream that answers like PostgreSQL
(or, for the Hive Metastore matcher, with a Thrift reply header)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from lab.proxy import (
    COMMIT_STATEMENT,
    HMS_COMMIT,
    HMS_COMMIT_METHOD,
    READY_FOR_QUERY,
    CommitCutProxy,
    ProxyError,
    thrift_method,
)

REPLY = b"C\x00\x00\x00\x0dUPDATE 1\x00" + READY_FOR_QUERY + b"I"
# Thrift binary protocol headers (version 1, type call / reply, the method name, a sequence id).
THRIFT_CALL = b"\x80\x01\x00\x01" + thrift_method(HMS_COMMIT_METHOD) + b"\x00\x00\x00\x07"
THRIFT_REPLY = b"\x80\x01\x00\x02" + thrift_method(HMS_COMMIT_METHOD) + b"\x00\x00\x00\x07\x00"


class Upstream:
    """Echoes every chunk back followed by a ReadyForQuery; remembers what it received."""

    def __init__(self, reply: bytes = REPLY) -> None:
        self.reply = reply
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)  # close() does not wake a blocked accept(): poll instead
        self.stopping = threading.Event()
        self.received = bytearray()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            with conn:
                while data := conn.recv(4096):
                    self.received += data
                    try:
                        conn.sendall(self.reply)
                    except OSError:
                        break

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        self.listener.close()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    yield server
    server.close()


def exchange(port: int, payload: bytes, reply_end: bytes = READY_FOR_QUERY) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        client.sendall(payload)
        answer = b""
        while reply_end not in answer:
            data = client.recv(4096)
            if not data:
                break
            answer += data
        return answer


def test_relays_both_ways_when_not_armed(upstream: Upstream) -> None:
    with CommitCutProxy(upstream.port) as proxy:
        assert exchange(proxy.port, b"Q select 1") == REPLY
        assert exchange(proxy.port, b"P " + COMMIT_STATEMENT) == REPLY
        assert proxy.cuts == ()


def test_before_commit_never_forwards_the_statement(upstream: Upstream) -> None:
    with CommitCutProxy(upstream.port) as proxy:
        proxy.arm("before_commit")
        assert exchange(proxy.port, b"P " + COMMIT_STATEMENT + b" where x B t_merge") == b""
        cuts = proxy.wait_for_cuts(1, 5)
        assert [c.mode for c in cuts] == ["before_commit"]
        assert cuts[0].statement == b"P " + COMMIT_STATEMENT + b" where x B t_merge"  # the fault's own evidence
        assert COMMIT_STATEMENT not in upstream.received
        assert exchange(proxy.port, b"P " + COMMIT_STATEMENT) == REPLY  # one cut only


def test_after_commit_forwards_the_statement_and_swallows_the_answer(upstream: Upstream) -> None:
    with CommitCutProxy(upstream.port) as proxy:
        proxy.arm("after_commit")
        assert exchange(proxy.port, b"Q select 1") == REPLY  # other statements pass
        assert exchange(proxy.port, b"P " + COMMIT_STATEMENT + b" B t_append") == b""
        cuts = proxy.wait_for_cuts(1, 5)
        assert [(c.mode, c.reply_swallowed) for c in cuts] == [("after_commit", True)]
        assert cuts[0].statement.endswith(b"B t_append")
        assert COMMIT_STATEMENT in upstream.received


def test_disarm_and_bad_modes(upstream: Upstream) -> None:
    proxy = CommitCutProxy(upstream.port)
    with pytest.raises(ProxyError, match="not started"):
        _ = proxy.port
    with pytest.raises(ProxyError, match="mode must be one of"):
        proxy.arm("sometimes")
    proxy.arm("after_commit", times=2)
    assert proxy.disarm() == 2


@pytest.mark.parametrize("mode", ["before_commit", "after_commit"])
def test_hive_metastore_matcher_cuts_the_alter_table_call(mode: str) -> None:
    """Other Thrift calls (the table lock's `lock`, `check_lock`) pass; the commit's call is cut."""
    upstream = Upstream(THRIFT_REPLY)
    try:
        with CommitCutProxy(upstream.port, matcher=HMS_COMMIT) as proxy:
            proxy.arm(mode)
            lock = b"\x80\x01\x00\x01" + thrift_method(b"check_lock") + b"\x00\x00\x00\x05"
            assert exchange(proxy.port, lock, HMS_COMMIT_METHOD) == THRIFT_REPLY
            assert exchange(proxy.port, THRIFT_CALL + b"\x0b\x00\x01torture\x0b\x00\x02t_merge",
                            HMS_COMMIT_METHOD) == b""
            cuts = proxy.wait_for_cuts(1, 5)
            assert [(c.mode, c.reply_swallowed) for c in cuts] == [(mode, mode == "after_commit")]
            assert cuts[0].statement.endswith(b"t_merge")
            assert (THRIFT_CALL in upstream.received) == (mode == "after_commit")
    finally:
        upstream.close()
