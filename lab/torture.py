"""The torture run (issue 14): load, crashes and catalog faults on an Iceberg catalog (a JDBC one on
PostgreSQL, or a Hive one on a Hive Metastore on PostgreSQL), then the orphan-safety audit and the
ledger check. Used by `./scripts/torture` (benchmarks/torture.py) and, in its quick form on both
catalogs, by tests/lab/test_torture.py.

Every component is started here and stopped in `finally`: PostgreSQL (lab/postgres.py), the Hive
Metastore (lab/hive_metastore.py) for the Hive catalog, one commit-cut proxy per worker process
between it and its catalog's server (lab/proxy.py), and the worker processes
(lab/torture_workers.py: dbt writers through `dbt-iceberg-maint run`, a plain Spark writer, the
maintenance loop through `dbt-iceberg-maint maintain`, an in-flight long writer). Each worker runs
in its own process group, so `kill -9` of a worker takes its JVM with it.

The timeline is `_scenario`'s named phases; the pure judgement of each fault is
lab/torture_judging.py. Over 300 lines: `Run` (the running components, and how each crash and
cut is triggered at the right moment of a worker's write) and the phases that drive it read the
same state; apart, each would reach into the other's.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.errors import IcebergMaintError
from dbt_iceberg_maint.maintenance.leases import RUN_ID_ENV
from dbt_iceberg_maint.runtime import processes
from lab import audit
from lab import torture_judging as judging
from lab.cluster import JdbcCatalog, LabCatalog, MetastoreCatalog
from lab.hive_metastore import HiveMetastore, start_metastore
from lab.ledger import Ledger, TableCheck, check, expectations
from lab.postgres import JDBC_JAR, PostgresServer, start_server
from lab.proxy import HMS_COMMIT, JDBC_COMMIT, CommitCutProxy, CommitMatcher
from lab.torture_judging import MODELS
from lab.torture_workers import CATALOG, PROJECT_DIR

REPO = Path(__file__).resolve().parent.parent
# (proxy mode, statements cut): every mode on one worker, then on the next.
FAULT_MODES = (("after_commit", 1), ("before_commit", 1), ("after_commit", 2), ("before_commit", 2))
# Crash kinds in the order the load cycles through them.
CRASH_ORDER = ("kill_maintenance_mid_rewrite", "kill_writer_mid_merge", "kill_maintenance_between_group_commits")
ORPHAN_AGE_HOURS = 100.0  # older than the policy's 72 h window
CATALOGS = ("jdbc", "hive_metastore")
# The Hive Metastore's table lock outlives a worker killed (kill -9) inside its commit until the
# metastore times the lock out: 300 s by default (hive.txn.timeout), longer than a quick run's
# load, so every other writer's commit on that table would wait for it. 30 s instead, checked every
# 10 s by the metastore's housekeeping service (AcidHouseKeeperService: it starts only with the
# compactor initiator on and a transaction manager that supports ACID; its compactor threads find
# no work). Iceberg's wait for the lock (iceberg.hive.lock-timeout-ms, 3 minutes by default) is
# longer: a waiting writer gets the lock, not a timeout. A live writer heartbeats its lock every
# 10 s (lab/torture_project/profiles.yml; 4 minutes by default) so that it is never timed out.
METASTORE_SETTINGS = {"hive.txn.timeout": "30s", "hive.compactor.initiator.on": "true",
                      "hive.support.concurrency": "true",
                      "hive.txn.manager": "org.apache.hadoop.hive.ql.lockmgr.DbTxnManager",
                      "hive.timedout.txn.reaper.start": "5s", "hive.timedout.txn.reaper.interval": "10s"}


class TortureError(IcebergMaintError):
    """A component did not start, or a phase missed its deadline."""


@dataclass(frozen=True)
class Settings:
    load_seconds: float
    dbt_writer_groups: tuple[tuple[str, ...], ...]
    crash_every_s: float  # a crash (alternating kinds) this often during the load
    fault_every_s: float  # a catalog cut (alternating workers and modes) this often
    quick: bool = False
    driver_memory: str = "512m"
    required_crashes: tuple[str, ...] = ("kill_maintenance_mid_rewrite", "kill_writer_mid_merge")


def quick_settings() -> Settings:
    # The required kills after the load, the writer's first: the quick load is about as long as
    # the maintenance's first invocation (its JVM start), so often neither kill came in it; the
    # writer can be killed at once, and its restart (a JVM, a parse) then overlaps the wait for
    # the maintenance's next rewrite CALL instead of following it. The load itself is unchanged
    # (a kill in it would cost the writer's commits that the catalog cuts wait for).
    return Settings(load_seconds=75, dbt_writer_groups=(MODELS,), crash_every_s=25, fault_every_s=12, quick=True,
                    required_crashes=("kill_writer_mid_merge", "kill_maintenance_mid_rewrite"))


def full_settings(minutes: float) -> Settings:
    return Settings(load_seconds=minutes * 60, dbt_writer_groups=tuple((m,) for m in MODELS), crash_every_s=150,
                    fault_every_s=40, required_crashes=("kill_maintenance_mid_rewrite", "kill_writer_mid_merge",
                                                        "kill_maintenance_between_group_commits"))


def wait_for(condition: Callable[[], Any], timeout_s: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise TortureError(f"timed out after {timeout_s:.0f} s waiting for {what}")


@dataclass
class Proc:
    name: str
    role: str
    started: processes.Started
    proxy: CommitCutProxy
    args: tuple[str, ...]  # the role's arguments: a restart passes them again
    at: float = field(default_factory=time.time)

    @property
    def popen(self) -> subprocess.Popen[bytes]:
        return self.started.process

    @property
    def log(self) -> Path:
        return self.started.log

    def alive(self) -> bool:
        return self.started.alive()

    def kill9(self) -> None:
        processes.kill(self.popen)

    def stop(self, grace_s: float = 20) -> None:
        try:  # the group too: a JVM whose Python parent already exited
            processes.stop(self.popen, grace_s)
        finally:
            self.proxy.stop()


@dataclass
class Run:
    settings: Settings
    workdir: Path
    pg: PostgresServer
    metastore: HiveMetastore | None = None  # the Hive catalog's; None: the JDBC catalog
    procs: dict[str, Proc] = field(default_factory=dict)
    retired: list[Proc] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    crashes: list[dict[str, Any]] = field(default_factory=list)
    unexpected_exits: list[dict[str, Any]] = field(default_factory=list)
    data_dirs: dict[str, Path] = field(default_factory=dict)  # per model, its table's data folder

    # ---- components ------------------------------------------------------------------
    @property
    def warehouse(self) -> Path:
        return self.workdir / "warehouse"

    @property
    def catalog_kind(self) -> str:
        return "jdbc" if self.metastore is None else "hive_metastore"

    @property
    def lab_catalog(self) -> LabCatalog:
        """The catalog as the audit reads it: its server itself, no proxy between."""
        if self.metastore is None:
            return JdbcCatalog(self.pg, self.warehouse)
        return MetastoreCatalog(self.metastore, self.warehouse)

    @property
    def wire(self) -> tuple[int, CommitMatcher]:
        """The port of the server a worker's proxy relays to, and how a commit shows on that wire."""
        return (self.pg.port, JDBC_COMMIT) if self.metastore is None else (self.metastore.port, HMS_COMMIT)

    def worker_catalog_uri(self, proxy_port: int) -> str:
        """The catalog's URI as a worker reaches it: the same server's, through its proxy's port."""
        if self.metastore is None:
            # The proxy recognises the commit statement's SQL text (lab/proxy.py).
            uri = replace(self.pg, port=proxy_port).spark_catalog_properties(str(self.warehouse))["uri"]
            return f"{uri}?prepareThreshold=0"
        return replace(self.metastore, port=proxy_port).spark_catalog_properties(str(self.warehouse))["uri"]

    def env(self, name: str, proxy_port: int) -> dict[str, str]:
        from dbt_iceberg_maint.runtime.spark import resolve_iceberg_runtime

        jars = [*resolve_iceberg_runtime().jars, str(JDBC_JAR)]
        logs = self.workdir / "dbt" / name
        return {**os.environ, "PYTHONPATH": str(REPO), "TORTURE_WAREHOUSE": str(self.warehouse),
                "TORTURE_JARS": ",".join(jars), "TORTURE_DRIVER_MEMORY": self.settings.driver_memory,
                "TORTURE_CATALOG_TYPE": self.lab_catalog.properties()["type"],
                "TORTURE_CATALOG_URI": self.worker_catalog_uri(proxy_port),
                "DBT_TARGET_PATH": str(logs / "target"), "DBT_LOG_PATH": str(logs / "logs"),
                "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "PYTHONUNBUFFERED": "1",
                # The maintenance processes are one job, restarted after each crash: it re-enters
                # the table lease a killed process left (another job waits for its TTL).
                **({RUN_ID_ENV: f"torture-maintenance-{self.workdir.name}"} if name.startswith("maintenance")
                   else {})}

    def start(self, name: str, role: str, *args: str) -> Proc:
        upstream, matcher = self.wire
        proxy = CommitCutProxy(upstream, matcher=matcher).start()
        log = self.workdir / f"{name}.{int(time.time() * 1000)}.log"
        started = processes.start([sys.executable, "-m", "lab.torture_workers", role, "--workdir", str(self.workdir),
                                   "--name", name, *args], log, env=self.env(name, proxy.port), cwd=REPO)
        proc = Proc(name, role, started, proxy, args)
        previous = self.procs.get(name)
        if previous is not None:
            self.retired.append(previous)
        self.procs[name] = proc
        return proc

    def state(self, name: str) -> dict[str, Any]:
        try:
            return dict(json.loads((self.workdir / f"{name}.state").read_text()))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def events(self) -> list[dict[str, Any]]:
        path = self.workdir / "events.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]

    def catalog(self) -> Any:
        return self.lab_catalog.metadata(CATALOG)

    def table(self, model: str) -> Any:
        return self.catalog().load(f"torture.{model}")

    def data_dir(self, model: str) -> Path:
        """The table's data folder, read from its metadata once (each catalog lays tables out its
        own way: `<warehouse>/torture/<model>` on JDBC, `<warehouse>/torture.db/<model>` on Hive)."""
        if model not in self.data_dirs:
            self.data_dirs[model] = audit.local_path(self.table(model).metadata.location) / "data"
        return self.data_dirs[model]

    def restart_dead(self) -> None:
        """A worker that died on its own (not killed by us) is recorded and started again, so one
        crash of a JVM does not end a 30-minute run; the test asserts there were none."""
        for name, proc in list(self.procs.items()):
            if proc.role in ("long-writer",) or name == "maintenance_final" or proc.alive():
                continue
            self.unexpected_exits.append({"worker": name, "exit_code": proc.popen.returncode, "at": time.time(),
                                          "log_tail": proc.log.read_text(errors="replace")[-2000:]})
            self.start(name, proc.role, *proc.args)

    def invocations_since_start(self, name: str = "maintenance") -> int:
        """Maintenance invocations the current `name` process completed (one event per `maintain`)."""
        started = self.procs[name].at
        return sum(1 for e in self.events() if e["worker"] == name and e["kind"] == "maintenance"
                   and e["at"] >= started)

    def committed_since(self, worker: str, since: float) -> bool:
        return any(e["kind"] == "batch" and e["worker"] == worker and e["at"] > since
                   and any(o.get("event") == "committed" for o in e.get("outcomes", {}).values())
                   for e in self.events())

    # ---- crashes -----------------------------------------------------------------------
    def _new_files(self, model: str, since: float, partition: str | None = None) -> list[str]:
        root = self.data_dir(model)
        if partition:
            root = root / partition
        found = []
        for folder, _dirs, files in os.walk(root):
            for file in files:
                path = os.path.join(folder, file)
                try:
                    if file.endswith(".parquet") and os.stat(path).st_mtime >= since:
                        found.append(path)
                except FileNotFoundError:
                    continue
        return found

    def _replace_since(self, since: float, model: str) -> list[int]:
        """Snapshot ids of the compaction commits (`replace`) on `model` since `since`."""
        table = self.table(model)
        return [snapshot.snapshot_id for snapshot in table.metadata.snapshots
                if snapshot.summary is not None and snapshot.summary.operation.value == "replace"
                and snapshot.timestamp_ms >= since * 1000]

    def crash_maintenance(self, between_group_commits: bool) -> dict[str, Any]:
        """kill -9 while a rewrite_data_files CALL runs: as soon as it starts (mid_rewrite) or
        right after its first partial-progress group commit (between_group_commits). The
        maintenance job's "i of N <table> rewrite_data_files" line says a CALL started; its
        result line (ICEBERG_MAINT_RESULT ... rewrite_data_files) says it finished."""
        kind = "between_group_commits" if between_group_commits else "mid_rewrite"
        # A kill only once the job completed an invocation since it was last (re)started: on a
        # loaded machine one invocation can outlast the crash interval, and a loop that is always
        # killed first never shows that it carries on after a crash.
        completed = wait_for(self.invocations_since_start, 900, "a completed maintenance invocation before the kill")
        proc = self.procs["maintenance"]
        seen = proc.log.stat().st_size if proc.log.exists() else 0
        evidence: dict[str, Any] = {}

        first_seen: dict[int, float] = {}

        def running_rewrite() -> bool:
            text = proc.log.read_text(errors="replace")[seen:]
            starts = list(re.finditer(r"\d+ of \d+ torture\.(\w+) rewrite_data_files", text))
            if not starts or '"operation": "rewrite_data_files"' in text[starts[-1].end():]:
                return False  # no CALL yet, or it already finished: wait for the next one
            last = starts[-1]
            if not between_group_commits:
                # Half a second in: past planning, reading and writing files.
                first_seen.setdefault(last.start(), time.monotonic())
                evidence.update(table=last.group(1))
                return time.monotonic() - first_seen[last.start()] >= 0.5
            commits = self._replace_since(self.state("maintenance").get("at", time.time()), last.group(1))
            evidence.update(table=last.group(1), group_commits=commits)
            return bool(commits)

        wait_for(lambda: not proc.alive() or running_rewrite(), 420, f"a rewrite_data_files CALL ({kind})", 0.1)
        proc.kill9()
        text = proc.log.read_text(errors="replace")[seen:]
        starts = list(re.finditer(r"\d+ of \d+ torture\.(\w+) rewrite_data_files", text))
        record = {"kind": f"kill_maintenance_{kind}", "at": time.time(), **evidence,
                  "invocations_completed_since_restart": max(completed, self.invocations_since_start()),
                  "call_finished_before_kill": not starts
                  or '"operation": "rewrite_data_files"' in text[starts[-1].end():]}
        self.start("maintenance", "maintenance")
        return record

    def crash_writer(self) -> dict[str, Any]:
        """kill -9 the dbt writer of t_merge as soon as its MERGE's first new data file is in the
        batch's partition: past planning, not committed. Only a run seen from its start counts."""
        name = "dbt_" + "_".join(self.settings.dbt_writer_groups[0])
        proc = self.procs[name]
        called = time.time()

        def merge_file_written() -> dict[str, Any] | None:
            state = self.state(name)
            if state.get("phase") != "run" or float(state["at"]) < called:
                return None
            batch = int(state["batch"])
            files = self._new_files("t_merge", float(state["at"]), f"part={batch // 5}")
            return {"batch": batch, "started": float(state["at"]), "files": files} if files else None

        found = wait_for(merge_file_written, 420, f"{name}'s MERGE writing a data file", 0.05)
        proc.kill9()
        record = {"kind": "kill_writer_mid_merge", "at": time.time(), "batch": found["batch"],
                  "merge_files_written": len(found["files"]),
                  "seconds_into_run": round(time.time() - found["started"], 2)}
        self.start(name, proc.role, *proc.args)
        return record

    # ---- faults ------------------------------------------------------------------------
    def inject_fault(self, target: str, mode: str, times: int, timeout_s: float) -> dict[str, Any]:
        """Cut the target's next commit request; with times=2 also the client's retry of it on a
        new connection (Iceberg's JdbcClientPool retries a statement once after a connection error,
        the Hive Metastore client's RetryingMetaStoreClient a call once, hive.metastore.failure.retries),
        so the failure reaches Iceberg's commit path instead of being absorbed."""
        proxy = self.procs[target].proxy
        before = len(proxy.cuts)
        proxy.arm(mode, times)
        armed = time.time()
        cuts = proxy.wait_for_cuts(before + 1, timeout_s)
        if len(cuts) > before and times > 1:
            cuts = proxy.wait_for_cuts(before + times, 20)
        pending = proxy.disarm()
        made = cuts[before:]
        return {"kind": f"catalog_cut_{mode}" + ("_and_retry" if times > 1 else ""), "worker": target,
                "armed_at": armed, "cut_at": made[0].at if made else None, "cuts": len(made),
                "injected": bool(made), "cuts_pending_at_disarm": pending,
                "reply_swallowed": [c.reply_swallowed for c in made],
                "tables_cut": judging.cut_tables([c.statement for c in made])}


def _tables_of(worker: str, settings: Settings) -> tuple[str, ...]:
    if worker == "spark_writer":
        return ("t_merge",)
    if worker.startswith("dbt_"):
        return tuple(m for group in settings.dbt_writer_groups if worker == "dbt_" + "_".join(group) for m in group)
    return MODELS


def run_torture(settings: Settings, workdir: Path, log: Callable[[str], None] = print,
                catalog: str = "jdbc") -> dict[str, Any]:
    """The whole run on `catalog` (one of CATALOGS); returns torture.json's document. Raises
    TortureError when a component or a phase fails outright (the document then is not written)."""
    if catalog not in CATALOGS:
        raise TortureError(f"catalog is {catalog!r}; expected one of {', '.join(CATALOGS)}")
    began = time.time()
    workdir.mkdir(parents=True, exist_ok=True)
    # SIGTERM (a test timeout, a user's kill) must still run the `finally` below that stops
    # every worker, the metastore and PostgreSQL.
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_on_sigterm) if main_thread else None
    pg = start_server()
    run = Run(settings, workdir, pg)
    try:
        if catalog == "hive_metastore":
            run.metastore = start_metastore(pg, workdir / "metastore", settings=METASTORE_SETTINGS)
        return _scenario(run, log, began)
    finally:
        for proc in [*run.procs.values(), *run.retired]:
            try:
                proc.stop()
            except BaseException as exc:  # noqa: BLE001 - stop every other worker all the same
                log(f"could not stop {proc.name} ({proc.popen.pid}): {exc!r}")
        if run.metastore is not None:
            run.metastore.stop()
        pg.stop()
        shutil.rmtree(pg.data_dir.parent, ignore_errors=True)
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


class TortureStopped(BaseException):
    """SIGTERM: not an Exception, so no phase mistakes it for a trigger that never came."""


def _raise_on_sigterm(signum: int, frame: object) -> None:
    raise TortureStopped("stopped by SIGTERM")


def _scenario(run: Run, log: Callable[[str], None], began: float) -> dict[str, Any]:
    """The timeline: prepare, start the writers, load with crashes and cuts, let every hit writer
    carry on, stop the workers, the quiesced checks (orphans, an in-flight writer, the next
    maintenance), then the audit and the judgement of every fault."""
    ledger = _prepare(run)
    writers = _start_load(run, ledger, log)
    load = _load_with_faults(run, writers, log)
    _await_aftermath(run, writers)
    load_seconds = time.time() - load.started
    _stop_workers(run, log)
    events = run.events()
    quiet = _quiesced(run, log)
    return _audit(run, ledger, writers, load, load_seconds, events, quiet, began)


# Runs side by side (tests/lab/test_torture.py, one per catalog) install the one project's packages.
_DEPS_LOCK = threading.Lock()


def _prepare(run: Run) -> Ledger:
    run.warehouse.mkdir()
    with _DEPS_LOCK:
        deps = subprocess.run([str(Path(sys.executable).parent / "dbt"), "deps", "--project-dir", str(PROJECT_DIR),
                               "--profiles-dir", str(PROJECT_DIR)], env=run.env("deps", run.wire[0]),
                              capture_output=True, text=True)
    if deps.returncode != 0:
        raise TortureError(f"dbt deps failed: {deps.stdout[-2000:]}{deps.stderr[-2000:]}")
    return Ledger(run.workdir / "ledger.jsonl")


def _start_load(run: Run, ledger: Ledger, log: Callable[[str], None]) -> list[str]:
    """The dbt writers, and once every model has a committed batch, the plain Spark writer and the
    maintenance loop; the writers' names."""
    writers = []
    for group in run.settings.dbt_writer_groups:
        name = "dbt_" + "_".join(group)
        writers.append(name)
        run.start(name, "dbt-writer", *[a for m in group for a in ("--model", m)])
    log(f"started {len(writers)} dbt writer process(es); waiting for the first commits")
    wait_for(lambda: {e.table for e in ledger.entries() if e.event == "committed"} >= set(MODELS), 600,
             "the first committed batch of every model")
    run.start("spark_writer", "spark-writer", "--table", "t_merge")
    run.start("maintenance", "maintenance")
    writers.append("spark_writer")
    return writers


@dataclass(frozen=True)
class LoadPhase:
    started: float
    missed: list[dict[str, Any]]  # crashes whose trigger never came
    deferred_s: float  # the longest a maintenance kill waited for a completed invocation


def _crash(run: Run, kind: str, missed: list[dict[str, Any]], log: Callable[[str], None]) -> None:
    crashes: dict[str, Callable[[], dict[str, Any]]] = {
        "kill_maintenance_mid_rewrite": lambda: run.crash_maintenance(between_group_commits=False),
        "kill_writer_mid_merge": run.crash_writer,
        "kill_maintenance_between_group_commits": lambda: run.crash_maintenance(between_group_commits=True),
    }
    try:
        run.crashes.append(crashes[kind]())
        log(f"crash: {kind}")
    except TortureError as exc:  # the trigger never came: say so, keep the load going
        missed.append({"kind": kind, "why": str(exc)})
        log(f"crash {kind} not injected: {exc}")


def _load_with_faults(run: Run, writers: Sequence[str], log: Callable[[str], None]) -> LoadPhase:
    """The load: crashes (alternating kinds) and catalog cuts (alternating workers and modes) on
    their schedules, dead workers restarted; then every crash kind the settings require."""
    settings = run.settings
    started = time.time()
    log(f"load running for {settings.load_seconds:.0f} s")
    next_crash = started + settings.crash_every_s
    next_fault = started + settings.fault_every_s / 2
    missed: list[dict[str, Any]] = []
    fault_targets = [*writers, "maintenance"]
    deferred_s = 0.0
    while time.time() - started < settings.load_seconds:
        run.restart_dead()
        now = time.time()
        kind = CRASH_ORDER[(len(run.crashes) + len(missed)) % len(CRASH_ORDER)]
        # A maintenance kill waits until the job completed an invocation since its last restart.
        ready = not kind.startswith("kill_maintenance") or run.invocations_since_start() > 0
        if now >= next_crash and not ready:
            deferred_s = max(deferred_s, now - next_crash)
        if now >= next_crash and ready:
            _crash(run, kind, missed, log)
            next_crash = time.time() + settings.crash_every_s
        elif now >= next_fault:
            # Every mode on the first writer first (the quick run's few cuts), then the next worker.
            mode, times = FAULT_MODES[len(run.faults) % len(FAULT_MODES)]
            target = fault_targets[(len(run.faults) // len(FAULT_MODES)) % len(fault_targets)]
            fault = run.inject_fault(target, mode, times, timeout_s=90)
            run.faults.append(fault)
            log(f"fault: {fault['kind']} on {target}: {'cut' if fault['injected'] else 'no commit in time'}")
            next_fault = time.time() + settings.fault_every_s
        time.sleep(0.5)
    # However short the load, every crash kind the settings require happens once.
    for kind in settings.required_crashes:
        if kind not in {c["kind"] for c in run.crashes}:
            _crash(run, kind, missed, log)
    return LoadPhase(started, missed, deferred_s)


def _await_aftermath(run: Run, writers: Sequence[str]) -> None:
    """Before the stop: every writer a crash or cut hit commits once more, so that each fault's
    aftermath (the process carried on) is seen, also for a fault at the load's very end."""
    for worker in writers:
        hit = [float(r.get("cut_at") or r["at"]) for r in [*run.crashes, *run.faults]
               if (r.get("worker") or (writers[0] if r["kind"] == "kill_writer_mid_merge" else None)) == worker
               and (r.get("injected", True))]
        if hit:
            wait_for(functools.partial(run.committed_since, worker, max(hit)), 600,
                     f"{worker}'s first committed batch after its last fault", 1.0)


def _stop_workers(run: Run, log: Callable[[str], None]) -> None:
    """The stop file: writers finish their batch; the maintenance job gets 90 s to finish its
    phase, then it is killed like in a crash (its leftovers are orphans for the audit)."""
    (run.workdir / "stop").touch()
    log("load over; stopping the workers between batches")
    for proc in run.procs.values():
        grace = 90 if proc.role == "maintenance" else 600
        try:
            proc.popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            if proc.role == "maintenance":
                step = judging.last_operation(proc.log.read_text(errors="replace")) if proc.log.exists() \
                    else None
                run.crashes.append({"kind": "kill_maintenance_at_load_end", "at": time.time(),
                                    **({"table": step[0], "operation": step[1]} if step else {})})
            else:
                run.unexpected_exits.append({"worker": proc.name, "exit_code": None, "at": time.time(),
                                             "log_tail": f"did not stop within {grace} s of the stop file; killed"})
            proc.kill9()
    (run.workdir / "stop").unlink()


@dataclass(frozen=True)
class QuiescedPhase:
    crash_orphans: dict[str, dict[str, float]]  # per model, the files the crashes left unreferenced
    aged: int
    aged_left: list[str]  # aged orphans remove_orphan_files did not remove
    young_kept: bool
    in_flight: list[str]  # the long writer's uncommitted data files
    in_flight_kept: bool
    final_ok: bool  # the next maintenance invocation completed
    long_ok: bool  # the long writer committed after it


def _quiesced(run: Run, log: Callable[[str], None]) -> QuiescedPhase:
    """Workers stopped: the crashes' orphans aged past the window, a young orphan planted and a
    long writer in flight; the next maintenance must remove the first and keep the others."""
    before = {m: audit.audit_references(m, run.table(m)) for m in MODELS}
    crash_orphans = {m: audit.orphans(run.table(m), before[m]) for m in MODELS}
    long_batch = 900_000
    long_started = time.time()
    long_proc = run.start("long_writer", "long-writer", "--table", "t_append", "--batch", str(long_batch))
    # The next maintenance's JVM starts beside the long writer's; its invocation waits for `go`.
    go = run.workdir / "maintenance_final.go"
    final = run.start("maintenance_final", "maintenance", "--once", "--after", str(go))
    in_flight = wait_for(lambda: run._new_files("t_append", long_started), 300, "the long writer's first data file")
    aged = audit.age_files([p for files in crash_orphans.values() for p in files], ORPHAN_AGE_HOURS)
    # A young orphan (written now, referenced by nothing): the window must keep it.
    source = next(p for p in sorted(before["t_merge"].referenced) if p.endswith(".parquet"))
    young_path = Path(source).with_name(f"torture-young-{int(time.time())}.parquet")
    shutil.copyfile(source, young_path)
    log(f"{aged} orphan file(s) aged by {ORPHAN_AGE_HOURS} h; one young orphan planted; long writer in flight")
    go.touch()
    final.popen.wait(timeout=900)
    aged_left = [p for files in crash_orphans.values() for p in files if os.path.exists(p)]
    in_flight_kept = all(os.path.exists(p) for p in in_flight)
    young_kept = young_path.exists()
    young_path.unlink(missing_ok=True)
    (run.workdir / "long_writer.gate").touch()
    long_proc.popen.wait(timeout=300)
    return QuiescedPhase(crash_orphans, aged, aged_left, young_kept, in_flight, in_flight_kept,
                         final.popen.returncode == 0, long_proc.popen.returncode == 0)


def _observe_cuts(run: Run, all_events: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Each cut's outcome (what its worker reported next, what its JVM logged), counted per line."""
    observations: dict[str, dict[str, int]] = {}
    for fault in run.faults:
        if fault["injected"]:
            fault["outcome"] = judging.fault_outcome(fault, all_events)
            after = [e["at"] for e in all_events if e["worker"] == fault["worker"] and e["at"] >= fault["cut_at"]]
            logs = "\n".join(path.read_text(errors="replace")
                             for path in sorted(run.workdir.glob(f"{fault['worker']}.*.log")))
            ended = after[0] if after else time.time()
            fault["outcome"]["jvm_logged"] = judging.jvm_exceptions(logs, fault["cut_at"], ended)
            role = "maintenance" if fault["worker"].startswith("maintenance") else (
                "spark writer" if fault["worker"] == "spark_writer" else "dbt writer")
            slot = observations.setdefault(f"{fault['kind']} on the {role}", {})
            line = judging.describe_outcome(fault["outcome"])
            slot[line] = slot.get(line, 0) + 1
    return observations


def _judge_faults(run: Run, checks: Sequence[TableCheck], references: Mapping[str, audit.ReferenceAudit],
                  quiet: QuiescedPhase, all_events: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Every crash and injected cut judged on its own evidence; per kind, injected and survived."""
    by_table = {c.table: c for c in checks}
    missing_by_table = {m: len(r.missing) for m, r in references.items()}
    orphans_left = {m: sum(1 for p in files if p in quiet.aged_left) for m, files in quiet.crash_orphans.items()}
    writer_killed = "dbt_" + "_".join(run.settings.dbt_writer_groups[0])
    faults: dict[str, dict[str, int]] = {}
    for record in [*run.crashes, *[f for f in run.faults if f["injected"]]]:
        worker = record.get("worker") or (writer_killed if record["kind"] == "kill_writer_mid_merge"
                                          else "maintenance")
        scope = judging.fault_scope(record, worker, _tables_of(worker, run.settings))
        survived, why = judging.fault_survived(record, scope, by_table, missing_by_table, all_events, worker,
                                               orphans_left)
        record["survived"], record["survived_why"], record["evidence"] = survived, why, scope.to_dict()
        slot = faults.setdefault(record["kind"], {"injected": 0, "survived": 0})
        slot["injected"] += 1
        slot["survived"] += int(survived)
    return faults


def _audit(run: Run, ledger: Ledger, writers: list[str], load: LoadPhase, load_seconds: float,
           events: Sequence[Mapping[str, Any]], quiet: QuiescedPhase, began: float) -> dict[str, Any]:
    """The tables against the ledger and their file references, every fault judged: torture.json."""
    entries = ledger.entries()
    checks: list[TableCheck] = []
    references = {}
    for model in MODELS:
        table = run.table(model)
        references[model] = audit.audit_references(model, table)
        checks.append(check(model, expectations(entries, model), audit.observed_batches(table)))
    missing = sum(len(r.missing) for r in references.values())
    all_events = run.events()
    observations = _observe_cuts(run, all_events)
    ledger_ok = all(c.ok for c in checks)
    faults = _judge_faults(run, checks, references, quiet, all_events)
    # The loop's completed invocations (the one after the load is reported apart), and per
    # operation how its runs ended.
    loop_events = [e for e in all_events if e["kind"] == "maintenance" and e["worker"] == "maintenance"]
    return {
        "ok": ledger_ok and missing == 0 and quiet.final_ok and quiet.long_ok,
        "catalog": run.catalog_kind,
        "rows_lost": sum(c.rows_lost for c in checks),
        "rows_duplicated": sum(c.rows_duplicated for c in checks),
        "referenced_files_deleted": missing,
        "ledger_ok": ledger_ok,
        "faults": faults,
        "duration_s": round(time.time() - began, 1),
        "load": {"seconds": round(load_seconds, 1), "writer_processes": len(writers), "writers": writers,
                 "models": list(MODELS), "commits": sum(1 for e in entries if e.event == "committed"),
                 "batches_attempted": sum(1 for e in events if e["kind"] == "batch"),
                 "maintenance_invocations": len(loop_events),
                 "maintenance_invocations_ok": sum(1 for e in loop_events if e.get("exit_code") == 0),
                 "maintenance_operations": judging.operation_counts(loop_events),
                 "maintenance_kills_deferred_max_s": round(load.deferred_s, 1)},
        "tables": [c.to_dict() for c in checks],
        "snapshots_remaining": {m: r.snapshots for m, r in references.items()},
        "orphans": {"left_by_crashes": sum(len(f) for f in quiet.crash_orphans.values()), "aged": quiet.aged,
                    "aged_left_after_remove_orphan_files": len(quiet.aged_left), "young_orphan_kept": quiet.young_kept},
        "in_flight_writer": {"files_before_remove_orphan_files": len(quiet.in_flight),
                             "files_kept": quiet.in_flight_kept, "committed_after": quiet.long_ok},
        "next_maintenance_completed": quiet.final_ok,
        "next_maintenance_operations": judging.operation_counts(
            [e for e in all_events if e["worker"] == "maintenance_final"]),
        "crashes": run.crashes,
        "crashes_not_injected": load.missed,
        "unexpected_exits": run.unexpected_exits,
        "catalog_fault_observations": observations,
        "catalog_faults": [f for f in run.faults],
        "settings": asdict(run.settings),
    }
