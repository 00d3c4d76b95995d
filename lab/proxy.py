"""A loopback TCP proxy between Spark and its catalog's server that cuts the connection at commit.

The proxy relays bytes both ways and, when armed, cuts the connection the next time a client sends
the catalog's commit request (a `CommitMatcher`):

- `before_commit`: the request is never forwarded, so the commit cannot have landed;
- `after_commit`: the request is forwarded and the server's answer (up to the matcher's end of
  reply, i.e. after the commit landed) is swallowed, so the commit landed but the client never
  hears of it.

Two matchers:
- `JDBC_COMMIT` (Iceberg's JDBC catalog on PostgreSQL): the one statement `UPDATE iceberg_tables SET
  metadata_location = ... WHERE ... AND metadata_location = <old>`, answered up to ReadyForQuery
  (the transaction committed). The JDBC URL must disable server-side prepared statements
  (`prepareThreshold=0`): the driver then sends the SQL text with every execution.
- `HMS_COMMIT` (Iceberg's Hive catalog on a Hive Metastore): the Thrift call
  `alter_table_with_environment_context` (Iceberg's MetastoreUtil picks the HMS 2.3 client's
  `alter_table_with_environmentContext`, inside the table lock: `lock`, `check_lock`, `unlock`
  around it). Thrift's binary protocol sends the method name, length-prefixed, in plain text in
  the header of the call and of its reply; the reply is written once the metastore committed.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass

from dbt_iceberg_maint.errors import IcebergMaintError

COMMIT_STATEMENT = b"UPDATE iceberg_tables SET metadata_location"
MODES = ("before_commit", "after_commit")
# PostgreSQL's ReadyForQuery message: 'Z', length 5, then the transaction status byte.
READY_FOR_QUERY = b"Z\x00\x00\x00\x05"
HMS_COMMIT_METHOD = b"alter_table_with_environment_context"
_CHUNK = 65536
STATEMENT_BYTES = 4096


class ProxyError(IcebergMaintError):
    """The proxy was asked for something it cannot do (unknown mode, not started)."""


@dataclass(frozen=True)
class CommitMatcher:
    """How a catalog's commit shows on the wire: `request` in the client's bytes, `reply_end` in
    the server's bytes once it answered the commit (so the commit landed)."""

    request: bytes
    reply_end: bytes


def thrift_method(name: bytes) -> bytes:
    """A method name as Thrift's binary protocol frames it in a message header (call or reply)."""
    return struct.pack(">i", len(name)) + name


JDBC_COMMIT = CommitMatcher(COMMIT_STATEMENT, READY_FOR_QUERY)
# Only replies travel from the metastore to the client, so the name marks the commit's own reply.
HMS_COMMIT = CommitMatcher(thrift_method(HMS_COMMIT_METHOD), thrift_method(HMS_COMMIT_METHOD))


@dataclass(frozen=True)
class Cut:
    """One connection the proxy cut: how, and when (time.time())."""

    mode: str
    at: float
    reply_swallowed: bool  # after_commit: the server answered (so it committed) before the cut
    # The bytes the client sent with the cut request (the table's name is in the same write: a bound
    # parameter of the statement, an argument of the Thrift call): which table's commit it hit.
    statement: bytes = b""


class _Pair:
    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.swallow_reply = threading.Event()
        self.closed = threading.Event()
        self.statement = b""

    def close(self) -> None:
        self.closed.set()
        for sock in (self.client, self.server):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


class CommitCutProxy:
    """Listens on a free loopback port (`port` after `start`), relays to `upstream_port`."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1",
                 matcher: CommitMatcher = JDBC_COMMIT) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.matcher = matcher
        self._listener: socket.socket | None = None
        self._lock = threading.Lock()
        self._armed: list[str] = []
        self._cuts: list[Cut] = []
        self._pairs: list[_Pair] = []
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()

    @property
    def port(self) -> int:
        if self._listener is None:
            raise ProxyError("the proxy is not started")
        return int(self._listener.getsockname()[1])

    def start(self) -> CommitCutProxy:
        listener = socket.create_server(("127.0.0.1", 0))
        listener.settimeout(0.2)
        self._listener = listener
        self._spawn(self._accept_loop)
        return self

    def arm(self, mode: str, times: int = 1) -> None:
        """Cut the next `times` commit requests (any connection) the given way."""
        if mode not in MODES:
            raise ProxyError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        with self._lock:
            self._armed.extend([mode] * times)

    def disarm(self) -> int:
        """Drop the cuts not yet made; returns how many were pending."""
        with self._lock:
            pending = len(self._armed)
            self._armed.clear()
            return pending

    @property
    def cuts(self) -> tuple[Cut, ...]:
        with self._lock:
            return tuple(self._cuts)

    def wait_for_cuts(self, count: int, timeout_s: float) -> tuple[Cut, ...]:
        deadline = time.monotonic() + timeout_s
        while len(self.cuts) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.cuts

    def stop(self) -> None:
        self._stopping.set()
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            pair.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> CommitCutProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = _Pair(client, server)
            with self._lock:
                self._pairs.append(pair)
            self._spawn(self._client_to_server, pair)
            self._spawn(self._server_to_client, pair)

    def _take_armed(self) -> str | None:
        with self._lock:
            return self._armed.pop(0) if self._armed else None

    def _client_to_server(self, pair: _Pair) -> None:
        tail = b""
        try:
            while not pair.closed.is_set():
                data = pair.client.recv(_CHUNK)
                if not data:
                    break
                window = tail + data
                tail = window[-len(self.matcher.request):]
                mode = self._take_armed() if self.matcher.request in window else None
                if mode == "before_commit":
                    self._record(Cut(mode, time.time(), reply_swallowed=False, statement=window[:STATEMENT_BYTES]))
                    break
                if mode == "after_commit":
                    pair.statement = window[:STATEMENT_BYTES]
                    pair.swallow_reply.set()
                pair.server.sendall(data)
        except OSError:
            pass
        if not pair.swallow_reply.is_set():
            pair.close()

    def _server_to_client(self, pair: _Pair) -> None:
        swallowed = b""
        try:
            while not pair.closed.is_set():
                data = pair.server.recv(_CHUNK)
                if not data:
                    break
                if pair.swallow_reply.is_set():
                    swallowed += data
                    if self.matcher.reply_end in swallowed:
                        self._record(Cut("after_commit", time.time(), reply_swallowed=True, statement=pair.statement))
                        break
                    continue
                pair.client.sendall(data)
        except OSError:
            pass
        if pair.swallow_reply.is_set() and self.matcher.reply_end not in swallowed:
            self._record(Cut("after_commit", time.time(), reply_swallowed=False, statement=pair.statement))
        pair.close()

    def _record(self, cut: Cut) -> None:
        with self._lock:
            self._cuts.append(cut)
