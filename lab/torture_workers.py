"""The torture suite's separate processes (each its own JVM), started by lab/torture.py:

    python -m lab.torture_workers dbt-writer  --workdir W --name N --model M [--model M2 ...]
    python -m lab.torture_workers spark-writer --workdir W --name N --table T
    python -m lab.torture_workers long-writer --workdir W --name N --table T --batch B
    python -m lab.torture_workers maintenance --workdir W --name N [--once] [--after FILE]

Writers record every batch in the ledger (W/ledger.jsonl) before (`unknown`) and after
(`committed` / `failed` / `unknown`) the write; every process appends what happened to
W/events.jsonl and its current phase to W/<name>.state, and stops between batches once W/stop
exists. dbt runs go through the real CLI (`dbt-iceberg-maint run` / `maintain`), in-process so
the JVM starts once per worker.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.ledger import Ledger, LedgerEntry, batch_rows_sql

PROJECT_DIR = Path(__file__).resolve().parent / "torture_project"
CATALOG = "ice"  # not the schema's name: `show tables in torture` would list the catalog
NAMESPACE = f"{CATALOG}.torture"
ROWS_PER_BATCH = 50
BATCH_SQL_ENV = "TORTURE_BATCH_SQL"  # lab/torture_project/macros/batch_sql.sql reads it
SPARK_WRITER_FIRST_BATCH = 100_000  # the plain Spark writer's batch ids never meet dbt's
SPARK_WRITER_PAUSE_S = 4.0
MAINTENANCE_OPERATIONS = ("expire_snapshots", "remove_orphan_files", "rewrite_manifests")


def spark_conf(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The settings of lab/torture_project/profiles.yml for the workers that are not dbt: the
    product's runtime settings (`session_conf`) with the torture's catalog (JDBC or Hive; the Hive
    catalog ignores the jdbc.* keys)."""
    from dbt_iceberg_maint.runtime.spark import (
        DRIVER_JAVA_OPTIONS,
        CatalogSpec,
        IcebergRuntime,
        log4j2_java_options,
        session_conf,
    )

    catalog = CatalogSpec(environ["TORTURE_WAREHOUSE"], CATALOG, {
        "type": environ["TORTURE_CATALOG_TYPE"], "uri": environ["TORTURE_CATALOG_URI"], "jdbc.user": "postgres",
        "jdbc.password": "postgres", "jdbc.schema-version": "V1"})  # views: Spark resolves names through them too
    runtime = IcebergRuntime("environment", jars=tuple(environ["TORTURE_JARS"].split(",")))
    conf = session_conf(runtime, catalog, {
        "spark.master": "local[2]", "spark.driver.memory": environ.get("TORTURE_DRIVER_MEMORY", "512m"),
        "spark.sql.shuffle.partitions": "2",
        "spark.hadoop.iceberg.hive.lock-heartbeat-interval-ms": "10000"})  # as profiles.yml says why
    # Replacing the runtime's driver options (session_conf only adds to them): log times in the
    # machine's zone, as the dbt workers' JVMs write them (torture.jvm_exceptions).
    conf[DRIVER_JAVA_OPTIONS] = log4j2_java_options()
    return conf


class Worker:
    def __init__(self, workdir: Path, name: str) -> None:
        self.workdir = workdir
        self.name = name
        self.ledger = Ledger(workdir / "ledger.jsonl")

    @property
    def stopping(self) -> bool:
        return (self.workdir / "stop").exists()

    def state(self, **fields: Any) -> None:
        target = self.workdir / f"{self.name}.state"
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps({"at": time.time(), "pid": os.getpid(), **fields}))
        tmp.replace(target)

    def event(self, **fields: Any) -> None:
        line = json.dumps({"worker": self.name, "at": time.time(), **fields}, default=str) + "\n"
        fd = os.open(self.workdir / "events.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def record(self, table: str, batch: int, event: str, detail: str = "") -> None:
        self.ledger.record(LedgerEntry.for_batch(self.name, table, batch, event, ROWS_PER_BATCH, detail))

    def next_batch(self, tables: Sequence[str], first: int = 1) -> int:
        used = [e.batch_id for e in self.ledger.entries() if e.table in tables and e.writer == self.name]
        return max(used, default=first - 1) + 1


def _cli(args: list[str]) -> int:
    from dbt_iceberg_maint.cli import main

    try:
        main.main(args, standalone_mode=False)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def ledger_event(node: dict[str, Any] | None) -> str:
    """The ledger event a runner report's node implies for its batch."""
    if node is None:
        return "unknown"  # dbt stopped before the node ran or reported: nobody knows
    if node["final_status"] == "success":
        return "committed"
    landed = node.get("write_landed")
    return "committed" if landed is True else "failed" if landed is False else "unknown"


def dbt_writer(worker: Worker, models: Sequence[str]) -> None:
    batch = worker.next_batch(models)
    while not worker.stopping:
        for model in models:
            worker.record(model, batch, "unknown", "intent")
        report_path = worker.workdir / f"{worker.name}.report.json"
        report_path.unlink(missing_ok=True)
        worker.state(phase="run", batch=batch)
        started = time.time()
        # The batch's rows through the environment, not --vars: a new --vars value would make
        # dbt parse the whole project again for every batch (seconds of CPU on a loaded machine).
        os.environ[BATCH_SQL_ENV] = batch_rows_sql(batch, ROWS_PER_BATCH)
        code = _cli(["run", "--report", str(report_path), "--output", "json", "--max-attempts", "3",
                     "--backoff-seconds", "0.5", "--project-dir", str(PROJECT_DIR), "--profiles-dir",
                     str(PROJECT_DIR), "--select", *models])
        report = json.loads(report_path.read_text()) if report_path.exists() else {"nodes": []}
        nodes = {node["name"]: node for node in report.get("nodes", [])}
        outcomes = {}
        for model in models:
            node = nodes.get(model)
            for _ in range(max(0, (node or {}).get("attempts", 1) - 1)):
                worker.record(model, batch, "rerun")
            outcome = ledger_event(node)
            kinds = [k for k in (node or {}).get("kinds", []) if k]
            worker.record(model, batch, outcome, ",".join(kinds))
            outcomes[model] = {"event": outcome, "attempts": (node or {}).get("attempts"),
                               "kinds": (node or {}).get("kinds"), "write_landed": (node or {}).get("write_landed"),
                               "messages": [(h.get("message") or "")[:600] for h in (node or {}).get("history", [])
                                            if h.get("message")]}
        worker.event(kind="batch", batch=batch, exit_code=code, started=started, outcomes=outcomes,
                     error=report.get("error"))
        batch += 1


def _session(log_level: str | None = "ERROR") -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("torture")
    for key, value in spark_conf().items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if log_level is not None:
        spark.sparkContext.setLogLevel(log_level)
    return spark


def failure_text(exc: BaseException, limit: int = 3000) -> str:
    """The failure's message, at most `limit` characters: its head (a Py4J error names the JVM
    exception there, which the classifier reads; no Python class prefix in front of it) and its
    tail, the long stack between cut out."""
    text = str(exc) or "".join(traceback.format_exception_only(type(exc), exc))
    if len(text) <= limit:
        return text
    return text[:limit // 2] + "\n[...]\n" + text[-(limit // 2):]


def merge_sql(table: str, batch: int) -> str:
    """The plain Spark writer's statement: MERGE one batch into `table` (insert what is not there)."""
    return (f"merge into {table} t using (select id, batch_id, payload, cast(batch_id div 5 as bigint) as part "
            f"from ({batch_rows_sql(batch, ROWS_PER_BATCH)}) b) s on t.id = s.id when not matched then insert *")


def batch_rows_present(spark: Any, table: str, batch: int) -> int:
    """The batch's rows in `table` as the catalog has it now: REFRESH TABLE first, because after a
    commit whose answer was lost the session's catalog cache still holds the metadata before it."""
    spark.sql(f"refresh table {table}")
    return int(spark.sql(f"select count(*) from {table} where batch_id = {batch}").collect()[0][0])


@dataclass(frozen=True)
class GuardedWrite:
    """What `merge_batch_guarded` did: the ledger event, the failures it saw, the re-runs it made."""

    event: str
    failures: tuple[dict[str, str], ...] = ()
    reruns: int = 0
    landed_after_failure: bool = False


def merge_batch_guarded(spark: Any, table: str, batch: int, attempts: int = 3, pause_s: float = 0.5,
                        merge: Callable[[], Any] | None = None) -> GuardedWrite:
    """MERGE a batch, re-running it after a failure only once a fresh read shows it did not land.

    A MERGE with only `WHEN NOT MATCHED THEN INSERT` commits as an append, which Iceberg does not
    validate against concurrent commits: re-run against a stale cached table after a commit that
    landed (its answer lost with the connection), it inserts the batch a second time. The guard is
    what a careful plain-Spark user does: refresh, count the batch (its ids are its own), re-run
    only if it is absent. `merge` replaces the statement (a test commits it elsewhere and raises).
    """
    from dbt_iceberg_maint.conflicts import classify

    run = merge or (lambda: spark.sql(merge_sql(table, batch)))
    failures: list[dict[str, str]] = []
    for attempt in range(attempts):
        try:
            run()
            return GuardedWrite("committed", tuple(failures), attempt)
        except Exception as exc:  # noqa: BLE001 - every failure is recorded, then the table decides
            text = failure_text(exc)
            failures.append({"kind": classify(text).kind, "message": text[:600]})
        present = batch_rows_present(spark, table, batch)
        if present == ROWS_PER_BATCH:
            return GuardedWrite("committed", tuple(failures), attempt, landed_after_failure=True)
        if present:  # a commit is atomic: a part of a batch means something else is wrong
            return GuardedWrite("unknown", tuple(failures), attempt)
        time.sleep(pause_s)
    return GuardedWrite("failed", tuple(failures), attempts - 1)  # verified absent after the last attempt


def spark_writer(worker: Worker, table: str) -> None:
    """A plain Spark job (no dbt) merging its own batches into a dbt model's table."""
    spark = _session()
    batch = worker.next_batch([table], SPARK_WRITER_FIRST_BATCH)
    while not worker.stopping:
        worker.record(table, batch, "unknown", "intent")
        worker.state(phase="merge", batch=batch)
        write = merge_batch_guarded(spark, f"{NAMESPACE}.{table}", batch)
        for _ in range(write.reruns):
            worker.record(table, batch, "rerun")
        detail = ",".join(f["kind"] for f in write.failures)
        worker.record(table, batch, write.event, detail + (",landed" if write.landed_after_failure else ""))
        worker.event(kind="batch", batch=batch, outcomes={table: {
            "event": write.event, "failures": list(write.failures), "attempts": write.reruns + 1,
            "write_landed": True if write.landed_after_failure else None}})
        batch += 1
        time.sleep(SPARK_WRITER_PAUSE_S)  # a job on a schedule, not a hot loop starving the other JVMs
    spark.stop()


def long_writer(worker: Worker, table: str, batch: int, gate: Path) -> None:
    """An append whose second task waits for `gate` to exist: the first task's data file is on
    disk, uncommitted, for as long as the test holds the gate (an in-flight long write)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    spark = _session()
    half = ROWS_PER_BATCH // 2

    def hold(row_id: int) -> int:
        if row_id % 1_000_000 >= half:
            while not gate.exists():
                time.sleep(0.1)
        return row_id

    held = F.udf(hold, LongType())
    frame = (spark.range(0, ROWS_PER_BATCH, 1, 2)
             .select((F.lit(batch * 1_000_000) + F.col("id")).alias("raw"))
             .select(held("raw").alias("id"), F.lit(batch).cast("bigint").alias("batch_id"),
                     F.concat(F.lit(f"b{batch}-r"), (F.col("raw") % 1_000_000).cast("string")).alias("payload"),
                     F.lit(batch // 5).cast("bigint").alias("part")))
    worker.record(table, batch, "unknown", "intent")
    worker.state(phase="write", batch=batch)
    try:
        frame.writeTo(f"{NAMESPACE}.{table}").option("distribution-mode", "none").append()
        worker.record(table, batch, "committed")
        worker.event(kind="batch", batch=batch, outcomes={table: {"event": "committed"}})
    except Exception as exc:  # noqa: BLE001 - recorded, and the exit code says it failed
        worker.event(kind="batch", batch=batch, outcomes={table: {"event": "unknown", "error": failure_text(exc)}})
        spark.stop()
        sys.exit(1)
    spark.stop()


def maintenance(worker: Worker, once: bool, after: Path | None = None) -> None:
    """The maintenance loop (`once`: one compaction, one other-operations and one forced orphan
    sweep invocation). With
    `after`, its JVM starts at once and the first invocation waits until that file exists: dbt's
    session (method: session) is this JVM's, so its start overlaps what the caller still sets up."""
    if after is not None:
        _session(log_level=None)  # the log level dbt's own session start leaves
        worker.state(phase="waiting")
        while not after.exists():
            time.sleep(0.1)
    phases: list[tuple[str, tuple[str, ...]]] = [("compaction", ("compaction",)), ("others", MAINTENANCE_OPERATIONS)]
    if once:
        # After the crashes' orphans were aged past the window (the days since), so is the table,
        # whose age then makes its first orphan sweep due; its metadata log cannot be aged, so
        # that sweep is forced instead (thresholds ignored; the window still keeps younger files).
        phases.append(("orphans", ("remove_orphan_files",)))
    cycle = 0
    while True:
        for phase, operations in phases:
            report_path = worker.workdir / f"{worker.name}.report.json"
            report_path.unlink(missing_ok=True)
            worker.state(phase=phase, cycle=cycle)
            started = time.time()
            args = ["maintain", "--report", str(report_path), "--output", "json", "--project-dir", str(PROJECT_DIR),
                    "--profiles-dir", str(PROJECT_DIR)]
            for operation in operations:
                args += ["--operation", operation]
            code = _cli([*args, "--force"] if phase == "orphans" else args)
            report = json.loads(report_path.read_text()) if report_path.exists() else {}
            worker.event(kind="maintenance", phase=phase, cycle=cycle, exit_code=code, started=started,
                         results=[{k: r.get(k) for k in ("table", "operation", "status", "reason")}
                                  for r in report.get("results", [])])
            if once and code != 0:
                sys.exit(code)
            if not once and worker.stopping:
                return
        cycle += 1
        worker.state(phase="idle", cycle=cycle)
        if once or worker.stopping:
            return


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="lab.torture_workers")
    parser.add_argument("role", choices=["dbt-writer", "spark-writer", "long-writer", "maintenance"])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--model", action="append", default=[])
    parser.add_argument("--table")
    parser.add_argument("--batch", type=int)
    parser.add_argument("--once", action="store_true")
    parser.add_argument("--after", type=Path, default=None, help="maintenance: start invoking once this file exists")
    args = parser.parse_args(argv)
    worker = Worker(args.workdir, args.name)
    worker.state(phase="starting")
    if args.role == "dbt-writer":
        dbt_writer(worker, args.model)
    elif args.role == "spark-writer":
        spark_writer(worker, args.table)
    elif args.role == "long-writer":
        long_writer(worker, args.table, args.batch, args.workdir / f"{args.name}.gate")
    else:
        maintenance(worker, args.once, args.after)
    worker.state(phase="done")


if __name__ == "__main__":
    main()
