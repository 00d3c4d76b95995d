"""Concurrency benchmark (issue 11, P1 survival and P2 coverage; issue 22, figures that can fail):
dbt writers and the maintenance job as separate OS processes and separate Spark applications on a
standalone cluster, sharing a PostgreSQL-backed Iceberg JDBC catalog.

Each round of a variant: the variant's writer (plain `dbt run`, or `dbt-iceberg-maint run`) runs
two models: a MERGE of batch b into the newest days of a day-partitioned table (idempotent) and an
append of batch b to a second table (not idempotent: a blind re-run duplicates it). The MERGE is
held at a gate (lab/gate.py, the thrift tests' Hive UDF) inside its statement, planned against its
snapshot; then `dbt-iceberg-maint maintain` compacts the MERGE's table (the whole table with
Iceberg's defaults: "naive"; or the cold days the package itself finds with the model's
`cold_partitions_hours`: "policy"), and only when the maintenance has ended does the harness open
the gate. Every round so truly overlaps: the compaction ran entirely inside the MERGE. A round
whose writer did not reach the gate, or whose maintenance ran no compaction, is recorded as not
overlapped and counted apart. The harness never tells the policy what is cold: it only paces the
maintenance's start so that the days the writer left two rounds ago have been quiet for longer
than `cold_partitions_hours` (and records how old the hot and the cold days were).

Writers reach one Thrift Server application on the cluster, maintenance another. The variants'
rounds of a cycle run side by side; after the last cycle a control round runs the same maintenance
with the writers stopped (P2's reference). Afterwards pyiceberg reads the tables (no JVM):
duplicates, the MERGE table against the batches the writer reported committed, the append table
against lab/ledger.py's ledger, and which cold small files the compaction removed. The headline,
naive + `dbt run` against policy + runner, gets Wilson intervals and Fisher's exact test
(benchmarks/stats.py).

`run_round` is the round's named phases; `run` the set-up, the cycles and `_figures`. Over 300
lines: the round, its checks and the figures they add up to change together (a new check is a
record key, a sum in `summarize` and a column).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import harness
from benchmarks.stats import fisher_exact_two_sided, rounds_for_significance, wilson_rounded
from dbt_iceberg_maint.conflicts import classify
from dbt_iceberg_maint.metadata.catalog_tables import MetadataCatalog
from lab import dbt_commands as proc
from lab import ledger
from lab.cluster import (
    ClusterSpec,
    JdbcCatalog,
    LabCatalog,
    MetastoreCatalog,
    SparkCluster,
    start_cluster,
    start_cluster_thrift_server,
)
from lab.gate import build_gate_jar, open_gate, reached
from lab.hive_metastore import start_metastore
from lab.postgres import PostgresServer, start_server

if TYPE_CHECKING:
    from dbt_iceberg_maint.runtime.thrift_server import ThriftServer

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ROOT / "lab" / "projects" / "concurrency"
PROFILE = "lab_concurrency"
SCHEMA = "lab"
BASE_DAY = date(2024, 1, 1)
ROUNDS_PER_DAY = 1  # the writers' hot window moves one day forward every round of a variant
ROWS_PER_BATCH = 200
WARM_UP_BATCHES = 3  # batches 0-2 before the first measured round: days the writers left exist
WARM_UP_THREADS = 4
PROCESS_TIMEOUT_S = 900.0
GATE_REACH_TIMEOUT_S = 400.0  # the writer's dbt start-up and planning, on a loaded machine
# The policy's cold_partitions_hours, in seconds. The days the writer left two rounds ago must be
# quiet for longer (the harness waits for that), the days of its last round for less when the
# package reads the partitions: that read comes up to about 100 s after the maintenance process
# starts on a loaded 2-core machine (dbt start-up, parse, the plan's health queries).
COLD_SECONDS = 300.0
# --quick (the test suite's form): its one writer cycle starts when warm-up batch 1 has been quiet
# for COLD + margin; batch 2 came LAST_WARM_UP_PAUSE x COLD after batch 1, so when the maintenance
# starts its days have been quiet for (1 - LAST_WARM_UP_PAUSE) x COLD + margin minus batch 2's run,
# or for as long as the writer took to reach its gate if that is longer, and must still be hot
# when the package reads them, about 60 s later on a loaded machine (dbt start-up, the plan's
# health queries, the lease: four maintenance processes and four writers share two cores). With
# both catalogs side by side (tests/lab/test_concurrency_bench.py) at a 110 s window and a pause of
# half of it, the hot days' CALL came 89-105 s after their last write (115-120 s on a slow day,
# which failed); at 130 s, in the whole suite on that slow day, 109-114 s (the writers took 38-47 s
# to reach their gates, so the pause did not decide it).
COLD_SECONDS_QUICK = 130.0
LAST_WARM_UP_PAUSE = 0.65  # of the cold window: the last warm-up batch's distance from the one before
QUIET_MARGIN_S = 5.0
# Task slots of the writers' application: a MERGE held at the gate keeps one (its task sleeps),
# so the four variants' MERGEs need a slot each and more to run their other tasks.
WRITER_SLOTS = 6
MIN_CLUSTER_CORES = WRITER_SLOTS + 1  # the writers' slots and one for maintenance
CLUSTER_CORES = MIN_CLUSTER_CORES + 1  # and one spare
SMALL_FILE_BYTES = 0.75 * 512 * 1024 * 1024  # 75 % of the default target file size: every file in this lab
HEADLINE = ("naive_dbt", "policy_runner")
ALPHA = 0.01
# The full run's rounds per variant, from the pilot (benchmarks/results/pilot/concurrency.json): 5
# overlapped rounds per variant reach p < 0.01 at its shares, naive + dbt run overlaps about every
# other round, and 2 more are margin (docs/field-lab.md, "Pilot").
FULL_ROUNDS = 12


@dataclass(frozen=True)
class Variant:
    name: str
    maintenance: str  # "naive" | "policy"
    writer: str  # "dbt" | "runner" | "none" (control: writers stopped)

    @property
    def schema(self) -> str:
        """A schema per variant: dbt lists and describes only its own tables before each run."""
        return f"{SCHEMA}_{self.name}"

    @property
    def model(self) -> str:
        return f"events_{self.name}"

    @property
    def append_model(self) -> str:
        return f"appends_{self.name}"

    @property
    def table(self) -> str:
        return f"{self.schema}.{self.model}"

    @property
    def append_table(self) -> str:
        return f"{self.schema}.{self.append_model}"


VARIANTS = (Variant("naive_dbt", "naive", "dbt"), Variant("naive_runner", "naive", "runner"),
            Variant("policy_dbt", "policy", "dbt"), Variant("policy_runner", "policy", "runner"))


def day_of_batch(batch: int) -> date:
    """First day batch `batch` writes (it also writes the next one); mirrors macros/lab_batch.sql."""
    return BASE_DAY + timedelta(days=batch // ROUNDS_PER_DAY)


def cold_before(batch: int) -> date:
    """Batch b writes day(b), day(b)+1 and rewrites batch b-1's rows (days day(b-1), day(b-1)+1):
    the days before day(b-2) were last written two rounds ago or earlier. Measurement only (P2's
    "cold"): the policy finds its cold days itself."""
    return day_of_batch(max(batch - 2, 0))


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


def runner_outcome(exit_code: int, report: Mapping[str, Any] | None, output: str, model: str | None = None
                   ) -> WriterOutcome:
    """`dbt-iceberg-maint run`: its JSON report's attempts and kinds (of node `model`, else the first)."""
    nodes = (report or {}).get("nodes") or []
    node = next((n for n in nodes if model is None or n.get("name") == model), None)
    if report is None or node is None:
        kind = classify(output).kind
        return WriterOutcome(False, 1, (kind,), kind)
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


def append_event(final_status: str | None, errored: bool) -> str:
    """The ledger event of an append node (lab/ledger.py): green -> `committed`; an attempt that
    errored -> `unknown` (it may have landed: absent or once are both fine, twice is not); never
    run (skipped, or not in the results) -> `failed` (it must be absent)."""
    if final_status == "success":
        return "committed"
    return "unknown" if errored else "failed"


def overlap_met(reached_gate: bool, compaction_status: str | None, writer_held: bool) -> bool:
    """A round overlapped when the MERGE reached the gate before the maintenance started, the
    maintenance ran a compaction (not skipped: a CALL went to Spark), and the writer was still
    held at the gate when the maintenance ended."""
    return reached_gate and compaction_status in ("success", "failed") and writer_held


def quiet_wait(now: float, writer_ends: Sequence[float], cold_seconds: float, margin_s: float = QUIET_MARGIN_S
               ) -> float:
    """Seconds to wait before the maintenance starts so that the writer's round before last ended
    more than `cold_seconds` ago (the days it left are cold by the policy's rule by then)."""
    if len(writer_ends) < 2:
        return 0.0
    return max(0.0, writer_ends[-2] + cold_seconds + margin_s - now)


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
    """The running components of one benchmark run; `close()` stops what it started. The
    maintenance side (its Thrift Server, the gate jar) is started by `start_maintenance_side`."""

    run_dir: Path
    catalog: LabCatalog
    cluster: SparkCluster
    writer_server: ThriftServer
    project: Path
    started: ExitStack  # stops what open_lab started, last started first
    _maintenance_server: ThriftServer | None = None
    _gate_jar: Path | None = None
    _iceberg: MetadataCatalog | None = None

    @property
    def maintenance_server(self) -> ThriftServer:
        if self._maintenance_server is None:
            raise RuntimeError("the maintenance server has not been started (start_maintenance_side)")
        return self._maintenance_server

    @property
    def gate_jar(self) -> Path:
        if self._gate_jar is None:
            raise RuntimeError("the gate jar has not been built (start_maintenance_side)")
        return self._gate_jar

    def start_maintenance_side(self) -> None:
        """The maintenance's Thrift Server application and the gate jar: only the measured rounds
        use them, so `prepare_tables` starts them in the warm-up's pause instead of before it."""
        self._maintenance_server = start_cluster_thrift_server(
            self.cluster, self.catalog, self.run_dir / "maintenance_server", name="maintenance", with_ui=True,
            extra_conf=UI_CONF)
        self.started.callback(self._maintenance_server.stop)
        self._gate_jar = build_gate_jar(self.run_dir / "gate_build")

    def iceberg(self) -> MetadataCatalog:
        """One pyiceberg catalog (one connection pool) for the whole run: a catalog per read
        would leave its PostgreSQL connections open."""
        if self._iceberg is None:
            self._iceberg = self.catalog.metadata()
        return self._iceberg

    def workdir(self, name: str, server: ThriftServer) -> Path:
        return proc.workdir(self.run_dir / "proc", name, proc.thrift_profile(PROFILE, server.host, server.port,
                                                                                SCHEMA))

    def close(self) -> None:
        self.started.close()


UI_CONF = {"spark.ui.enabled": "true", "spark.sql.ui.retainedExecutions": "200"}


# The catalogs the lab runs on (--catalog): what the figures' settings call them.
CATALOGS = {"jdbc": "Iceberg JDBC catalog on PostgreSQL",
            "hive": "Iceberg Hive catalog on a Hive Metastore 2.3.9 on PostgreSQL"}


def open_lab(run_dir: Path, cluster: SparkCluster | None = None, postgres: PostgresServer | None = None,
             catalog_kind: str = "jdbc") -> Lab:
    """Start what is not given (PostgreSQL, cluster; the Hive Metastore for catalog_kind "hive")
    and the writers' Thrift Server application."""
    if catalog_kind not in CATALOGS:
        raise ValueError(f"catalog_kind is {catalog_kind!r}; expected one of {', '.join(sorted(CATALOGS))}")
    with ExitStack() as started:
        if postgres is None:
            postgres = start_server()
            started.callback(shutil.rmtree, postgres.data_dir.parent, ignore_errors=True)
            started.callback(postgres.stop)
        catalog: LabCatalog
        if catalog_kind == "hive":
            # A database of its own on the server, per run: no metastore state is shared.
            metastore = start_metastore(postgres, run_dir / "metastore", database=f"metastore_{run_dir.name}"[:63])
            started.callback(metastore.stop)
            catalog = MetastoreCatalog(metastore, run_dir / "warehouse")
        else:
            catalog = JdbcCatalog(postgres, run_dir / "warehouse")
        if cluster is None:
            # Slots are declared, not CPUs: gated tasks sleep. Writers, maintenance, one spare.
            cluster = start_cluster(run_dir / "cluster", ClusterSpec(worker_cores=CLUSTER_CORES))
            started.callback(cluster.stop)
        elif cluster.spec.worker_cores < MIN_CLUSTER_CORES:
            raise ValueError(f"cluster: a worker with {cluster.spec.worker_cores} cores; the concurrency benchmark "
                             f"needs at least {MIN_CLUSTER_CORES} ({WRITER_SLOTS} writer slots, 1 for maintenance)")
        # The writer application writes 6 tasks' files per partition (no coalescing): small files
        # accumulate in the hot days, as under frequent small writes.
        writers = start_cluster_thrift_server(
            cluster, catalog, run_dir / "writer_server", name="writers", with_ui=True,
            extra_conf={**UI_CONF, "spark.sql.shuffle.partitions": "6", "spark.cores.max": str(WRITER_SLOTS),
                        "spark.executor.cores": str(WRITER_SLOTS),
                        "spark.sql.adaptive.coalescePartitions.enabled": "false"})
        started.callback(writers.stop)
        project = run_dir / "project"
        shutil.copytree(PROJECT, project, dirs_exist_ok=True, ignore=shutil.ignore_patterns("target", "dbt_packages",
                                                                                           "logs"))
        (project / "packages.yml").write_text(json.dumps({"packages": [{"local": str(ROOT)}]}) + "\n")
        return Lab(run_dir, catalog, cluster, writers, project, started.pop_all())


def _check(finished: proc.Finished, what: str) -> None:
    if finished.exit_code != 0:
        raise RuntimeError(f"{what} failed (exit {finished.exit_code}):\n{finished.output[-3000:]}")


def writer_env(batch: int, cold_seconds: float, gate_dir: Path | None = None, gate_jar: Path | None = None
               ) -> dict[str, str]:
    env = {"LAB_BATCH": str(batch), "LAB_ROWS": str(ROWS_PER_BATCH), "LAB_ROUNDS_PER_DAY": str(ROUNDS_PER_DAY),
           "LAB_BASE_DAY": BASE_DAY.isoformat(), "LAB_COLD_HOURS": repr(cold_seconds / 3600)}
    if gate_dir is not None and gate_jar is not None:
        env.update({"LAB_GATE_DIR": str(gate_dir), "LAB_GATE_JAR": str(gate_jar)})
    return env


def writer_selection(variants: Iterable[Variant]) -> str:
    return " ".join(f"{v.model} {v.append_model}" for v in variants)


@dataclass
class VariantState:
    variant: Variant
    batch: int = 0
    committed: set[int] = field(default_factory=set)
    mismatched: set[int] = field(default_factory=set)
    # When the writer process of each round ended (warm-up runs included): its last write.
    writer_ends: list[float] = field(default_factory=list)
    appends: list[ledger.LedgerEntry] = field(default_factory=list)

    def record_append(self, batch: int, event: str, detail: str = "") -> None:
        self.appends.append(ledger.LedgerEntry.for_batch(self.variant.name, self.variant.append_table, batch, event,
                                                         ROWS_PER_BATCH, detail))


def prepare_tables(lab: Lab, states: Mapping[str, VariantState], cold_seconds: float) -> None:
    """dbt deps, then warm-up batches 0..WARM_UP_BATCHES-1 of every variant's tables (plain dbt
    run, no gate, no maintenance; the last one LAST_WARM_UP_PAUSE of cold_partitions_hours after the others):
    the first measured round finds days the writers left behind."""
    work = lab.workdir("setup", lab.writer_server)
    deps = proc.DbtCommand("deps", (str(proc.BIN / "dbt"), "deps", "--project-dir", str(lab.project)), work)
    _check(proc.run(deps, PROCESS_TIMEOUT_S), "dbt deps")
    # The batches before the pause build the variants' tables side by side (a table per model,
    # none shares a commit; each statement writes the same files): a shorter setup.
    for batch in range(WARM_UP_BATCHES - 1):
        _warm_up(lab, states, work, batch, cold_seconds, WARM_UP_THREADS)
    # The last batch is spaced like measured rounds: the days it writes must still be hot (quiet
    # for less than cold_partitions_hours) when the first round's maintenance starts, which waits
    # until the one before last is cold. The earlier batches only need to be cold by then, so they
    # follow each other without a pause. The pause starts the maintenance side, which the warm-up
    # does not use, parses the project for it, and sleeps the rest.
    paused = time.monotonic()
    lab.start_maintenance_side()
    last = WARM_UP_BATCHES - 1
    maintenance_parsed = parse_state(lab, lab.maintenance_server, writer_env(last + 1, cold_seconds))
    time.sleep(max(0.0, cold_seconds * LAST_WARM_UP_PAUSE - (time.monotonic() - paused)))
    # The profile's one thread: this batch's length is part of the hot days' margin (COLD_SECONDS_QUICK).
    _warm_up(lab, states, work, last, cold_seconds, None)
    # Every round's process starts from a parse state of its own profile (dbt parses in full when
    # the profile differs): the cycle's processes all start at once, and a full parse each cost
    # 15-20 s on a loaded machine, time the hot days' margin pays.
    for state in states.values():
        seed_parse_state(work / "target", lab.workdir(f"writer-{state.variant.name}", lab.writer_server))
        seed_parse_state(maintenance_parsed, lab.workdir(f"maintain-{state.variant.name}", lab.maintenance_server))


def _warm_up(lab: Lab, states: Mapping[str, VariantState], work: Path, batch: int, cold_seconds: float,
             threads: int | None) -> None:
    create = proc.dbt_run(f"warm-up-{batch}", lab.project, work, writer_selection(VARIANTS),
                          writer_env(batch, cold_seconds), threads=threads)
    _check(proc.run(create, PROCESS_TIMEOUT_S), f"dbt run (warm-up batch {batch})")
    ended = time.time()
    for state in states.values():
        state.batch = batch
        state.committed.add(batch)
        state.writer_ends.append(ended)
        state.record_append(batch, "committed", "warm-up")


def parse_state(lab: Lab, server: ThriftServer, env: Mapping[str, str]) -> Path:
    """`dbt parse` of the project with `server`'s profile; the folder of the state it wrote."""
    work = lab.workdir(f"parse-{server.port}", server)
    parse = proc.DbtCommand("parse", (str(proc.BIN / "dbt"), "parse", "--project-dir", str(lab.project)), work,
                            dict(env))
    _check(proc.run(parse, PROCESS_TIMEOUT_S), "dbt parse")
    return parse.target_path


def seed_parse_state(target: Path, workdir: Path) -> None:
    """A copy of the partial-parse state in `target` for the process that will run in `workdir`."""
    (workdir / "target").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(target / "partial_parse.msgpack", workdir / "target" / "partial_parse.msgpack")


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
    table = lab.iceberg().load(variant.table)
    files = table.inspect.files().to_pylist()
    return [FileRow(f["file_path"], f["partition"].get("day"), int(f["file_size_in_bytes"])) for f in files
            if f.get("content", 0) == 0]


def table_rows(lab: Lab, variant: Variant) -> tuple[int, int, Counter[int]]:
    """(rows, distinct event ids, distinct events per batch)."""
    import pyarrow.compute as pc

    table = lab.iceberg().load(variant.table)
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


def append_check(lab: Lab, state: VariantState) -> ledger.TableCheck:
    """The append table against the ledger of what the writer reported (lab/ledger.py)."""
    table = lab.iceberg().load(state.variant.append_table).scan(
        selected_fields=("id", "batch_id", "payload")).to_arrow()
    rows: dict[int, list[int]] = {}
    for batch_id, row_id, payload in zip(table.column("batch_id").to_pylist(), table.column("id").to_pylist(),
                                         table.column("payload").to_pylist(), strict=True):
        counted = rows.setdefault(int(batch_id), [0, 0])
        counted[0] += 1
        counted[1] += ledger.row_checksum(int(row_id), str(payload))
    observed = [ledger.Observed(b, n, checksum) for b, (n, checksum) in rows.items()]
    table_name = state.variant.append_table
    return ledger.check(table_name, ledger.expectations(state.appends, table_name), observed)


def append_outcome(variant: Variant, wrote: proc.Finished, report: Mapping[str, Any] | None,
                   run_results: Mapping[str, Any] | None) -> tuple[str, str]:
    """(ledger event, the append node's final status) from the writer's own record of it."""
    if variant.writer == "runner":
        node = next((n for n in (report or {}).get("nodes", []) if n.get("name") == variant.append_model), None)
        status = None if node is None else node.get("final_status")
        errored = node is not None and any(h.get("status") == "error" for h in node.get("history", []))
    else:
        result = next((r for r in (run_results or {}).get("results", [])
                       if str(r.get("unique_id", "")).endswith(f".{variant.append_model}")), None)
        status = None if result is None else result.get("status")
        errored = status == "error"
    if status is None and wrote.exit_code == 0:
        raise RuntimeError(f"{variant.append_model}: a green writer run without the append node in its results")
    return append_event(status, errored), str(status)


def run_round(lab: Lab, state: VariantState, writers: bool, index: int, cold_seconds: float) -> dict[str, Any]:
    """One round: the writer held at its gate, the maintenance paced and run inside its MERGE, the
    gate opened and the writer's outcome read, then the table checks and the Spark UI's evidence
    of the overlap. A control round (writers=False) runs the maintenance alone."""
    variant = state.variant
    batch = state.batch + 1 if writers else state.batch
    boundary = cold_before(batch if writers else batch + 1)
    before = table_files(lab, variant)
    gate_dir = lab.run_dir / "gates" / f"{variant.name}-{batch}-{index}"
    gate_dir.mkdir(parents=True, exist_ok=True)
    env = writer_env(batch, cold_seconds, gate_dir if writers else None, lab.gate_jar)
    record: dict[str, Any] = {"round": index, "variant": variant.name, "writers": writers, "batch": batch,
                              "cold_before": boundary.isoformat(), "load_1m": round(os.getloadavg()[0], 2)}
    started = time.time()
    writer_run, gate = _writer_to_gate(lab, variant, gate_dir, env, started) if writers else (None, {})
    previous_ends = list(state.writer_ends)
    _pace_maintenance(state, record, gate, cold_seconds)
    compaction = _maintain(lab, variant, env, record)
    if writer_run is not None:
        _finish_writer(state, writer_run, gate_dir, batch, index, compaction, gate, record)
    record["gate"] = gate
    _check_tables(lab, state, before, boundary, record)
    _ui_overlap(lab, variant, started, previous_ends, writers, record)
    return record


def _writer_to_gate(lab: Lab, variant: Variant, gate_dir: Path, env: Mapping[str, str], started: float
                    ) -> tuple[proc.Running, dict[str, Any]]:
    """Start the writer and wait until its MERGE reached the gate (or it ended, or the wait timed out)."""
    work = lab.workdir(f"writer-{variant.name}", lab.writer_server)
    build = proc.runner_run if variant.writer == "runner" else proc.dbt_run
    models = f"{variant.model} {variant.append_model}"
    writer_run = proc.start(build(f"writer-{variant.name}", lab.project, work, models, env))
    deadline = time.monotonic() + GATE_REACH_TIMEOUT_S
    while not reached(gate_dir) and writer_run.process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    return writer_run, {"reached": reached(gate_dir), "reached_after_s": round(time.time() - started, 1)}


def _pace_maintenance(state: VariantState, record: dict[str, Any], gate: Mapping[str, Any], cold_seconds: float
                      ) -> None:
    """Pacing, not scoping: the maintenance starts once the days the writer left two rounds ago
    have been quiet for longer than cold_partitions_hours (control rounds too); the policy finds
    them itself."""
    wait = quiet_wait(time.time(), state.writer_ends, cold_seconds) if gate.get("reached", True) else 0.0
    time.sleep(wait)
    record["quiet_wait_s"] = round(wait, 1)
    maintenance_started = time.time()
    if state.writer_ends:
        record["hot_days_quiet_s"] = round(maintenance_started - state.writer_ends[-1], 1)
        record["left_days_quiet_s"] = (round(maintenance_started - state.writer_ends[-2], 1)
                                       if len(state.writer_ends) > 1 else None)


def _maintain(lab: Lab, variant: Variant, env: Mapping[str, str], record: dict[str, Any]) -> dict[str, Any]:
    """`dbt-iceberg-maint maintain` compacting the variant's MERGE table; its compaction result."""
    maintenance = proc.maintain(f"maintain-{variant.name}", lab.project,
                                lab.workdir(f"maintain-{variant.name}", lab.maintenance_server), [variant.model],
                                ["rewrite_data_files"], env)
    maintained = proc.start(maintenance).wait(PROCESS_TIMEOUT_S)
    results = (maintained.report(maintenance) or {}).get("results", [])
    compaction: dict[str, Any] = results[0] if results else {}
    record["maintenance"] = {"exit_code": maintained.exit_code, "seconds": round(maintained.seconds, 2),
                             "status": compaction.get("status"), "reason": compaction.get("reason"),
                             "kind": maintenance_kind(compaction), "sql": compaction.get("sql"),
                             "rewritten_files": (compaction.get("metrics") or {}).get("rewritten_data_files_count")}
    return compaction


def _finish_writer(state: VariantState, writer_run: proc.Running, gate_dir: Path, batch: int, index: int,
                   compaction: Mapping[str, Any], gate: dict[str, Any], record: dict[str, Any]) -> None:
    """Open the gate, wait for the writer, and record what it did (and the append's ledger event)."""
    variant = state.variant
    gate["writer_held_until_maintenance_ended"] = writer_run.process.poll() is None
    open_gate(gate_dir)
    wrote = writer_run.wait(PROCESS_TIMEOUT_S)
    state.writer_ends.append(time.time())
    command = writer_run.command
    report_doc = wrote.report(command)
    results_path = command.target_path / "run_results.json"
    run_results = json.loads(results_path.read_text()) if results_path.is_file() else None
    if variant.writer == "runner":
        outcome = runner_outcome(wrote.exit_code, report_doc, wrote.output, variant.model)
    else:
        outcome = plain_dbt_outcome(wrote.exit_code, run_results, wrote.output)
    event, append_status = append_outcome(variant, wrote, report_doc, run_results)
    state.record_append(batch, event, f"round {index}")
    state.batch = batch
    if outcome.green:
        state.committed.add(batch)
    record["writer"] = {**asdict(outcome), "seconds": round(wrote.seconds, 2), "append_status": append_status,
                        "append_event": event}
    gate["overlap_met"] = overlap_met(gate["reached"], compaction.get("status"),
                                      gate["writer_held_until_maintenance_ended"])


def _check_tables(lab: Lab, state: VariantState, before: Sequence[FileRow], boundary: date,
                  record: dict[str, Any]) -> None:
    """P2's coverage, duplicates, the MERGE table against the committed batches, the append
    table against its ledger."""
    variant = state.variant
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
    appended = append_check(lab, state)
    record["append_ledger"] = {"ok": appended.ok, "rows_duplicated": appended.rows_duplicated,
                               "duplicated_batches": list(appended.duplicated), "lost": list(appended.lost),
                               "unexpected": list(appended.unexpected), "mismatched": list(appended.mismatched)}


def _ui_overlap(lab: Lab, variant: Variant, started: float, previous_ends: Sequence[float], writers: bool,
                record: dict[str, Any]) -> None:
    """Second evidence of the overlap: the Spark UI's statement intervals on both servers."""
    table = variant.table
    writer_ui, maintenance_ui = ui_executions(lab.writer_server), ui_executions(lab.maintenance_server)
    # Only statements that ran during this round: the intervals' 1 s tolerance on the start would
    # otherwise let the previous round's last statement, ended just before, into a control round.
    merges = [m for m in spark_ui_intervals(writer_ui or [], f"merge into {table} ", started) if m.end >= started]
    calls = [c for c in spark_ui_intervals(maintenance_ui or [], f"rewrite_data_files(table => '{table}'", started)
             if c.end >= started]
    known = writer_ui is not None and maintenance_ui is not None
    record["overlap"] = {"merge_statements": len(merges), "compaction_statements": len(calls), "ui_answered": known,
                         "overlapped": overlapped(merges, calls) if writers and known else None}
    if calls and len(previous_ends) > 1:
        # The ages the package saw, near enough: its plan's reads come just before the CALL.
        record["hot_days_quiet_at_call_s"] = round(calls[0].start - previous_ends[-1], 1)
        record["left_days_quiet_at_call_s"] = round(calls[0].start - previous_ends[-2], 1)
    if merges and calls:
        record["overlap"].update({"merge_start_s": round(merges[0].start - started, 1),
                                  "merge_seconds": round(merges[0].end - merges[0].start, 1),
                                  "compaction_start_s": round(calls[0].start - started, 1),
                                  "compaction_seconds": round(calls[0].end - calls[0].start, 1)})


# ---- the run and its figures --------------------------------------------------------------------

def schedule(rounds: int) -> list[list[tuple[Variant, bool]]]:
    """Cycles of rounds run side by side: every variant once per cycle (so any prefix covers
    them equally), then one control cycle (writers stopped) on each maintenance kind's runner
    table. Controls come last: a pause of the writers in between would let the hot days cool."""
    cycles: list[list[tuple[Variant, bool]]] = [[(v, True) for v in VARIANTS] for _ in range(rounds)]
    cycles.append([(v, False) for v in VARIANTS if v.writer == "runner"])
    return cycles


def run_cycle(lab: Lab, states: Mapping[str, VariantState], cycle: Sequence[tuple[Variant, bool]],
              first_index: int, cold_seconds: float) -> list[dict[str, Any]]:
    """The cycle's rounds at once, one thread each (separate tables: they compete for the
    machine, not for commits); records in the cycle's order."""
    with ThreadPoolExecutor(max_workers=len(cycle)) as pool:
        futures = [pool.submit(run_round, lab, states[v.name], writers, first_index + i, cold_seconds)
                   for i, (v, writers) in enumerate(cycle)]
        return [future.result() for future in futures]


def share_figures(green: int, runs: int) -> dict[str, Any]:
    """A green share with its Wilson 95 % and 99 % intervals."""
    return {"green": green, "runs": runs, "share": round(green / runs, 4) if runs else None,
            "wilson_95": wilson_rounded(green, runs, 0.95), "wilson_99": wilson_rounded(green, runs, 0.99)}


def headline(variants: Sequence[Mapping[str, Any]], alpha: float = ALPHA) -> dict[str, Any]:
    """naive + `dbt run` against policy + runner over the rounds that overlapped: Fisher's exact
    test (two-sided) on green vs red, and the rounds per variant the observed shares would need."""
    by_name = {v["name"]: v for v in variants}
    a, b = (by_name[name]["overlapped"] for name in HEADLINE)
    p_value = fisher_exact_two_sided(a["green"], a["runs"] - a["green"], b["green"], b["runs"] - b["green"])
    needed = (rounds_for_significance(a["share"], b["share"], alpha)
              if a["share"] is not None and b["share"] is not None else None)
    return {"compared": list(HEADLINE), "over": "overlapped rounds only", "test": "Fisher's exact test, two-sided",
            "table": [[a["green"], a["runs"] - a["green"]], [b["green"], b["runs"] - b["green"]]],
            "p_value": p_value, "alpha": alpha, "significant": p_value < alpha,
            "rounds_needed_at_observed_shares": needed}


def summarize(records: Sequence[Mapping[str, Any]], states: Mapping[str, VariantState]) -> list[dict[str, Any]]:
    variants = []
    for variant in VARIANTS:
        mine = [r for r in records if r["variant"] == variant.name and r["writers"]]
        controls = [r for r in records if r["variant"] == variant.name and not r["writers"]]
        writer = [r["writer"] for r in mine]
        kinds = Counter(k for w in writer for k in w["failure_kinds"])
        overlaps = [r["overlap"]["overlapped"] for r in mine]
        met = [r for r in mine if r["gate"].get("overlap_met")]
        last_append = (mine + controls)[-1]["append_ledger"] if mine + controls else {}
        seconds = [w["seconds"] for w in writer]
        variants.append({
            "name": variant.name, "maintenance": variant.maintenance, "writer": variant.writer,
            "rounds": len(mine), "writer_runs": len(writer), "green_runs": sum(w["green"] for w in writer),
            "green_share": round(sum(w["green"] for w in writer) / len(writer), 4) if writer else None,
            # The figure that counts: rounds whose compaction ran inside the held MERGE.
            "overlapped": share_figures(sum(r["writer"]["green"] for r in met), len(met)),
            "not_overlapped_rounds": len(mine) - len(met),
            "not_overlapped_green": sum(r["writer"]["green"] for r in mine if not r["gate"].get("overlap_met")),
            "append_duplicate_rows": last_append.get("rows_duplicated", 0),
            "append_ledger_ok": last_append.get("ok"),
            "reruns": sum(w["attempts"] - 1 for w in writer),
            "failures_by_kind": dict(kinds),
            "final_failures_by_kind": dict(Counter(w["final_kind"] for w in writer if not w["green"])),
            "duplicate_rows": max((r["duplicate_rows"] for r in mine + controls), default=0),
            "ledger_mismatches": len(states[variant.name].mismatched),
            "writer_seconds_median": round(statistics.median(seconds), 2) if seconds else None,
            "writer_seconds_total": round(sum(seconds), 1),
            "ui_overlapped_rounds": sum(bool(o) for o in overlaps),
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


def run(rounds: int, quick: bool, results: Path | None = harness.RESULTS, run_dir: Path | None = None,
        cluster: SparkCluster | None = None, postgres: PostgresServer | None = None,
        max_minutes: float | None = None, cold_seconds: float = COLD_SECONDS,
        catalog_kind: str = "jdbc") -> dict[str, Any]:
    """The benchmark; writes concurrency.json after every cycle (a cut-off run keeps its prefix).
    max_minutes: start no writer cycle after that long (the control cycle still runs); the figures
    then say how many rounds ran."""
    work = run_dir or Path(tempfile.mkdtemp(prefix="bench-concurrency-"))
    started = time.time()
    start = harness.run_start()
    lab = open_lab(work, cluster, postgres, catalog_kind)
    records: list[dict[str, Any]] = []
    states = {v.name: VariantState(v) for v in VARIANTS}
    figures: dict[str, Any] = {}
    stopped_early: str | None = None
    try:
        prepare_tables(lab, states, cold_seconds)
        setup_s = time.time() - started
        cycles = schedule(rounds)
        for number, cycle in enumerate(cycles):
            control = not cycle[0][1]
            if not control and max_minutes is not None and time.time() - started > max_minutes * 60:
                stopped_early = f"--max-minutes {max_minutes}: no writer cycle started after that"
                continue
            cycle_started = time.time()
            records.extend(run_cycle(lab, states, cycle, len(records), cold_seconds))
            print(f"  concurrency: cycle {number + 1}/{len(cycles)}{' (control)' if control else ''} in "
                  f"{time.time() - cycle_started:.0f} s", flush=True)
            figures = _figures(records, states, quick, rounds, number == len(cycles) - 1, stopped_early, started,
                               setup_s, start, catalog_kind, cold_seconds)
            if results is not None:  # a cut-off run keeps its figures so far
                harness.write_results("concurrency", figures, results)
    finally:
        lab.close()
    if results is not None and figures:
        harness.publish("concurrency", figures, results, plot, lambda _figures: None)
    return figures


def _figures(records: list[dict[str, Any]], states: Mapping[str, VariantState], quick: bool, rounds: int,
             complete: bool, stopped_early: str | None, started: float, setup_s: float, start: harness.RunStart,
             catalog_kind: str, cold_seconds: float) -> dict[str, Any]:
    """concurrency.json after the rounds so far: the variants' figures, the settings, every round."""
    variants = summarize(records, states)
    return {
        "benchmark": "concurrency", "quick": quick, "rounds_requested": rounds,
        "rounds_done": min(v["rounds"] for v in variants), "complete": complete,
        "stopped_early": stopped_early,
        "started_at": datetime.fromtimestamp(started, timezone.utc).isoformat(timespec="seconds"),
        "duration_s": round(time.time() - started, 1), "setup_s": round(setup_s, 1),
        **harness.provenance(start),
        "load_1m_median": statistics.median(r["load_1m"] for r in records),
        "settings": {"catalog": CATALOGS[catalog_kind], "cluster": "Spark standalone, "
                     f"1 worker, writers' application {WRITER_SLOTS} task slots (a gated task holds one), "
                     "maintenance's 1",
                     "rows_per_batch": ROWS_PER_BATCH, "rounds_per_day": ROUNDS_PER_DAY,
                     "warm_up_batches": WARM_UP_BATCHES, "writer_max_attempts": 3,
                     "writer_models": "a MERGE model (idempotent) and an append model (not idempotent) "
                                      "in one dbt invocation",
                     "gate": "the MERGE waits at a Hive UDF gate (lab/gate.py) from before its commit "
                             "until the maintenance process has ended",
                     "cold_partitions_seconds": cold_seconds, "quiet_margin_s": QUIET_MARGIN_S,
                     "last_warm_up_pause": LAST_WARM_UP_PAUSE,
                     "controls": "one cycle after the last writer cycle, writers stopped",
                     "cycle": "the rounds of one cycle run side by side, one table per variant",
                     "policies": {"naive": "rewrite_data_files on the whole table, min-input-files 5",
                                  "policy": f"cold_partitions_hours {cold_seconds / 3600:.5f} "
                                            f"({cold_seconds:.0f} s) in the model's policy, the "
                                            "package finds the cold days; min-input-files 2, partial "
                                            "progress"}},
        "variants": variants, "headline": headline(variants), "p2": p2_figures(variants),
        "rounds": records,
    }


def plot(figures: Mapping[str, Any], path: Path) -> None:
    plt = harness.pyplot()
    variants = figures["variants"]
    names = [v["name"] for v in variants]
    fig, (share_ax, kind_ax, files_ax) = plt.subplots(1, 3, figsize=(15, 4.2))
    overlapped = [v["overlapped"] for v in variants]
    shares = [100 * (o["share"] or 0) for o in overlapped]
    errors = [[100 * (o["share"] or 0) - 100 * (o["wilson_95"] or [0, 0])[0] for o in overlapped],
              [100 * (o["wilson_95"] or [0, 0])[1] - 100 * (o["share"] or 0) for o in overlapped]]
    bars = share_ax.bar(names, shares, yerr=errors, capsize=4, color=["#c62828", "#ef6c00", "#66bb6a", "#2e7d32"])
    for bar, o in zip(bars, overlapped, strict=True):
        share_ax.text(bar.get_x() + bar.get_width() / 2, 2, f"{o['green']}/{o['runs']}", ha="center", va="bottom")
    share_ax.set_ylim(0, 110)
    share_ax.set_ylabel("green writer runs, overlapped rounds (%, Wilson 95 %)")
    share_ax.set_title(f"P1 survival, p = {figures['headline']['p_value']:.2g} (Fisher, {' vs '.join(HEADLINE)})",
                       fontsize=9)
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
    harness.save_figure(fig, path)


def print_summary(figures: Mapping[str, Any]) -> None:
    print(f"concurrency benchmark: {figures['rounds_done']} rounds per variant in {figures['duration_s']} s, "
          f"load {figures['load_average']['start']} -> {figures['load_average']['end']}, commit {figures['commit']} "
          f"(dirty: {figures['dirty']})")
    header = (f"  {'variant':<14} {'overlap':>7} {'green':>6} {'share':>6} {'wilson 95%':>13} {'not ovl':>7} "
              f"{'reruns':>6} {'dups':>4} {'app.dup':>7} {'ledger':>6}  failures by kind")
    print(header)
    for v in figures["variants"]:
        o = v["overlapped"]
        share = f"{100 * o['share']:.0f}%" if o["share"] is not None else "-"
        wilson = f"{o['wilson_95'][0]:.2f}-{o['wilson_95'][1]:.2f}" if o["wilson_95"] else "-"
        print(f"  {v['name']:<14} {o['runs']:>7} {o['green']:>6} {share:>6} {wilson:>13} "
              f"{v['not_overlapped_rounds']:>7} {v['reruns']:>6} {v['duplicate_rows']:>4} "
              f"{v['append_duplicate_rows']:>7} {v['ledger_mismatches']:>6}  {v['failures_by_kind']}")
    h = figures["headline"]
    print(f"  headline {' vs '.join(h['compared'])}: {h['table']}, {h['test']} p = {h['p_value']:.3g} "
          f"(significant at {h['alpha']}: {h['significant']}; rounds needed at these shares: "
          f"{h['rounds_needed_at_observed_shares']})")
    for kind, p2 in figures["p2"].items():
        print(f"  P2 {kind:<7} compacted share of cold small files: with writers {p2['with_writers']}, "
              f"writers stopped {p2['writers_stopped']}, ratio {p2['ratio']}; of the compactable ones "
              f"{p2['compactable_with_writers']} vs {p2['compactable_writers_stopped']}")


def main() -> None:
    parser = harness.parser("concurrency", __doc__, "a few rounds, for the test suite")
    parser.add_argument("--rounds", type=int, default=None,
                        help=f"rounds per variant (default {FULL_ROUNDS}; 2 with --quick)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the run's files here (default: temp)")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="start no new cycle after this many minutes (the JSON says how many rounds ran)")
    parser.add_argument("--cold-seconds", type=float, default=None,
                        help=f"the policy's cold_partitions_hours, in seconds (default {COLD_SECONDS:.0f}; "
                             f"{COLD_SECONDS_QUICK:.0f} with --quick)")
    parser.add_argument("--catalog", choices=sorted(CATALOGS), default="jdbc",
                        help="the catalog the applications share: jdbc (PostgreSQL, default) or hive "
                             "(a Hive Metastore on PostgreSQL)")
    args = parser.parse_args()
    rounds = harness.count(parser, "rounds", args.rounds, FULL_ROUNDS, 2, args)
    cold_seconds = args.cold_seconds or (COLD_SECONDS_QUICK if args.quick else COLD_SECONDS)
    if cold_seconds <= 0:
        parser.error(f"--cold-seconds {cold_seconds}: expected a number of seconds > 0")
    figures = run(rounds, args.quick, args.results, args.workdir, max_minutes=args.max_minutes,
                  cold_seconds=cold_seconds, catalog_kind=args.catalog)
    print_summary(figures)


if __name__ == "__main__":
    main()
