"""Reproduce a real Iceberg commit conflict on demand (the demo and the test suite).

Private: a fixture that slows a MERGE, not a user-facing UDF; it ships inside the package only
because `dbt-iceberg-maint demo` stages its conflict with it.

A model's source calls `iceberg_maint_conflict_gate(key, id)` (always true). Once `arm(key)` was
called, the first row that reaches the gate records it (a marker file) and holds its task until
the maintenance side says it has committed: a writer planned against the old snapshot, a
compaction committed in between, and the writer then meets Iceberg's commit-time validation,
exactly as a MERGE meets a nightly compaction in production. Markers are files because the UDF
runs in Spark's Python workers, not in the driver.

Only one task waits (the one that creates the marker): the others pass, so a local Spark with
two cores keeps a free slot for the compaction job.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CONFLICT_GATE = "iceberg_maint_conflict_gate"


def _gate_function(directory: str, timeout_seconds: float) -> Callable[[str, int], bool]:
    def gate(key: str, _row_id: int) -> bool:
        if not os.path.exists(os.path.join(directory, f"{key}.armed")):
            return True
        done = os.path.join(directory, f"{key}.done")
        if os.path.exists(done):
            return True
        try:
            os.close(os.open(os.path.join(directory, f"{key}.reached"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return True  # another task holds the gate
        deadline = time.monotonic() + timeout_seconds
        while not os.path.exists(done) and time.monotonic() < deadline:
            time.sleep(0.05)
        return True

    return gate


@dataclass
class ConcurrentCommit:
    """A maintenance statement run in the background as soon as a gate is reached."""

    key: str
    thread: threading.Thread
    error: BaseException | None = None
    reached: bool = False
    results: list[object] = field(default_factory=list)

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)


@dataclass(frozen=True)
class ConflictGate:
    directory: Path
    timeout_seconds: float = 120.0

    def register(self, spark: SparkSession) -> None:
        from pyspark.sql.types import BooleanType

        self.directory.mkdir(parents=True, exist_ok=True)
        spark.udf.register(CONFLICT_GATE, _gate_function(str(self.directory), self.timeout_seconds), BooleanType())

    def arm(self, key: str) -> None:
        for suffix in ("reached", "done"):
            (self.directory / f"{key}.{suffix}").unlink(missing_ok=True)
        (self.directory / f"{key}.armed").touch()

    def disarm(self, key: str) -> None:
        for suffix in ("armed", "reached", "done"):
            (self.directory / f"{key}.{suffix}").unlink(missing_ok=True)

    def commit_when_reached(self, key: str, spark: SparkSession, sql: str) -> ConcurrentCommit:
        """In a thread: wait for the gate `key`, run `sql` on `spark`, then release the gate.

        Pass a separate session (`spark.newSession()`) to act as another job; the same session
        reproduces several dbt threads sharing one session.
        """
        commit = ConcurrentCommit(key, threading.Thread())

        def run() -> None:
            deadline = time.monotonic() + self.timeout_seconds
            try:
                while not (self.directory / f"{key}.reached").exists():
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"gate {key!r} was never reached")
                    time.sleep(0.05)
                commit.reached = True
                commit.results.extend(spark.sql(sql).collect())
            except BaseException as exc:  # reported to the caller through `error`
                commit.error = exc
            finally:
                (self.directory / f"{key}.done").touch()

        commit.thread = threading.Thread(target=run, name=f"conflict-{key}", daemon=True)
        commit.thread.start()
        return commit


# The conflict scenario of integration_tests/models/conflicts (tests and demo).
SCENARIO_MODELS = ("conflict_merge", "conflict_merge_unsafe")


def add_small_files(spark: SparkSession, table: str, files: int = 3) -> None:
    """Write `files` more small files into every partition of a conflict_merge-like table (new
    keys, `loaded_batch` 0), so that a compaction really replaces files a later MERGE reads."""
    for remainder in range(files):
        spark.sql(
            f"insert into {table} select event_id + 100000, user_id, event_type, event_ts, amount, 0 "
            f"from {table} where loaded_batch = 1 and event_id % {files} = {remainder}"
        )


def compaction_sql(table: str) -> str:
    """Compact every file of `catalog.schema.table` (the compaction a MERGE loses to)."""
    catalog, name = table.split(".", 1)
    return (
        f"CALL {catalog}.system.rewrite_data_files(table => '{name}', "
        "options => map('min-input-files', '1', 'rewrite-all', 'true'))"
    )
