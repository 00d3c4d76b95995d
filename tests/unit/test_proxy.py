"""The commit-cut proxy on real loopback sockets, with a tiny upstream that answers like PostgreSQL."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from lab.proxy import COMMIT_STATEMENT, READY_FOR_QUERY, CommitCutProxy, ProxyError

REPLY = b"C\x00\x00\x00\x0dUPDATE 1\x00" + READY_FOR_QUERY + b"I"


class Upstream:
    """Echoes every chunk back followed by a ReadyForQuery; remembers what it received."""

    def __init__(self) -> None:
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
                        conn.sendall(REPLY)
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


def exchange(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        client.sendall(payload)
        answer = b""
        while READY_FOR_QUERY not in answer:
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
