"""The fleet engine's pure core: durations, the health score that orders tables worst-first,
which step a free worker takes next, the budget's cut-off, backlog sums, resume filtering and
the report. No I/O: the executor (executor.py) feeds it plans and clock readings.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from dbt_iceberg_maint.errors import UsageError

# A step's final status in the report: the macros' four, and `backlog` (never started: the budget
# closed first).
REPORT_STATUSES = ("success", "skipped", "failed", "dry_run", "backlog")
# What a previous report settled: a resumed run does not take these steps up again. Everything
# else is planned again from fresh metadata: a failed or timed-out step, a dry run, the backlog,
# and a skip (another job's lease, a timed-out step before it; a step that was not due is decided
# again from metadata at no cost).
SETTLED_STATUSES = frozenset({"success"})

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)?")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(option: str, text: str | float | int | None) -> float | None:
    """`90s`, `30m`, `2h`, `1h30m`, `1.5h` or plain seconds, as positive seconds (None stays None)."""
    if text is None:
        return None
    allowed = "a positive duration such as 90s, 30m, 2h or 1h30m (units ms, s, m, h, d; no unit: seconds)"
    if isinstance(text, bool):
        raise UsageError(f"{option} is {text!r}; expected {allowed}")
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        compact = text.strip().lower().replace(" ", "")
        parts = list(_DURATION.finditer(compact))
        if not compact or "".join(m.group(0) for m in parts) != compact or (
                len(parts) > 1 and any(m.group(2) is None for m in parts)):
            raise UsageError(f"{option} is {text!r}; expected {allowed}")
        seconds = sum(float(m.group(1)) * _UNIT_S[m.group(2) or "s"] for m in parts)
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"{option} is {text!r}; expected {allowed}")
    return seconds


def check_concurrency(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"--concurrency is {value!r}; expected a whole number of workers >= 1")
    return int(value)


def check_cap(option: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{option} is {value!r}; expected a whole number >= 1")
    return int(value)


# ---- what the planner decided, per table ----

@dataclass(frozen=True)
class Step:
    """One operation of one table as planned (status planned, skipped or failed: the macros'
    step statuses), with a compaction's eligible files and bytes."""

    table: str
    operation: str
    status: str
    reason: str = ""
    sql: str | None = None
    model: str | None = None
    eligible_files: int | None = None
    eligible_bytes: int | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.table, self.operation)

    def plan_step(self) -> dict[str, Any]:
        """The step as execute_maintenance_steps takes it."""
        return {"table": self.table, "operation": self.operation, "status": self.status,
                "reason": self.reason or None, "sql": self.sql}


# Score weights: one point per small file, per delete file, per data manifest beyond one, per
# 128 MiB of small-file bytes, per 10 snapshots beyond one and per day of the oldest snapshot's age.
SCORE_WEIGHTS: Mapping[str, float] = MappingProxyType({
    "small_files": 1.0, "small_bytes": 1.0 / (128 * 1024 * 1024), "delete_files": 1.0, "data_manifests": 1.0,
    "snapshots": 0.1, "oldest_snapshot_age_hours": 1.0 / 24,
})


def health_components(figures: Mapping[str, Any]) -> dict[str, float]:
    """The score's parts from what the planner read (an unread figure counts 0)."""
    def value(name: str) -> float:
        raw = figures.get(name)
        return float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else 0.0

    counted = {
        "small_files": value("small_files"), "small_bytes": value("small_bytes"),
        "delete_files": value("delete_files"), "data_manifests": max(0.0, value("data_manifests") - 1),
        "snapshots": max(0.0, value("snapshots") - 1), "oldest_snapshot_age_hours": value("oldest_snapshot_age_hours"),
    }
    return {name: round(counted[name] * SCORE_WEIGHTS[name], 3) for name in SCORE_WEIGHTS}


@dataclass(frozen=True)
class TableWork:
    table: str
    model: str | None
    steps: tuple[Step, ...]
    figures: Mapping[str, Any] = field(default_factory=dict)
    # execute_maintenance_steps' `record` ({policy, snapshot_id}): the checks its steps settle are
    # recorded as iceberg_maintenance records them. None: nothing recorded (a forced run).
    record: Mapping[str, Any] | None = None
    # Its name in the metadata catalog (schema.table, without the Spark catalog `table` may name).
    catalog_name: str | None = None

    @property
    def components(self) -> dict[str, float]:
        return health_components(self.figures)

    @property
    def score(self) -> float:
        return round(sum(self.components.values()), 3)

    @property
    def due(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.status == "planned")


def order_tables(tables: Iterable[TableWork]) -> tuple[TableWork, ...]:
    """Worst first: highest score, then the table name (deterministic)."""
    return tuple(sorted(tables, key=lambda t: (-t.score, t.table)))


# ---- resume ----

def settled_keys(previous: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    """(table, operation) of the steps a previous fleet report settled."""
    results = previous.get("results") if isinstance(previous, Mapping) else None
    if not isinstance(results, list):
        raise UsageError("--resume: the report has no `results` list; expected a `maintain --output json` "
                         "report of the fleet engine")
    keys = set()
    for item in results:
        if not isinstance(item, Mapping) or not isinstance(item.get("table"), str) \
                or not isinstance(item.get("operation"), str):
            raise UsageError(f"--resume: result {item!r} has no table and operation")
        if item.get("status") in SETTLED_STATUSES:
            keys.add((item["table"], item["operation"]))
    return frozenset(keys)


def without_settled(tables: Iterable[TableWork], settled: frozenset[tuple[str, str]]) -> tuple[TableWork, ...]:
    """The tables with their steps a previous run settled removed (tables left with none dropped)."""
    kept = []
    for work in tables:
        steps = tuple(s for s in work.steps if s.key not in settled)
        if steps:
            kept.append(replace(work, steps=steps))
    return tuple(kept)


# ---- scheduling ----

def next_step(queues: Mapping[str, Sequence[Step]], order: Sequence[str], busy: Iterable[str]) -> Step | None:
    """The first step of the worst table that has steps left and none running (a table's steps run
    one after the other, in their canonical order); None when every such table is busy."""
    running = set(busy)
    for table in order:
        if table not in running and queues.get(table):
            return queues[table][0]
    return None


def may_start(elapsed_s: float, budget_s: float | None) -> bool:
    """No step starts once the window is closed."""
    return budget_s is None or elapsed_s < budget_s


def eta_s(done_durations: Sequence[float], left: int, running: int, concurrency: int) -> float | None:
    """Seconds until the last step ends, from the mean duration of the steps done so far."""
    if not done_durations:
        return None
    mean = sum(done_durations) / len(done_durations)
    return round(mean * (left + running) / max(1, concurrency), 1)


# ---- the report ----

@dataclass(frozen=True)
class StepOutcome:
    """One step in the report."""

    table: str
    operation: str
    status: str  # REPORT_STATUSES
    reason: str | None = None
    sql: str | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    kind: str | None = None  # a failure's kind: the classifier's, or `timeout`
    started_at: str | None = None  # UTC ISO 8601
    finished_at: str | None = None
    duration_s: float | None = None
    worker: int | None = None
    eligible_files: int | None = None
    eligible_bytes: int | None = None
    left_files: int | None = None  # eligible files a capped or partial compaction left behind
    statements: int = 0
    calls: tuple[tuple[int, int | None], ...] = ()  # each CALL's (started, ended) epoch ms
    recorded: bool = False  # a macro logged its result line and wrote its history row

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "operation": self.operation, "status": self.status, "reason": self.reason,
                "sql": self.sql, "metrics": dict(self.metrics), "kind": self.kind, "started_at": self.started_at,
                "finished_at": self.finished_at, "duration_s": self.duration_s,
                "duration_ms": None if self.duration_s is None else int(self.duration_s * 1000),
                "worker": self.worker, "eligible_files": self.eligible_files, "eligible_bytes": self.eligible_bytes,
                "left_files": self.left_files, "statements": self.statements,
                "calls": [{"started_ms": s, "ended_ms": e} for s, e in self.calls]}


def left_behind(eligible_files: int | None, metrics: Mapping[str, Any]) -> int | None:
    """Eligible files a successful compaction did not rewrite (its cap, or partial progress)."""
    rewritten = metrics.get("rewritten_data_files_count")
    if eligible_files is None or not isinstance(rewritten, int):
        return None
    return max(0, eligible_files - rewritten)


def backlog_entries(outcomes: Sequence[StepOutcome]) -> list[dict[str, Any]]:
    return [{"table": o.table, "operation": o.operation, "reason": o.reason, "eligible_files": o.eligible_files,
             "eligible_bytes": o.eligible_bytes} for o in outcomes if o.status == "backlog"]


def backlog_totals(outcomes: Sequence[StepOutcome]) -> dict[str, int]:
    backlog = [o for o in outcomes if o.status == "backlog"]
    return {"steps": len(backlog), "tables": len({o.table for o in backlog}),
            "eligible_files": sum(o.eligible_files or 0 for o in backlog),
            "eligible_bytes": sum(o.eligible_bytes or 0 for o in backlog)}


@dataclass(frozen=True)
class FleetReport:
    run_id: str
    outcomes: tuple[StepOutcome, ...]
    tables: tuple[TableWork, ...]  # in the order they were scheduled (worst first)
    concurrency: int
    worker_mode: str  # subprocess | in_process | none (nothing to execute)
    budget_s: float | None = None
    step_timeout_s: float | None = None
    planning_s: float = 0.0
    execution_s: float = 0.0
    invocations: int = 0
    statements: int = 0
    dry_run: bool = False
    resumed_from: str | None = None
    # --include-catalog: tables taken, patterns matching nothing, tables left to dbt, uncovered.
    catalog: Mapping[str, Any] | None = None
    history_problems: tuple[str, ...] = ()  # why history rows were not written (docs/history.md)

    @property
    def failed(self) -> tuple[StepOutcome, ...]:
        return tuple(o for o in self.outcomes if o.status == "failed")

    @property
    def exit_code(self) -> int:
        """1 when a step failed (a timeout included), else 0; backlog alone is not a failure."""
        return 1 if self.failed else 0

    @property
    def calls(self) -> int:
        return sum(len(o.calls) for o in self.outcomes)

    def counts(self) -> dict[str, int]:
        return {status: sum(o.status == status for o in self.outcomes) for status in REPORT_STATUSES}

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "engine": "fleet", "concurrency": self.concurrency,
            "worker_mode": self.worker_mode, "budget_s": self.budget_s, "step_timeout_s": self.step_timeout_s,
            "dry_run": self.dry_run, "resumed_from": self.resumed_from, "catalog": self.catalog,
            "invocations": self.invocations, "counts": self.counts(),
            "results": [o.to_dict() for o in self.outcomes],
            "backlog": backlog_entries(self.outcomes),
            "tables": [{"table": t.table, "model": t.model, "score": t.score, "components": t.components,
                        "figures": dict(t.figures), "due": [s.operation for s in t.due]} for t in self.tables],
            "totals": {"planning_s": round(self.planning_s, 3), "execution_s": round(self.execution_s, 3),
                       "statements": self.statements, "calls": self.calls,
                       "left_files": sum(o.left_files or 0 for o in self.outcomes),
                       "backlog": backlog_totals(self.outcomes)},
            "history_problems": list(self.history_problems),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)
