"""A Hive Metastore table lock held by the test, to stage a real lost commit race on a Hive catalog.

Iceberg's Hive catalog refreshes the table, writes the new metadata file, then waits for the
metastore's exclusive table lock, and only under the lock compares its base metadata location with
the table's current one. The metastore grants waiting locks in the order they were requested. So
while the test holds the lock: another writer queues first, the writer under test queues second;
releasing the lock lets the other writer commit, and the writer under test then finds its base
stale (`CommitFailedException: Cannot commit: Base metadata location '...' is not same as the
current table metadata location '...'`).
"""

from __future__ import annotations

import getpass
import socket
import threading
import time
from collections.abc import Sequence
from types import TracebackType

from hive_metastore.ttypes import (
    LockComponent,
    LockLevel,
    LockRequest,
    LockState,
    LockType,
    ShowLocksRequest,
    UnlockRequest,
)

from lab.hive_metastore import open_client


class HeldTableLock:
    """`with HeldTableLock(metastore_port, db, table) as lock:` holds the table's exclusive lock until
    `release()` (or the block's end)."""

    def __init__(self, port: int, database: str, table: str) -> None:
        self.port, self.database, self.table = port, database, table
        self._lock_id: int | None = None
        self._guard = threading.Lock()  # the thrift client is used by the test and its releaser

    def __enter__(self) -> HeldTableLock:
        self._client, self._transport = open_client(self.port)
        component = LockComponent(type=LockType.EXCLUSIVE, level=LockLevel.TABLE, dbname=self.database,
                                  tablename=self.table)
        response = self._client.lock(LockRequest(component=[component], user=getpass.getuser(),
                                                 hostname=socket.gethostname()))
        assert response.state == LockState.ACQUIRED, f"the table lock was not free: {response}"
        self._lock_id = response.lockid
        return self

    def waiting(self) -> int:
        """Lock requests queued on the table behind this one."""
        with self._guard:
            response = self._client.show_locks(ShowLocksRequest())
        return sum(1 for lock in response.locks or [] if lock.state == LockState.WAITING
                   and (lock.dbname, lock.tablename) == (self.database, self.table))

    def wait_for_waiting(self, count: int, timeout_s: float, failed: Sequence[BaseException] = ()) -> None:
        """Until `count` requests queue; `failed`: errors of the would-be requesters, which end the wait."""
        deadline = time.monotonic() + timeout_s
        while self.waiting() < count:
            if failed:
                raise AssertionError(f"a lock requester failed: {failed[0]!r}") from failed[0]
            if time.monotonic() > deadline:
                raise AssertionError(f"{count} lock requests never queued on {self.database}.{self.table} "
                                     f"within {timeout_s:.0f} s (queued: {self.waiting()})")
            time.sleep(0.05)

    def release(self) -> None:
        with self._guard:
            if self._lock_id is not None:
                self._client.unlock(UnlockRequest(lockid=self._lock_id))
                self._lock_id = None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        try:
            self.release()
        finally:
            self._transport.close()
