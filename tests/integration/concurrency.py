"""Background actions for concurrency tests: started when a condition holds, always joined.

A test starts an action that waits for something the writer does (a conflict gate reached, a
temporary metadata file written), then commits on its own session. Every action fails with a
message naming what it waited for and for how long; `join_all` fails the test when a thread is
still alive, so no thread outlives its test.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dbt_iceberg_maint.runtime.spark import CatalogSpec, register_catalog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

POLL_SECONDS = 0.05


class ActionError(AssertionError):
    """A background action did not run as the test planned."""


@dataclass
class BackgroundAction:
    name: str
    waits_for: str
    thread: threading.Thread = field(default_factory=threading.Thread)
    started: bool = False  # the condition held and the action began
    error: BaseException | None = None

    def check(self) -> None:
        """Raise when the action never started or failed."""
        if self.error is not None:
            raise ActionError(f"background action {self.name!r} failed: {self.error!r}") from self.error
        if not self.started:
            raise ActionError(f"background action {self.name!r} never started: {self.waits_for} never happened")


def when(
    condition: Callable[[], bool],
    action: Callable[[], object],
    *,
    name: str,
    waits_for: str,
    timeout_seconds: float,
    finally_: Callable[[], None] | None = None,
) -> BackgroundAction:
    """Run `action` in a thread once `condition()` is true; `finally_` runs in every case."""
    background = BackgroundAction(name=name, waits_for=waits_for)

    def run() -> None:
        deadline = time.monotonic() + timeout_seconds
        try:
            while not condition():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{waits_for} did not happen within {timeout_seconds:.0f} s")
                time.sleep(POLL_SECONDS)
            background.started = True
            action()
        except BaseException as exc:  # reported through `error` and `check()`
            background.error = exc
        finally:
            if finally_ is not None:
                finally_()

    background.thread = threading.Thread(target=run, name=f"bg-{name}", daemon=True)
    background.thread.start()
    return background


def join_all(actions: Iterable[BackgroundAction], timeout_seconds: float) -> None:
    """Join every action within one overall deadline; fail naming the ones still running."""
    deadline = time.monotonic() + timeout_seconds
    actions = list(actions)
    for background in actions:
        background.thread.join(max(0.0, deadline - time.monotonic()))
    alive = [b.name for b in actions if b.thread.is_alive()]
    if alive:
        raise ActionError(f"background actions still running after {timeout_seconds:.0f} s: {alive}")


# A real lost catalog race on the Hadoop catalog, made deterministic. The modules that stage it
# pin their warehouse to a Hadoop catalog: `CATALOG_PROPERTIES = HADOOP_CATALOG` (tests/conftest.py).

HADOOP_CATALOG = {"type": "hadoop"}

RACE_CATALOG = "race"


def other_job(spark: SparkSession, warehouse: Path, tmp: Path) -> SparkSession:
    """Another job: its own session and catalog instances over the same warehouse, without the
    catalog's table cache so that it always acts on the table's current state. Catalog `race`
    reaches the warehouse through a symbolic link: the same files under other path strings,
    hence other in-process catalog locks (the Hadoop catalog locks metadata files by path)."""
    session = spark.newSession()
    link = tmp / "warehouse-link"
    link.symlink_to(warehouse.resolve(), target_is_directory=True)
    hadoop = {"type": "hadoop", "cache-enabled": "false"}  # the race is the Hadoop catalog's (CATALOG_PROPERTIES)
    register_catalog(session, CatalogSpec(str(link), name=RACE_CATALOG, properties=hadoop))
    register_catalog(session, CatalogSpec(str(warehouse.resolve()), properties=hadoop))
    return session


def pending_metadata(directory: Path) -> bool:
    """The Hadoop catalog writes `<uuid>.metadata.json` just before renaming it to `v<N>...`."""
    return any(p.name.endswith(".metadata.json") and not p.name.startswith("v") for p in directory.iterdir())


def lose_catalog_race(
    spark: SparkSession,
    job: SparkSession,
    metadata: Path,
    race_table: str,
    *,
    name: str,
    timeout_seconds: float,
    together_with: tuple[Path, ...] = (),
    append: str | None = None,
) -> BackgroundAction:
    """Make the next commit to the table whose metadata folder is `metadata` lose a real race.

    The lock of the next metadata version is held in this JVM, so the writer's commit waits for
    it after writing its pending metadata file; then `job` commits an append of one row to that
    same version through `race_table` (catalog `race`), and the lock is released: the writer's
    rename finds the version taken (`CommitFailedException: Version N already exists`). With
    `commit.retry.num-retries = 0` on the table Iceberg does not retry it itself.
    `together_with`: other tables' metadata folders whose writers must be waiting at the same
    moment (several dbt threads losing at once). `append`: the other job's statement (default:
    one row copied from the scenario tables' columns).
    """
    next_version = int((metadata / "version-hint.text").read_text().strip()) + 1
    target = metadata / f"v{next_version}.metadata.json"
    jvm = spark._jvm  # noqa: SLF001
    assert jvm is not None, "the Spark session has no JVM gateway"
    locks = jvm.org.apache.iceberg.util.LockManagers.defaultLockManager()
    # The catalog locks the path string as Hadoop prints it: hold every spelling of it.
    keys = [str(target), f"file:{target}", f"file://{target}"]
    owner = f"test-{name}"
    if not all(locks.acquire(key, owner) for key in keys):
        raise ActionError(f"could not take the lock of {target}: another test holds it")

    def release() -> None:
        for key in keys:
            locks.release(key, owner)

    append = append or (f"insert into {race_table} select event_id + 1000000, user_id, event_type, event_ts, "
                        f"amount, 0 from {race_table} limit 1")
    folders = (metadata, *together_with)
    return when(
        lambda: all(pending_metadata(folder) for folder in folders),
        lambda: job.sql(append).collect(),
        name=name, waits_for=f"pending metadata files in {', '.join(map(str, folders))} at once",
        timeout_seconds=timeout_seconds, finally_=release,
    )
