"""The torture run's judgement, pure: what a worker reported after a catalog cut, what its JVM
logged, which tables and batch a fault can have hurt (`fault_scope`), and whether the system
survived it on that evidence alone (`fault_survived`). lab/torture.py gathers the evidence."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dbt_iceberg_maint.conflicts.records import records_of
from lab.ledger import TableCheck

MODELS = ("t_merge", "t_overwrite", "t_append")
EXCEPTION_NAMES = ("CommitStateUnknownException", "CommitFailedException", "UncheckedSQLException",
                   "ValidationException", "AlreadyExistsException", "PSQLException", "NotFoundException")


def _exception_names(texts: Iterable[str]) -> set[str]:
    """The names of EXCEPTION_NAMES raised in `texts`, judged by the exception records the
    classifier reads (conflicts.records): a name the text only quotes (a SQL echo, a user's
    message, a retry logged below ERROR) was not raised. A class counts under a name its simple
    name ends with (Spark's TableAlreadyExistsException as AlreadyExistsException), as the
    search of the names in the text counted it before."""
    return {name for text in texts for record in records_of(text) for name in EXCEPTION_NAMES
            if record.class_name is not None and record.simple_name.endswith(name)}


def _failure_texts(outcome: Mapping[str, Any]) -> list[str]:
    """A write's failure texts: the runner's messages, the plain Spark writer's failures."""
    return [*outcome.get("messages", []), *(f.get("message") or "" for f in outcome.get("failures", []))]


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
                "exceptions": sorted(_exception_names(r.get("reason") or "" for r in failed))}
    outcomes = event.get("outcomes", {})
    return {"observed": "batch", "batch": event.get("batch"),
            "events": {t: o.get("event") for t, o in outcomes.items()},
            "attempts": {t: o.get("attempts") for t, o in outcomes.items()},
            "kinds": {t: o.get("kinds") or [f.get("kind") for f in o.get("failures", [])] for t, o in outcomes.items()},
            "write_landed": {t: o.get("write_landed") for t, o in outcomes.items() if "write_landed" in o},
            "exceptions": sorted(_exception_names(t for o in outcomes.values() for t in _failure_texts(o)))}


_LOG4J_TIME = re.compile(r"^(\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}) ")
# Iceberg's, PostgreSQL's (the JDBC catalog) and Thrift's transport (the Hive Metastore's client).
# Not conflicts.records: it drops what log4j logs below ERROR, and these counts want Iceberg's
# retries (WARN) too, each under its line's time stamp.
_JVM_EXCEPTION = re.compile(
    r"(?:org\.apache\.iceberg\.exceptions|org\.postgresql\.util|org\.apache\.thrift\.transport)\.(\w+)(?::|$)")


def jvm_exceptions(log_text: str, start: float, end: float) -> dict[str, int]:
    """Iceberg, PostgreSQL and Thrift transport exception classes a worker's JVM logged (stack
    traces included, e.g. Iceberg's own `Retrying task after failure`) between `start` and `end`
    (epoch seconds; the log4j time stamps are the machine's local time, second resolution)."""
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
    """The tables whose commit the cut requests carried (the name is a bound parameter of the
    `UPDATE iceberg_tables ...` the proxy cut, or an argument of the metastore's
    `alter_table_with_environment_context` call, sent in the same write)."""
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
