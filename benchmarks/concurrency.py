"""Concurrency benchmark (issue 11, P1 survival and P2 coverage): dbt writers and the maintenance
job as separate OS processes and separate Spark applications on a standalone cluster, sharing a
PostgreSQL-backed Iceberg JDBC catalog.

Each round of a variant: a non-dbt backfill first adds small files to cold days; then the
variant's writer (plain `dbt run`, or `dbt-iceberg-maint run`) MERGEs batch b into the newest
days while `dbt-iceberg-maint maintain` compacts the same table (the whole table with Iceberg's
defaults: "naive"; or only the cold days, with thresholds: "policy"). Writers reach one Thrift
Server application on the cluster, maintenance another, so every dbt process is light (no JVM
start) and writer and compaction are separate JVMs with their own catalog instances. The
variants run round-robin, so any prefix of a run covers them equally. Every few cycles a control
round runs the same maintenance with the writers stopped (P2's reference).

Afterwards pyiceberg reads the table (no JVM): duplicates, the ledger (every batch a writer
reported committed is present exactly once), which cold small files the compaction removed, and
the Spark UI of both servers says whether the MERGE and the compaction really overlapped.

Over 300 lines on purpose: the round, its checks and the report change together.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta, timezone
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dbt_iceberg_maint.conflicts import classify
from lab import processes as proc
from lab.cluster import JdbcCatalog, SparkCluster, start_cluster, start_cluster_thrift_server
from lab.postgres import PostgresServer, start_server

if TYPE_CHECKING:
    from dbt_iceberg_maint.thrift_server import ThriftServer

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ROOT / "lab" / "projects" / "concurrency"
RESULTS = ROOT / "benchmarks" / "results"
PROFILE = "lab_concurrency"
SCHEMA = "lab"
BASE_DAY = date(2024, 1, 1)
ROUNDS_PER_DAY = 2  # the writers' hot window moves one day forward every 2 rounds of a variant
ROWS_PER_BATCH = 200
SEED_DAYS = 3  # cold days the backfill writes each round
SEED_FILES_PER_DAY = 6  # > Iceberg's default min-input-files (5): naive compaction has work too
PROCESS_TIMEOUT_S = 900.0
MAX_STAGGER_S = 90.0
SMALL_FILE_BYTES = 0.75 * 512 * 1024 * 1024  # 75 % of the default target file size: every file in this lab


@dataclass(frozen=True)
class Variant:
    name: str
    maintenance: str  # "naive" | "policy"
    writer: str  # "dbt" | "runner" | "none" (control: writers stopped)

    @property
    def model(self) -> str:
        return f"events_{self.name}"

    @property
    def table(self) -> str:
        """A schema per variant: dbt lists and describes only its own table before each run."""
        return f"{SCHEMA}_{self.name}.{self.model}"

    @property
    def identifier(self) -> tuple[str, str]:
        return (f"{SCHEMA}_{self.name}", self.model)


VARIANTS = (Variant("naive_dbt", "naive", "dbt"), Variant("naive_runner", "naive", "runner"),
            Variant("policy_dbt", "policy", "dbt"), Variant("policy_runner", "policy", "runner"))


def day_of_batch(batch: int) -> date:
    """First day batch `batch` writes (it also writes the next one); mirrors macros/lab_batch.sql."""
    return BASE_DAY + timedelta(days=batch // ROUNDS_PER_DAY)


def cold_before(batch: int) -> date:
    """Batch b writes day(b), day(b)+1 and rewrites batch b-1's rows: everything before day(b-1) is cold."""
    return day_of_batch(max(batch - 1, 0))


# ---- pure checks --------------------------------------------------------------------------------

@dataclass(frozen=True)
class WriterOutcome:
    green: bool
    attempts: int
    failure_kinds: tuple[str, ...]  # the kind of every failed attempt, re-runs included
    final_kind: str | None  # the kind that remained when the run ended red


def plain_dbt_outcome(exit_code: int, run_results: Mapping[str, Any] | None, output: str) -> WriterOutcome:
    """A `dbt run`: green on exit 0; a failure is classified from run_results' message."""
    if exit_code == 0:
        return WriterOutcome(True, 1, (), None)
    messages = [r.get("message") or "" for r in (run_results or {}).get("results", []) if r.get("status") != "success"]
    kind = classify("\n".join(messages) or output).kind
    return WriterOutcome(False, 1, (kind,), kind)


def runner_outcome(exit_code: int, report: Mapping[str, Any] | None, output: str) -> WriterOutcome:
    """`dbt-iceberg-maint run`: its JSON report's attempts and kinds."""
    if report is None or not report.get("nodes"):
        kind = classify(output).kind
        return WriterOutcome(False, 1, (kind,), kind)
    node = report["nodes"][0]
    kinds = tuple(k for k in node.get("kinds", []) if k)
    green = exit_code == 0 and bool(report.get("success"))
    return WriterOutcome(green, int(node.get("attempts", 1)), kinds, None if green else (kinds[-1] if kinds else
                                                                                          "not_iceberg_conflict"))


def maintenance_kind(result: Mapping[str, Any]) -> str | None:
    """A failed maintenance result's conflict kind: the one `dbt-iceberg-maint maintain` recorded
    from Spark's error (its `reason` is the package's own sentence, not Iceberg's message)."""
    if result.get("status") != "failed":
        return None
    metrics = result.get("metrics") or {}
    return metrics.get("kind") or classify(metrics.get("error") or result.get("reason") or "").kind


def ledger_mismatches(committed: Iterable[int], rows_per_batch: Mapping[int, int], expected_rows: int) -> list[int]:
    """Committed batches not present exactly once (each batch is `expected_rows` distinct events)."""
    return sorted(b for b in set(committed) if rows_per_batch.get(b, 0) != expected_rows)


@dataclass(frozen=True)
class Interval:
    start: float
    end: float

    def overlaps(self, other: Interval) -> bool:
        return self.start < other.end and other.start < self.end


def overlapped(writes: Sequence[Interval], compactions: Sequence[Interval]) -> bool:
    return any(w.overlaps(c) for w in writes for c in compactions)


def spark_ui_intervals(executions: Iterable[Mapping[str, Any]], needle: str, since: float) -> list[Interval]:
    """Intervals of the Spark SQL executions whose text contains `needle`, submitted after `since`."""
    found = []
    for execution in executions:
        text = (execution.get("description") or "").lower()
        submitted = execution.get("submissionTime")
        if needle not in text or not submitted:
            continue
        start = datetime.strptime(submitted.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
        if start + 1.0 < since:
            continue
        found.append(Interval(start, start + float(execution.get("duration", 0)) / 1000.0))
    return found


# ---- the lab ------------------------------------------------------------------------------------

@dataclass
class Lab:
    """The running components of one benchmark run; `close()` stops what it started."""

    run_dir: Path
    catalog: JdbcCatalog
    writer_server: ThriftServer
    maintenance_server: ThriftServer
    project: Path
    owned_cluster: SparkCluster | None = None
    owned_postgres: PostgresServer | None = None
    _iceberg: Any = None

    def iceberg(self) -> Any:
        """One pyiceberg catalog (one connection pool) for the whole run: a catalog per read
        would leave its PostgreSQL connections open."""
        if self._iceberg is None:
            self._iceberg = self.catalog.pyiceberg()
        return self._iceberg

    def execute(self, statement: str) -> None:
        """One statement on a connection of its own (rounds of the variants run in parallel)."""
        from pyhive import hive

        connection = hive.connect(host=self.maintenance_server.host, port=self.maintenance_server.port,
                                  username="lab-harness")
        try:
            cursor = connection.cursor()
            cursor.execute(statement)
            cursor.close()
        finally:
            connection.close()

    def workdir(self, name: str, server: ThriftServer) -> Path:
        return proc.workdir(self.run_dir / "proc", name, proc.thrift_profile(PROFILE, server.host, server.port,
                                                                                SCHEMA))

    def close(self) -> None:
        for server in (self.writer_server, self.maintenance_server):
            server.stop()
        if self.owned_cluster is not None:
            self.owned_cluster.stop()
        if self.owned_postgres is not None:
            self.owned_postgres.stop()


def open_lab(run_dir: Path, cluster: SparkCluster | None = None, postgres: PostgresServer | None = None) -> Lab:
    """Start what is not given (PostgreSQL, cluster) and the two Thrift Server applications."""
    owned_postgres = None if postgres is not None else start_server()
    owned_cluster = None
    servers: list[ThriftServer] = []
    try:
        postgres = postgres or owned_postgres
        assert postgres is not None
        if cluster is None:
            owned_cluster = cluster = start_cluster(run_dir / "cluster")
        catalog = JdbcCatalog(postgres, run_dir / "warehouse")
        ui = {"spark.ui.enabled": "true", "spark.sql.ui.retainedExecutions": "200"}
        # The writer application writes 6 tasks' files per partition (no coalescing): small files
        # accumulate in the hot days, as under frequent small writes.
        servers.append(start_cluster_thrift_server(
            cluster, catalog, run_dir / "writer_server", name="writers", with_ui=True,
            extra_conf={**ui, "spark.sql.shuffle.partitions": "6",
                        "spark.sql.adaptive.coalescePartitions.enabled": "false"}))
        servers.append(start_cluster_thrift_server(cluster, catalog, run_dir / "maintenance_server",
                                                   name="maintenance", with_ui=True, extra_conf=ui))
        project = run_dir / "project"
        shutil.copytree(PROJECT, project, dirs_exist_ok=True, ignore=shutil.ignore_patterns("target", "dbt_packages",
                                                                                           "logs"))
        (project / "packages.yml").write_text(json.dumps({"packages": [{"local": str(ROOT)}]}) + "\n")
        lab = Lab(run_dir, catalog, servers[0], servers[1], project, owned_cluster, owned_postgres)
    except BaseException:
        for server in servers:
            server.stop()
        if owned_cluster is not None:
            owned_cluster.stop()
        if owned_postgres is not None:
            owned_postgres.stop()
        raise
    return lab


def _check(finished: proc.Finished, what: str) -> None:
    if finished.exit_code != 0:
        raise RuntimeError(f"{what} failed (exit {finished.exit_code}):\n{finished.output[-3000:]}")


def prepare_tables(lab: Lab) -> None:
    """dbt deps, then batch 0 of every variant's table (creates them)."""
    work = lab.workdir("setup", lab.writer_server)
    deps = proc.DbtCommand("deps", (str(proc.BIN / "dbt"), "deps", "--project-dir", str(lab.project)), work)
    _check(proc.run(deps, PROCESS_TIMEOUT_S), "dbt deps")
    create = proc.dbt_run("create", lab.project, work, " ".join(v.model for v in VARIANTS), {"LAB_BATCH": "0"})
    _check(proc.run(create, PROCESS_TIMEOUT_S), "dbt run (batch 0)")


@dataclass
class VariantState:
    variant: Variant
    batch: int = 0
    committed: set[int] = field(default_factory=lambda: {0})
    seeds: int = 0
    mismatched: set[int] = field(default_factory=set)
    # Seconds from a process's start to its statement, seen in the variant's last round: the
    # next round staggers the two starts so the compaction lands inside the MERGE.
    merge_offset: float | None = None
    merge_seconds: float = 0.0
    call_offset: float | None = None


def stagger(merge_offset: float | None, merge_seconds: float, call_offset: float | None) -> float:
    """Seconds to start the maintenance after the writer (negative: the writer after the
    maintenance) so that the CALL starts a third into the MERGE, by the last round's timings."""
    if merge_offset is None or call_offset is None:
        return 0.0
    return max(-MAX_STAGGER_S, min(MAX_STAGGER_S, merge_offset + merge_seconds / 3 - call_offset))


def seed_cold_days(lab: Lab, state: VariantState, boundary: date) -> None:
    """A non-dbt backfill: SEED_FILES_PER_DAY small files in each of SEED_DAYS cold days (one commit)."""
    state.seeds += 1
    rows = SEED_DAYS * SEED_FILES_PER_DAY * 4
    first = -(state.seeds * 100_000)
    lab.execute(f"insert into {state.variant.table} select {first} - id as event_id, "
            f"date_sub(date '{boundary.isoformat()}', 1 + cast(id % {SEED_DAYS} as int)) as day, "
            f"cast(-1 as bigint) as batch_id, cast(-1 as bigint) as touched_by, sha2(cast(id as string), 256) "
            f"from range(0, {rows}, 1, {SEED_FILES_PER_DAY})")


@dataclass(frozen=True)
class FileRow:
    path: str
    day: date | None
    size: int


@dataclass(frozen=True)
class Coverage:
    """P2 for one round. `alone`: cold small files that were their partition's only small file at
    the start, so no compaction can merge them with anything (mostly an earlier round's output);
    `compactable` the others, `compacted_compactable` those of them the round's compaction removed."""
    at_start: int
    compacted: int
    alone: int
    compactable: int
    compacted_compactable: int


def coverage(before: Sequence[FileRow], live: set[str], boundary: date, small_bytes: float) -> Coverage:
    cold_small = [f for f in before if f.day is not None and f.day < boundary and f.size < small_bytes]
    per_day = Counter(f.day for f in cold_small)
    alone = {f.path for f in cold_small if per_day[f.day] == 1}
    paths = {f.path for f in cold_small}
    compactable = paths - alone
    return Coverage(len(paths), len(paths - live), len(alone), len(compactable), len(compactable - live))


def table_files(lab: Lab, variant: Variant) -> list[FileRow]:
    table = lab.iceberg().load_table(variant.identifier)
    files = table.inspect.files().to_pylist()
    return [FileRow(f["file_path"], f["partition"].get("day"), int(f["file_size_in_bytes"])) for f in files
            if f.get("content", 0) == 0]


def table_rows(lab: Lab, variant: Variant) -> tuple[int, int, Counter[int]]:
    """(rows, distinct event ids, distinct events per batch)."""
    import pyarrow.compute as pc

    table = lab.iceberg().load_table(variant.identifier)
    data = table.scan(selected_fields=("event_id", "batch_id")).to_arrow()
    ids = data.column("event_id")
    distinct = data.group_by(["batch_id"]).aggregate([("event_id", "count_distinct")]).to_pylist()
    return len(data), len(pc.unique(ids)), Counter({int(r["batch_id"]): int(r["event_id_count_distinct"])
                                                   for r in distinct})


def ui_executions(server: ThriftServer, attempts: int = 3, timeout_s: float = 60.0) -> list[dict[str, Any]] | None:
    """The server's SQL executions from its Spark UI; None when the UI does not answer (a
    loaded machine): the round then records its overlap as unknown instead of failing."""
    assert server.ui_url is not None
    for _ in range(attempts):
        try:
            with urllib.request.urlopen(f"{server.ui_url}/api/v1/applications", timeout=timeout_s) as response:
                app = json.load(response)[0]["id"]
            with urllib.request.urlopen(f"{server.ui_url}/api/v1/applications/{app}/sql?details=false&length=1000",
                                        timeout=timeout_s) as response:
                return list(json.load(response))
        except OSError:  # timeouts and refused connections
            time.sleep(2)
    return None


def run_round(lab: Lab, state: VariantState, writers: bool, index: int) -> dict[str, Any]:
    variant = state.variant
    batch = state.batch + 1 if writers else state.batch
    boundary = cold_before(batch if writers else batch + 1)
    seed_cold_days(lab, state, boundary)
    before = table_files(lab, variant)
    env = {"LAB_BATCH": str(batch), "LAB_ROWS": str(ROWS_PER_BATCH), "LAB_ROUNDS_PER_DAY": str(ROUNDS_PER_DAY),
           "LAB_BASE_DAY": BASE_DAY.isoformat(), "LAB_COLD_BEFORE": boundary.isoformat()}
    maintenance = proc.maintain(f"maintain-{variant.name}", lab.project,
                                lab.workdir(f"maintain-{variant.name}", lab.maintenance_server), [variant.model],
                                ["rewrite_data_files"], env)
    writer: proc.DbtCommand | None = None
    if writers:
        work = lab.workdir(f"writer-{variant.name}", lab.writer_server)
        build = proc.runner_run if variant.writer == "runner" else proc.dbt_run
        writer = build(f"writer-{variant.name}", lab.project, work, variant.model, env)
    started = time.time()
    delay = stagger(state.merge_offset, state.merge_seconds, state.call_offset) if writer else 0.0
    order = [maintenance] if writer is None else [writer, maintenance] if delay >= 0 else [maintenance, writer]
    running = [proc.start(order[0])]
    for later in order[1:]:
        time.sleep(abs(delay))
        running.append(proc.start(later))
    by_name = {r.command.name: r for r in running}
    done = {f.name: f for f in proc.wait_all(running, PROCESS_TIMEOUT_S)}
    maintained = done[maintenance.name]
    record: dict[str, Any] = {"round": index, "variant": variant.name, "writers": writers, "batch": batch,
                              "cold_before": boundary.isoformat(), "load_1m": round(os.getloadavg()[0], 2),
                              "maintenance_start_delay_s": round(delay, 1)}
    if writer is not None:
        wrote = done[writer.name]
        if variant.writer == "runner":
            outcome = runner_outcome(wrote.exit_code, wrote.report(writer), wrote.output)
        else:
            results_path = writer.target_path / "run_results.json"
            run_results = json.loads(results_path.read_text()) if results_path.is_file() else None
            outcome = plain_dbt_outcome(wrote.exit_code, run_results, wrote.output)
        state.batch = batch
        if outcome.green:
            state.committed.add(batch)
        record["writer"] = {**asdict(outcome), "seconds": round(wrote.seconds, 2)}
    report = maintained.report(maintenance) or {}
    results = report.get("results", [])
    compaction = results[0] if results else {}
    record["maintenance"] = {"exit_code": maintained.exit_code, "seconds": round(maintained.seconds, 2),
                             "status": compaction.get("status"), "reason": compaction.get("reason"),
                             "kind": maintenance_kind(compaction),
                             "rewritten_files": (compaction.get("metrics") or {}).get("rewritten_data_files_count")}
    after = table_files(lab, variant)
    covered = coverage(before, {f.path for f in after}, boundary, SMALL_FILE_BYTES)
    record["cold_small_files_at_start"] = covered.at_start
    record["cold_small_files_compacted"] = covered.compacted
    record["cold_small_files_alone"] = covered.alone
    record["cold_small_files_compactable"] = covered.compactable
    record["cold_small_files_compactable_compacted"] = covered.compacted_compactable
    record["data_files_before"] = len(before)
    record["data_files_after"] = len(after)
    rows, distinct, per_batch = table_rows(lab, variant)
    record["duplicate_rows"] = rows - distinct
    mismatched = ledger_mismatches(state.committed, per_batch, ROWS_PER_BATCH)
    state.mismatched.update(mismatched)
    record["ledger_mismatches"] = mismatched
    table = variant.table
    writer_ui, maintenance_ui = ui_executions(lab.writer_server), ui_executions(lab.maintenance_server)
    merges = spark_ui_intervals(writer_ui or [], f"merge into {table} ", started)
    calls = spark_ui_intervals(maintenance_ui or [], f"rewrite_data_files(table => '{table}'", started)
    known = writer_ui is not None and maintenance_ui is not None
    record["overlap"] = {"merge_statements": len(merges), "compaction_statements": len(calls), "ui_answered": known,
                         "overlapped": overlapped(merges, calls) if writers and known else None}
    if merges and calls and writer is not None:
        writer_started = by_name[writer.name].started
        state.merge_offset = merges[0].start - writer_started
        state.merge_seconds = merges[0].end - merges[0].start
        state.call_offset = calls[0].start - by_name[maintenance.name].started
        record["overlap"].update({"merge_start_s": round(merges[0].start - started, 1),
                                  "merge_seconds": round(state.merge_seconds, 1),
                                  "compaction_start_s": round(calls[0].start - started, 1),
                                  "compaction_seconds": round(calls[0].end - calls[0].start, 1)})
    return record


# ---- the run and its figures --------------------------------------------------------------------

def schedule(rounds: int, control_every: int) -> list[list[tuple[Variant, bool]]]:
    """Cycles of rounds run side by side: every variant once per cycle (so any prefix covers
    them equally), and every `control_every` cycles (and in the last) a control round (writers
    stopped) on each maintenance kind's runner table."""
    cycles: list[list[tuple[Variant, bool]]] = []
    for cycle in range(rounds):
        cycles.append([(v, True) for v in VARIANTS])
        if (cycle + 1) % control_every == 0 or cycle == rounds - 1:
            cycles.append([(v, False) for v in VARIANTS if v.writer == "runner"])
    return cycles


def run_cycle(lab: Lab, states: Mapping[str, VariantState], cycle: Sequence[tuple[Variant, bool]],
              first_index: int) -> list[dict[str, Any]]:
    """The cycle's rounds at once, one thread each (separate tables: they compete for the
    machine, not for commits); records in the cycle's order."""
    with ThreadPoolExecutor(max_workers=len(cycle)) as pool:
        futures = [pool.submit(run_round, lab, states[v.name], writers, first_index + i)
                   for i, (v, writers) in enumerate(cycle)]
        return [future.result() for future in futures]


def summarize(records: Sequence[Mapping[str, Any]], states: Mapping[str, VariantState]) -> list[dict[str, Any]]:
    variants = []
    for variant in VARIANTS:
        mine = [r for r in records if r["variant"] == variant.name and r["writers"]]
        controls = [r for r in records if r["variant"] == variant.name and not r["writers"]]
        writer = [r["writer"] for r in mine]
        kinds = Counter(k for w in writer for k in w["failure_kinds"])
        overlaps = [r["overlap"]["overlapped"] for r in mine]
        seconds = [w["seconds"] for w in writer]
        variants.append({
            "name": variant.name, "maintenance": variant.maintenance, "writer": variant.writer,
            "rounds": len(mine), "writer_runs": len(writer), "green_runs": sum(w["green"] for w in writer),
            "green_share": round(sum(w["green"] for w in writer) / len(writer), 4) if writer else None,
            "reruns": sum(w["attempts"] - 1 for w in writer),
            "failures_by_kind": dict(kinds),
            "final_failures_by_kind": dict(Counter(w["final_kind"] for w in writer if not w["green"])),
            "duplicate_rows": max((r["duplicate_rows"] for r in mine + controls), default=0),
            "ledger_mismatches": len(states[variant.name].mismatched),
            "writer_seconds_median": round(statistics.median(seconds), 2) if seconds else None,
            "writer_seconds_total": round(sum(seconds), 1),
            "overlapped_rounds": sum(bool(o) for o in overlaps),
            "maintenance_failures_by_kind": dict(Counter(r["maintenance"]["kind"] for r in mine
                                                         if r["maintenance"]["status"] == "failed")),
            "p2_cold_small_files_at_start": sum(r["cold_small_files_at_start"] for r in mine),
            "p2_compacted_with_writers": sum(r["cold_small_files_compacted"] for r in mine),
            "p2_control_at_start": sum(r["cold_small_files_at_start"] for r in controls),
            "p2_control_compacted": sum(r["cold_small_files_compacted"] for r in controls),
            "p2_alone_at_start": sum(r["cold_small_files_alone"] for r in mine),
            "p2_compactable_at_start": sum(r["cold_small_files_compactable"] for r in mine),
            "p2_compactable_compacted": sum(r["cold_small_files_compactable_compacted"] for r in mine),
            "p2_control_compactable_at_start": sum(r["cold_small_files_compactable"] for r in controls),
            "p2_control_compactable_compacted": sum(r["cold_small_files_compactable_compacted"] for r in controls),
        })
    return variants


def p2_figures(variants: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Coverage per maintenance kind: compacted share of the cold small files, with writers
    running and with writers stopped, and their ratio; the same over the compactable ones
    (a partition's lone file has nothing to be compacted with)."""
    def share(done: int, total: int) -> float | None:
        return done / total if total else None

    def ratio(mine: float | None, reference: float | None) -> float | None:
        return _round(mine / reference) if mine is not None and reference else None

    figures: dict[str, Any] = {}
    for kind in ("naive", "policy"):
        mine = [v for v in variants if v["maintenance"] == kind]
        def total(key: str, of: Sequence[Mapping[str, Any]] = mine) -> int:
            return sum(v[key] for v in of)
        with_writers = share(total("p2_compacted_with_writers"), total("p2_cold_small_files_at_start"))
        stopped = share(total("p2_control_compacted"), total("p2_control_at_start"))
        compactable = share(total("p2_compactable_compacted"), total("p2_compactable_at_start"))
        compactable_stopped = share(total("p2_control_compactable_compacted"),
                                    total("p2_control_compactable_at_start"))
        figures[kind] = {"with_writers": _round(with_writers), "writers_stopped": _round(stopped),
                         "ratio": ratio(with_writers, stopped),
                         "cold_small_files_at_start": total("p2_cold_small_files_at_start"),
                         "control_cold_small_files_at_start": total("p2_control_at_start"),
                         "alone_at_start": total("p2_alone_at_start"),
                         "compactable_with_writers": _round(compactable),
                         "compactable_writers_stopped": _round(compactable_stopped),
                         "compactable_ratio": ratio(compactable, compactable_stopped)}
    return figures


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _versions() -> dict[str, str]:
    found = {}
    for package in ("pyspark", "dbt-core", "dbt-spark", "pyiceberg", "snowpark-connect-deps-iceberg"):
        try:
            found[package] = importlib_metadata.version(package)
        except importlib_metadata.PackageNotFoundError:
            found[package] = "missing"
    return found


def run(rounds: int, quick: bool, results: Path | None = RESULTS, run_dir: Path | None = None,
        cluster: SparkCluster | None = None, postgres: PostgresServer | None = None,
        max_minutes: float | None = None) -> dict[str, Any]:
    """The benchmark; writes concurrency.json after every cycle (a cut-off run keeps its prefix).
    max_minutes: start no cycle after that long; the figures then say how many rounds ran."""
    work = run_dir or Path(tempfile.mkdtemp(prefix="bench-concurrency-"))
    control_every = 1 if quick else 5
    started = time.time()
    load_start = os.getloadavg()
    lab = open_lab(work, cluster, postgres)
    records: list[dict[str, Any]] = []
    states = {v.name: VariantState(v) for v in VARIANTS}
    figures: dict[str, Any] = {}
    try:
        prepare_tables(lab)
        setup_s = time.time() - started
        cycles = schedule(rounds, control_every)
        for number, cycle in enumerate(cycles):
            if max_minutes is not None and time.time() - started > max_minutes * 60:
                figures["stopped_early"] = f"--max-minutes {max_minutes}: no cycle started after that"
                break
            records.extend(run_cycle(lab, states, cycle, len(records)))
            last = number == len(cycles) - 1
            variants = summarize(records, states)
            figures = {
                "benchmark": "concurrency", "quick": quick, "rounds_requested": rounds,
                "rounds_done": min(v["rounds"] for v in variants), "complete": last,
                "started_at": datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds"),
                "duration_s": round(time.time() - started, 1), "setup_s": round(setup_s, 1),
                "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                            "load_average_start": [round(x, 2) for x in load_start],
                            "load_average_now": [round(x, 2) for x in os.getloadavg()],
                            "load_1m_median": statistics.median(r["load_1m"] for r in records)},
                "versions": _versions(),
                "settings": {"catalog": "Iceberg JDBC catalog on PostgreSQL", "cluster": "Spark standalone, "
                             "1 worker (3 declared cores), spark.cores.max=1 per application",
                             "rows_per_batch": ROWS_PER_BATCH, "rounds_per_day": ROUNDS_PER_DAY,
                             "seed_days": SEED_DAYS, "seed_files_per_day": SEED_FILES_PER_DAY,
                             "control_every_cycles": control_every, "writer_max_attempts": 3,
                             "cycle": "the rounds of one cycle run side by side, one table per variant",
                             "policies": {"naive": "rewrite_data_files on the whole table, min-input-files 5",
                                          "policy": "where day < start of the hot window, min-input-files 2, "
                                                    "partial progress"}},
                "variants": variants, "p2": p2_figures(variants), "rounds": records,
            }
            if results is not None:
                results.mkdir(parents=True, exist_ok=True)
                (results / "concurrency.json").write_text(json.dumps(figures, indent=2) + "\n")
    finally:
        lab.close()
    if results is not None and figures:
        (results / "concurrency.json").write_text(json.dumps(figures, indent=2) + "\n")
        plot(figures, results / "concurrency.png")
    return figures


def plot(figures: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = figures["variants"]
    names = [v["name"] for v in variants]
    fig, (share_ax, kind_ax, files_ax) = plt.subplots(1, 3, figsize=(15, 4.2))
    shares = [100 * (v["green_share"] or 0) for v in variants]
    bars = share_ax.bar(names, shares, color=["#c62828", "#ef6c00", "#66bb6a", "#2e7d32"])
    for bar, value in zip(bars, shares, strict=True):
        share_ax.text(bar.get_x() + bar.get_width() / 2, value, f"{value:.0f}%", ha="center", va="bottom")
    share_ax.set_ylim(0, 110)
    share_ax.set_ylabel("writer runs green without human action (%)")
    share_ax.set_title(f"P1 survival, {figures['rounds_done']} rounds per variant")
    share_ax.tick_params(axis="x", rotation=20)
    kinds = sorted({k for v in variants for k in v["failures_by_kind"]})
    bottom = [0] * len(variants)
    for kind in kinds:
        counts = [v["failures_by_kind"].get(kind, 0) for v in variants]
        kind_ax.bar(names, counts, bottom=bottom, label=kind)
        bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
    kind_ax.set_title("failed writer attempts by conflict kind (re-runs included)")
    kind_ax.tick_params(axis="x", rotation=20)
    if kinds:
        kind_ax.legend(fontsize=7)
    for variant in variants:
        mine = [r for r in figures["rounds"] if r["variant"] == variant["name"] and r["writers"]]
        files_ax.plot(range(1, len(mine) + 1), [r["data_files_after"] for r in mine], label=variant["name"])
    files_ax.set_xlabel("round of the variant")
    files_ax.set_ylabel("data files after the round")
    files_ax.set_title("files over time")
    files_ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def print_summary(figures: Mapping[str, Any]) -> None:
    print(f"concurrency benchmark: {figures['rounds_done']} rounds per variant in {figures['duration_s']} s, "
          f"load {figures['machine']['load_average_start']} -> {figures['machine']['load_average_now']}")
    header = (f"  {'variant':<14} {'runs':>5} {'green':>6} {'share':>7} {'reruns':>6} {'dups':>5} {'ledger':>6} "
              f"{'overlap':>7} {'median s':>8}  failures by kind")
    print(header)
    for v in figures["variants"]:
        share = f"{100 * v['green_share']:.0f}%" if v["green_share"] is not None else "-"
        print(f"  {v['name']:<14} {v['writer_runs']:>5} {v['green_runs']:>6} {share:>7} {v['reruns']:>6} "
              f"{v['duplicate_rows']:>5} {v['ledger_mismatches']:>6} {v['overlapped_rounds']:>7} "
              f"{v['writer_seconds_median'] or 0:>8}  {v['failures_by_kind']}")
    for kind, p2 in figures["p2"].items():
        print(f"  P2 {kind:<7} compacted share of cold small files: with writers {p2['with_writers']}, "
              f"writers stopped {p2['writers_stopped']}, ratio {p2['ratio']}; of the compactable ones "
              f"{p2['compactable_with_writers']} vs {p2['compactable_writers_stopped']}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="./scripts/bench concurrency", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=None, help="rounds per variant (default 50; 2 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a few rounds, for the test suite")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where concurrency.json/png go")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the run's files here (default: temp)")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="start no new cycle after this many minutes (the JSON says how many rounds ran)")
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 50)
    if rounds < 1:
        parser.error(f"--rounds {rounds}: expected a whole number >= 1")
    figures = run(rounds, args.quick, args.results, args.workdir, max_minutes=args.max_minutes)
    print_summary(figures)


if __name__ == "__main__":
    main()
