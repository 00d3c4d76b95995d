"""The torture run (issue 14): load, crashes and catalog faults on a PostgreSQL JDBC catalog, then
the orphan-safety audit and the ledger check. Used by `./scripts/torture` (benchmarks/torture.py)
and, in its quick form, by tests/lab/test_torture.py.

Every component is started here and stopped in `finally`: PostgreSQL (lab/postgres.py), one
commit-cut proxy per worker process (lab/proxy.py), and the worker processes
(lab/torture_workers.py: dbt writers through `dbt-iceberg-maint run`, a plain Spark writer, the
maintenance loop through `dbt-iceberg-maint maintain`, an in-flight long writer). Each worker runs
in its own process group, so `kill -9` of a worker takes its JVM with it.

This module is long (over 300 lines) because the scenario is one timeline: splitting it would
scatter the state every phase reads.
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dbt_iceberg_maint import processes
from dbt_iceberg_maint.errors import IcebergMaintError
from dbt_iceberg_maint.metadata.catalog import CatalogConfig, open_catalog
from lab import audit
from lab.ledger import Ledger, TableCheck, check, expectations
from lab.postgres import JDBC_JAR, PostgresServer, start_server
from lab.proxy import CommitCutProxy
from lab.torture_workers import CATALOG, PROJECT_DIR

REPO = Path(__file__).resolve().parent.parent
MODELS = ("t_merge", "t_overwrite", "t_append")
# (proxy mode, statements cut): every mode on one worker, then on the next.
FAULT_MODES = (("after_commit", 1), ("before_commit", 1), ("after_commit", 2), ("before_commit", 2))
ORPHAN_AGE_HOURS = 100.0  # older than the policy's 72 h window
EXCEPTION_NAMES = ("CommitStateUnknownException", "CommitFailedException", "UncheckedSQLException",
                   "ValidationException", "AlreadyExistsException", "PSQLException", "NotFoundException")


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
    return Settings(load_seconds=75, dbt_writer_groups=(MODELS,), crash_every_s=25, fault_every_s=12, quick=True)


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
    procs: dict[str, Proc] = field(default_factory=dict)
    retired: list[Proc] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    crashes: list[dict[str, Any]] = field(default_factory=list)
    unexpected_exits: list[dict[str, Any]] = field(default_factory=list)

    # ---- components ------------------------------------------------------------------
    @property
    def warehouse(self) -> Path:
        return self.workdir / "warehouse"

    def env(self, name: str, proxy_port: int) -> dict[str, str]:
        from dbt_iceberg_maint.spark import resolve_iceberg_runtime

        jars = [*resolve_iceberg_runtime().jars, str(JDBC_JAR)]
        logs = self.workdir / "dbt" / name
        return {**os.environ, "PYTHONPATH": str(REPO), "TORTURE_WAREHOUSE": str(self.warehouse),
                "TORTURE_JARS": ",".join(jars), "TORTURE_DRIVER_MEMORY": self.settings.driver_memory,
                "TORTURE_JDBC_URI": f"jdbc:postgresql://127.0.0.1:{proxy_port}/{self.pg.database}?prepareThreshold=0",
                "DBT_TARGET_PATH": str(logs / "target"), "DBT_LOG_PATH": str(logs / "logs"),
                "DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "PYTHONUNBUFFERED": "1"}

    def start(self, name: str, role: str, *args: str) -> Proc:
        proxy = CommitCutProxy(self.pg.port).start()
        log = self.workdir / f"{name}.{int(time.time() * 1000)}.log"
        started = processes.start([sys.executable, "-m", "lab.torture_workers", role, "--workdir", str(self.workdir),
                                   "--name", name, *args], log, env=self.env(name, proxy.port), cwd=REPO)
        proc = Proc(name, role, started, proxy)
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
        return open_catalog(CatalogConfig(CATALOG, self.pg.spark_catalog_properties(str(self.warehouse))))

    def table(self, model: str) -> Any:
        return self.catalog().load(f"torture.{model}")

    def restart_dead(self) -> None:
        """A worker that died on its own (not killed by us) is recorded and started again, so one
        crash of a JVM does not end a 30-minute run; the test asserts there were none."""
        for name, proc in list(self.procs.items()):
            if proc.role in ("long-writer",) or name == "maintenance_final" or proc.alive():
                continue
            self.unexpected_exits.append({"worker": name, "exit_code": proc.popen.returncode, "at": time.time(),
                                          "log_tail": proc.log.read_text(errors="replace")[-2000:]})
            args = [a for m in next((g for g in self.settings.dbt_writer_groups if name == "dbt_" + "_".join(g)), ())
                    for a in ("--model", m)]
            if proc.role == "spark-writer":
                args = ["--table", "t_merge"]
            self.start(name, proc.role, *args)

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
        root = self.warehouse / "torture" / model / "data"
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
        self.start(name, "dbt-writer", *[a for m in self.settings.dbt_writer_groups[0] for a in ("--model", m)])
        return record

    # ---- faults ------------------------------------------------------------------------
    def inject_fault(self, target: str, mode: str, times: int, timeout_s: float) -> dict[str, Any]:
        """Cut the target's next commit statement; with times=2 also the JDBC pool's retry of it on
        a new connection (Iceberg's JdbcClientPool retries a statement once after a connection
        error), so the failure reaches Iceberg's commit path instead of being absorbed."""
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
                "tables_cut": cut_tables([c.statement for c in made])}


def _exception_names(text: str) -> list[str]:
    return [name for name in EXCEPTION_NAMES if name in text]


def fault_outcome(fault: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the worker reported for the write the cut hit: its first event after the cut."""
    after = [e for e in events if e["worker"] == fault["worker"] and e["at"] >= fault["cut_at"]]
    if not after:
        return {"observed": "no event after the cut (run ended)"}
    event = after[0]
    if event["kind"] == "maintenance":
        failed = [r for r in event["results"] if r.get("status") == "failed"]
        return {"observed": "maintenance", "exit_code": event["exit_code"],
                "failed_operations": [(r["table"], r["operation"], (r.get("reason") or "")[:300]) for r in failed],
                "exceptions": sorted({n for r in failed for n in _exception_names(r.get("reason") or "")})}
    outcomes = event.get("outcomes", {})
    texts = " ".join(json.dumps(o) for o in outcomes.values())
    return {"observed": "batch", "batch": event.get("batch"),
            "events": {t: o.get("event") for t, o in outcomes.items()},
            "attempts": {t: o.get("attempts") for t, o in outcomes.items()},
            "kinds": {t: o.get("kinds") or [f.get("kind") for f in o.get("failures", [])] for t, o in outcomes.items()},
            "write_landed": {t: o.get("write_landed") for t, o in outcomes.items() if "write_landed" in o},
            "exceptions": sorted(set(_exception_names(texts)))}


_LOG4J_TIME = re.compile(r"^(\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}) ")
_JVM_EXCEPTION = re.compile(r"(?:org\.apache\.iceberg\.exceptions|org\.postgresql\.util)\.(\w+)(?::|$)")


def jvm_exceptions(log_text: str, start: float, end: float) -> dict[str, int]:
    """Iceberg/PostgreSQL exception classes a worker's JVM logged (stack traces included, e.g.
    Iceberg's own `Retrying task after failure`) between `start` and `end` (epoch seconds; the
    log4j time stamps are the machine's local time, second resolution)."""
    found: dict[str, int] = {}
    stamp: float | None = None
    for line in log_text.splitlines():
        match = _LOG4J_TIME.match(line)
        if match:
            stamp = time.mktime(time.strptime(match.group(1), "%y/%m/%d %H:%M:%S"))
        exception = _JVM_EXCEPTION.search(line)
        if exception and stamp is not None and start - 1 <= stamp <= end + 1:
            found[exception.group(1)] = found.get(exception.group(1), 0) + 1
    return found


def describe_outcome(outcome: Mapping[str, Any]) -> str:
    """One line per cut for the summary: what the writer or maintenance job saw."""
    if outcome.get("observed") == "maintenance":
        if not outcome["failed_operations"]:
            return f"maintenance exit {outcome['exit_code']}, no operation failed"
        return f"maintenance operation failed: {', '.join(outcome['exceptions']) or 'no exception named'}"
    if outcome.get("observed") != "batch":
        return str(outcome.get("observed"))
    events = sorted(set(outcome["events"].values()))
    attempts = max((a or 1 for a in outcome["attempts"].values()), default=1)
    kinds = sorted({k for ks in outcome["kinds"].values() for k in (ks or []) if k})
    text = f"batch {'/'.join(events)} after {attempts} attempt(s)"
    if kinds:
        text += f"; failure kinds {', '.join(kinds)}"
    if outcome["exceptions"]:
        text += f"; raised {', '.join(outcome['exceptions'])}"
    landed = {v for v in outcome.get("write_landed", {}).values() if v is not None}
    if landed:
        text += f"; landed verification: {sorted(landed)}"
    logged = outcome.get("jvm_logged") or {}
    if logged:
        text += f"; the JVM logged {', '.join(sorted(logged))}"
    return text if kinds or outcome["exceptions"] else text + ", no error reached the writer"


def cut_tables(statements: Sequence[bytes], models: Sequence[str] = MODELS) -> list[str]:
    """The tables whose commit the cut statements carried (the name is a bound parameter of the
    `UPDATE iceberg_tables ...` the proxy cut, sent in the same write)."""
    text = b"\n".join(statements).decode("latin-1")
    return [m for m in models if re.search(rf"(?<![A-Za-z0-9_]){m}(?![A-Za-z0-9_])", text)]


_OPERATION_LINE = re.compile(r"\d+ of \d+ torture\.(\w+) (\w+)")


def last_operation(log_text: str) -> tuple[str, str] | None:
    """(table, operation) of the last maintenance step a job's log shows starting."""
    starts = _OPERATION_LINE.findall(log_text)
    return (starts[-1][0], starts[-1][1]) if starts else None


@dataclass(frozen=True)
class FaultScope:
    """What one fault can have hurt, from its own record: the tables, and for a writer the batch."""

    tables: tuple[str, ...]
    batch: int | None
    source: str  # where the scope was read from

    def to_dict(self) -> dict[str, Any]:
        return {"tables": list(self.tables), "batch": self.batch, "source": self.source}


def fault_scope(record: Mapping[str, Any], worker: str, worker_tables: Sequence[str]) -> FaultScope:
    """A kill of a writer hits its batch in flight; a cut hits the commit of the table its
    statement names (on a writer: the batch the writer reported next); a kill of the maintenance
    job hits the table its interrupted step was on. Only without such a record does a fault's scope
    widen to every table its process touches (and says so)."""
    kind = str(record["kind"])
    if kind == "kill_writer_mid_merge":
        return FaultScope(tuple(worker_tables), int(record["batch"]), "the batch the writer was killed in")
    if kind.startswith("catalog_cut_"):
        tables = tuple(record.get("tables_cut") or ())
        outcome = record.get("outcome") or {}
        if not worker.startswith("maintenance"):
            batch = outcome.get("batch") if outcome.get("observed") == "batch" else None
            reported = tuple(t for t in (outcome.get("events") or {}) if t in worker_tables)
            return FaultScope(tables or reported or tuple(worker_tables), None if batch is None else int(batch),
                              "the cut statement's table and the batch reported after it" if tables
                              else "the batch reported after the cut")
        if tables:
            return FaultScope(tables, None, "the cut statement's table")
        return FaultScope(tuple(worker_tables), None, "no table in the cut statement: every maintained table")
    if record.get("table"):
        return FaultScope((str(record["table"]),), None, "the step the kill interrupted")
    return FaultScope(tuple(worker_tables), None, "no step seen before the kill: every maintained table")


def fault_survived(record: Mapping[str, Any], scope: FaultScope, checks: Mapping[str, TableCheck],
                   missing: Mapping[str, int], events: Sequence[Mapping[str, Any]], worker: str,
                   orphans_left: Mapping[str, int] | None = None) -> tuple[bool, str]:
    """Whether the system survived one injected fault (pure), on that fault's own evidence:
    - a writer's fault: its batch (`scope.batch`) is in each of the scope's tables exactly as the
      ledger says (committed: once; failed: absent; unknown: absent or once), and those tables
      reference no missing file;
    - a maintenance fault: the scope's tables (the cut or interrupted one) pass the ledger check
      and the reference audit, and for a kill, the orphans it left there were removed once aged;
    - and the process carried on: the writer committed a batch after it, the maintenance job
      completed an invocation (exit 0) after it."""
    at = float(record.get("cut_at") or record["at"])
    problems = []
    writer_fault = not worker.startswith("maintenance")
    if writer_fault and scope.batch is None:
        problems.append("no batch was reported after it, so nothing shows what it did")
    for table in scope.tables:
        table_check = checks.get(table)
        if table_check is None:
            problems.append(f"{table} was not audited")
            continue
        if writer_fault and scope.batch is not None:
            for name in ("lost", "duplicated", "unexpected", "mismatched"):
                if scope.batch in getattr(table_check, name):
                    problems.append(f"{table}: batch {scope.batch} {name}")
        elif not table_check.ok:
            problems.append(f"{table} failed the ledger check: {'; '.join(table_check.details[:3])}")
        if missing.get(table):
            problems.append(f"{table}: {missing[table]} referenced file(s) missing")
        if not writer_fault and str(record["kind"]).startswith("kill_") and (orphans_left or {}).get(table):
            problems.append(f"{table}: {(orphans_left or {})[table]} aged orphan(s) left")
    if problems:
        return False, "; ".join(problems)
    where = f"{', '.join(scope.tables)} ({scope.source})"
    if not writer_fault:
        done = [e for e in events if e["kind"] == "maintenance" and str(e["worker"]).startswith("maintenance")
                and e["at"] > at and e.get("exit_code") == 0]
        return (True, f"{where} intact; a maintenance invocation completed after it") if done else (
            False, "no maintenance invocation completed after it")
    later = [e for e in events if e["kind"] == "batch" and e["worker"] == worker and e["at"] > at
             and any(o.get("event") == "committed" for o in e.get("outcomes", {}).values())]
    return (True, f"batch {scope.batch} as the ledger says in {where}; {worker} committed a batch after it") if later \
        else (False, f"{worker} committed no batch after it")


def operation_counts(events: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per operation, how many of its runs in these maintenance invocations ended in each status."""
    counts: dict[str, dict[str, int]] = {}
    for event in events:
        for result in event.get("results", []):
            slot = counts.setdefault(result["operation"], {})
            slot[result["status"]] = slot.get(result["status"], 0) + 1
    return counts


def _tables_of(worker: str, settings: Settings) -> tuple[str, ...]:
    if worker == "spark_writer":
        return ("t_merge",)
    if worker.startswith("dbt_"):
        return tuple(m for group in settings.dbt_writer_groups if worker == "dbt_" + "_".join(group) for m in group)
    return MODELS


def run_torture(settings: Settings, workdir: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The whole run; returns torture.json's document. Raises TortureError when a component or a
    phase fails outright (the document then is not written)."""
    began = time.time()
    workdir.mkdir(parents=True, exist_ok=True)
    # SIGTERM (a test timeout, a user's kill) must still run the `finally` below that stops
    # every worker and PostgreSQL.
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_on_sigterm) if main_thread else None
    pg = start_server()
    run = Run(settings, workdir, pg)
    try:
        return _scenario(run, log, began)
    finally:
        for proc in [*run.procs.values(), *run.retired]:
            try:
                proc.stop()
            except BaseException as exc:  # noqa: BLE001 - stop every other worker all the same
                log(f"could not stop {proc.name} ({proc.popen.pid}): {exc!r}")
        pg.stop()
        shutil.rmtree(pg.data_dir.parent, ignore_errors=True)
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


class TortureStopped(BaseException):
    """SIGTERM: not an Exception, so no phase mistakes it for a trigger that never came."""


def _raise_on_sigterm(signum: int, frame: object) -> None:
    raise TortureStopped("stopped by SIGTERM")


def _scenario(run: Run, log: Callable[[str], None], began: float) -> dict[str, Any]:
    settings = run.settings
    run.warehouse.mkdir()
    deps = subprocess.run([str(Path(sys.executable).parent / "dbt"), "deps", "--project-dir", str(PROJECT_DIR),
                           "--profiles-dir", str(PROJECT_DIR)], env=run.env("deps", run.pg.port),
                          capture_output=True, text=True)
    if deps.returncode != 0:
        raise TortureError(f"dbt deps failed: {deps.stdout[-2000:]}{deps.stderr[-2000:]}")
    ledger = Ledger(run.workdir / "ledger.jsonl")

    # ---- load ----------------------------------------------------------------------------
    writers = []
    for group in settings.dbt_writer_groups:
        name = "dbt_" + "_".join(group)
        writers.append(name)
        run.start(name, "dbt-writer", *[a for m in group for a in ("--model", m)])
    log(f"started {len(writers)} dbt writer process(es); waiting for the first commits")
    wait_for(lambda: {e.table for e in ledger.entries() if e.event == "committed"} >= set(MODELS), 600,
             "the first committed batch of every model")
    run.start("spark_writer", "spark-writer", "--table", "t_merge")
    run.start("maintenance", "maintenance")
    writers.append("spark_writer")
    load_started = time.time()
    log(f"load running for {settings.load_seconds:.0f} s")
    next_crash = load_started + settings.crash_every_s
    next_fault = load_started + settings.fault_every_s / 2
    crashes: dict[str, Callable[[], dict[str, Any]]] = {
        "kill_maintenance_mid_rewrite": lambda: run.crash_maintenance(between_group_commits=False),
        "kill_writer_mid_merge": run.crash_writer,
        "kill_maintenance_between_group_commits": lambda: run.crash_maintenance(between_group_commits=True),
    }
    order = list(crashes)
    missed: list[dict[str, Any]] = []
    fault_targets = [*writers, "maintenance"]
    deferred_s = 0.0
    while time.time() - load_started < settings.load_seconds:
        run.restart_dead()
        now = time.time()
        kind = order[(len(run.crashes) + len(missed)) % len(order)]
        # A maintenance kill waits until the job completed an invocation since its last restart.
        ready = not kind.startswith("kill_maintenance") or run.invocations_since_start() > 0
        if now >= next_crash and not ready:
            deferred_s = max(deferred_s, now - next_crash)
        if now >= next_crash and ready:
            try:
                run.crashes.append(crashes[kind]())
                log(f"crash: {kind}")
            except TortureError as exc:  # the trigger never came: say so, keep the load going
                missed.append({"kind": kind, "why": str(exc)})
                log(f"crash {kind} not injected: {exc}")
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
            try:
                run.crashes.append(crashes[kind]())
                log(f"crash: {kind}")
            except TortureError as exc:
                missed.append({"kind": kind, "why": str(exc)})
                log(f"crash {kind} not injected: {exc}")
    # Before the stop: every writer a crash or cut hit commits once more, so that each fault's
    # aftermath (the process carried on) is seen, also for a fault at the load's very end.
    for worker in writers:
        hit = [float(r.get("cut_at") or r["at"]) for r in [*run.crashes, *run.faults]
               if (r.get("worker") or (writers[0] if r["kind"] == "kill_writer_mid_merge" else None)) == worker
               and (r.get("injected", True))]
        if hit:
            wait_for(functools.partial(run.committed_since, worker, max(hit)), 600,
                     f"{worker}'s first committed batch after its last fault", 1.0)
    load_seconds = time.time() - load_started
    (run.workdir / "stop").touch()
    log("load over; stopping the workers between batches")
    for proc in run.procs.values():
        # Writers finish their batch; the maintenance job gets 90 s to finish its phase, then it
        # is killed like in a crash (its leftovers are orphans for the audit below).
        grace = 90 if proc.role == "maintenance" else 600
        try:
            proc.popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            if proc.role == "maintenance":
                step = last_operation(proc.log.read_text(errors="replace")) if proc.log.exists() else None
                run.crashes.append({"kind": "kill_maintenance_at_load_end", "at": time.time(),
                                    **({"table": step[0], "operation": step[1]} if step else {})})
            else:
                run.unexpected_exits.append({"worker": proc.name, "exit_code": None, "at": time.time(),
                                             "log_tail": f"did not stop within {grace} s of the stop file; killed"})
            proc.kill9()
    (run.workdir / "stop").unlink()
    events = run.events()

    # ---- quiesced: orphans, in-flight writer, the next maintenance --------------------------
    before = {m: audit.audit_references(m, run.table(m)) for m in MODELS}
    crash_orphans = {m: audit.orphans(run.table(m), before[m]) for m in MODELS}
    long_batch = 900_000
    long_started = time.time()
    long_proc = run.start("long_writer", "long-writer", "--table", "t_append", "--batch", str(long_batch))
    in_flight = wait_for(lambda: run._new_files("t_append", long_started), 300, "the long writer's first data file")
    aged = audit.age_files([p for files in crash_orphans.values() for p in files], ORPHAN_AGE_HOURS)
    # A young orphan (written now, referenced by nothing): the window must keep it.
    source = next(p for p in sorted(before["t_merge"].referenced) if p.endswith(".parquet"))
    young_path = Path(source).with_name(f"torture-young-{int(time.time())}.parquet")
    shutil.copyfile(source, young_path)
    log(f"{aged} orphan file(s) aged by {ORPHAN_AGE_HOURS} h; one young orphan planted; long writer in flight")
    final = run.start("maintenance_final", "maintenance", "--once")
    final.popen.wait(timeout=900)
    final_ok = final.popen.returncode == 0
    aged_left = [p for files in crash_orphans.values() for p in files if os.path.exists(p)]
    in_flight_kept = all(os.path.exists(p) for p in in_flight)
    young_kept = young_path.exists()
    young_path.unlink(missing_ok=True)
    (run.workdir / "long_writer.gate").touch()
    long_proc.popen.wait(timeout=300)
    long_ok = long_proc.popen.returncode == 0

    # ---- final audit -----------------------------------------------------------------------
    entries = ledger.entries()
    checks: list[TableCheck] = []
    references = {}
    for model in MODELS:
        table = run.table(model)
        references[model] = audit.audit_references(model, table)
        checks.append(check(model, expectations(entries, model), audit.observed_batches(table)))
    missing = sum(len(r.missing) for r in references.values())
    all_events = run.events()
    observations: dict[str, dict[str, int]] = {}
    for fault in run.faults:
        if fault["injected"]:
            fault["outcome"] = fault_outcome(fault, all_events)
            after = [e["at"] for e in all_events if e["worker"] == fault["worker"] and e["at"] >= fault["cut_at"]]
            logs = "\n".join(path.read_text(errors="replace")
                             for path in sorted(run.workdir.glob(f"{fault['worker']}.*.log")))
            fault["outcome"]["jvm_logged"] = jvm_exceptions(logs, fault["cut_at"], after[0] if after else time.time())
            role = "maintenance" if fault["worker"].startswith("maintenance") else (
                "spark writer" if fault["worker"] == "spark_writer" else "dbt writer")
            slot = observations.setdefault(f"{fault['kind']} on the {role}", {})
            line = describe_outcome(fault["outcome"])
            slot[line] = slot.get(line, 0) + 1
    ledger_ok = all(c.ok for c in checks)
    system_ok = ledger_ok and missing == 0 and final_ok and long_ok

    by_table = {c.table: c for c in checks}
    missing_by_table = {m: len(r.missing) for m, r in references.items()}
    orphans_left = {m: sum(1 for p in files if p in aged_left) for m, files in crash_orphans.items()}
    writer_killed = "dbt_" + "_".join(settings.dbt_writer_groups[0])
    faults: dict[str, dict[str, int]] = {}
    for record in [*run.crashes, *[f for f in run.faults if f["injected"]]]:
        worker = record.get("worker") or (writer_killed if record["kind"] == "kill_writer_mid_merge"
                                          else "maintenance")
        scope = fault_scope(record, worker, _tables_of(worker, settings))
        survived, why = fault_survived(record, scope, by_table, missing_by_table, all_events, worker, orphans_left)
        record["survived"], record["survived_why"], record["evidence"] = survived, why, scope.to_dict()
        slot = faults.setdefault(record["kind"], {"injected": 0, "survived": 0})
        slot["injected"] += 1
        slot["survived"] += int(survived)
    batch_events = [e for e in events if e["kind"] == "batch"]
    # The loop's completed invocations (the one after the load is reported apart), and per
    # operation how its runs ended.
    loop_events = [e for e in all_events if e["kind"] == "maintenance" and e["worker"] == "maintenance"]
    operations = operation_counts(loop_events)
    final_operations = operation_counts([e for e in all_events if e["worker"] == "maintenance_final"])
    committed = sum(1 for e in entries if e.event == "committed")
    return {
        "ok": system_ok,
        "rows_lost": sum(c.rows_lost for c in checks),
        "rows_duplicated": sum(c.rows_duplicated for c in checks),
        "referenced_files_deleted": missing,
        "ledger_ok": ledger_ok,
        "faults": faults,
        "duration_s": round(time.time() - began, 1),
        "load": {"seconds": round(load_seconds, 1), "writer_processes": len(writers),
                 "writers": writers, "models": list(MODELS), "commits": committed,
                 "batches_attempted": len(batch_events), "maintenance_invocations": len(loop_events),
                 "maintenance_invocations_ok": sum(1 for e in loop_events if e.get("exit_code") == 0),
                 "maintenance_operations": operations, "maintenance_kills_deferred_max_s": round(deferred_s, 1)},
        "tables": [c.to_dict() for c in checks],
        "snapshots_remaining": {m: r.snapshots for m, r in references.items()},
        "orphans": {"left_by_crashes": sum(len(f) for f in crash_orphans.values()), "aged": aged,
                    "aged_left_after_remove_orphan_files": len(aged_left), "young_orphan_kept": young_kept},
        "in_flight_writer": {"files_before_remove_orphan_files": len(in_flight), "files_kept": in_flight_kept,
                             "committed_after": long_ok},
        "next_maintenance_completed": final_ok,
        "next_maintenance_operations": final_operations,
        "crashes": run.crashes,
        "crashes_not_injected": missed,
        "unexpected_exits": run.unexpected_exits,
        "catalog_fault_observations": observations,
        "catalog_faults": [f for f in run.faults],
        "settings": asdict(settings),
    }
