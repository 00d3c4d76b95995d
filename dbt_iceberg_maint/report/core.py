"""The report from history rows, current health and estimates: pure (no I/O, no clock).

Figures follow the package models over the same table (models/iceberg_maint_runs.sql) and
streaks the iceberg_maintenance_streak test (macros/tests/iceberg_maintenance_streak.sql), so the
report, dashboards and tests agree; docs/report.md describes each figure and the score.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dbt_iceberg_maint.report.model import (
    TREND_FIGURES,
    BacklogItem,
    CurrentHealth,
    Estimates,
    HistoryRow,
    Report,
    RunFigures,
    Streak,
    TableReport,
    TrendPoint,
)

# The score's weights (docs/report.md, "Worst tables first"): one point per small file, delete
# file and snapshot; a failed step or a run in a streak weighs as much as many files, since it
# means maintenance is not keeping up at all.
WEIGHT_FAILED_STEP = 10
WEIGHT_STREAK_RUN = 25


def run_figures(run_id: str, rows: Sequence[HistoryRow]) -> RunFigures:
    """iceberg_maint_runs' figures for `rows` (the steps of one run, of one table or all)."""
    return RunFigures(
        run_id=run_id,
        started_at=min(r.started_at for r in rows),
        ended_at=max(r.ended_at for r in rows),
        tables=len({r.table_name for r in rows}),
        steps=len(rows),
        succeeded=sum(r.status == "success" for r in rows),
        failed=sum(r.status == "failed" for r in rows),
        skipped=sum(r.status == "skipped" for r in rows),
        skipped_for_lease=sum(r.blocked == "lease" for r in rows),
        skipped_by_cost_gate=sum(r.blocked == "cost_gate" for r in rows),
        procedure_ms=sum(r.duration_ms for r in rows),
        data_files_rewritten=sum(r.figure("rewritten_data_files_count") for r in rows),
        data_files_added=sum(r.figure("added_data_files_count") for r in rows),
        bytes_compacted=sum(r.figure("rewritten_bytes_count") for r in rows if r.operation == "rewrite_data_files"),
        data_files_expired=sum(r.figure("deleted_data_files_count") for r in rows),
        snapshots_expired=sum(r.figure("deleted_manifest_lists_count") for r in rows),
        orphan_files_removed=sum(r.figure("orphan_file_count") for r in rows),
        manifests_rewritten=sum(r.figure("rewritten_manifests_count") for r in rows),
    )


def _by_run(rows: Iterable[HistoryRow]) -> list[tuple[str, list[HistoryRow]]]:
    """Rows grouped by run_id, newest run first (by its last step's start, then run_id)."""
    groups: dict[str, list[HistoryRow]] = defaultdict(list)
    for row in rows:
        groups[row.run_id].append(row)
    return sorted(groups.items(), key=lambda item: (max(r.started_at for r in item[1]), item[0]), reverse=True)


def streaks(table: str, rows: Sequence[HistoryRow]) -> list[Streak]:
    """Per operation: how many of its latest runs in a row were bad. A run is bad for an operation
    when every row of it is failed or skipped for a lease or the cost gate; runs that did not touch
    the operation do not count. Only operations with a streak of at least one run."""
    by_operation: dict[str, list[HistoryRow]] = defaultdict(list)
    for row in rows:
        by_operation[row.operation].append(row)
    found = []
    for operation, op_rows in sorted(by_operation.items()):
        runs = _by_run(op_rows)
        bad_runs = []
        for _run_id, run_rows in runs:
            if not all(r.blocked for r in run_rows):
                break
            bad_runs.append(run_rows)
        if not bad_runs:
            continue
        last = max(bad_runs[0], key=lambda r: r.started_at)
        kinds = sorted({r.blocked for run_rows in bad_runs for r in run_rows if r.blocked})
        found.append(Streak(table, operation, len(bad_runs), tuple(kinds), last.status, last.reason, last.run_id,
                            last.started_at))
    return found


def trend(rows: Sequence[HistoryRow], now: CurrentHealth | None, at: dt.datetime) -> list[TrendPoint]:
    """The table's figures over time: each step's health before (at its start) and after (at its
    end), oldest first, a point equal to the one before it left out; then now's figures."""
    points: list[TrendPoint] = []
    for row in sorted(rows, key=lambda r: (r.started_at, r.ended_at)):
        for source, when, figures in (("before", row.started_at, row.health_before),
                                      ("after", row.ended_at, row.health_after)):
            if figures is None:
                continue
            values = {key: _int_or_none(figures.get(key)) for key in TREND_FIGURES}
            if all(v is None for v in values.values()):
                continue
            if points and points[-1].figures == values:
                continue
            points.append(TrendPoint(when, source, values))
    if now is not None and now.figures is not None:
        points.append(TrendPoint(at, "now", {key: _int_or_none(now.figures.get(key)) for key in TREND_FIGURES}))
    return points


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def score(current: Mapping[str, Any], failed_steps: int, longest_streak: int) -> dict[str, float]:
    """The parts of a table's score (their sum ranks it): current small files, delete files and
    snapshots, failed steps in the window, and the longest current streak."""
    def figure(key: str) -> int:
        return _int_or_none(current.get(key)) or 0

    return {"small_files": figure("small_files"), "delete_files": figure("delete_files"),
            "snapshots": figure("snapshots"), "failed_steps": WEIGHT_FAILED_STEP * failed_steps,
            "streak": WEIGHT_STREAK_RUN * longest_streak}


def backlog(last_run: Sequence[HistoryRow]) -> list[BacklogItem]:
    """What the last run left undone: per table and operation, its last row in the run when that
    is failed or a lease / cost gate skip (a replay in the same run that finished it clears it)."""
    last: dict[tuple[str, str], HistoryRow] = {}
    for row in sorted(last_run, key=lambda r: (r.started_at, r.ended_at)):
        last[(row.table_name, row.operation)] = row
    return [BacklogItem(row.table_name, row.operation, row.status, row.blocked, row.reason, row.run_id,
                        row.started_at)
            for (_table, _operation), row in sorted(last.items()) if row.blocked]


def build_report(rows: Sequence[HistoryRow], health: Sequence[CurrentHealth], estimates: Sequence[Estimates],
                 *, now: dt.datetime, days: float, history_table: str) -> Report:
    """The report over the rows that started in the `days` before `now`."""
    since = now - dt.timedelta(days=days)
    window = [r for r in rows if r.started_at >= since]
    health_by_table = {h.table: h for h in health}
    estimates_by_table = {e.table: e for e in estimates}
    by_table: dict[str, list[HistoryRow]] = defaultdict(list)
    for row in window:
        by_table[row.table_name].append(row)
    tables = []
    for name in sorted(set(by_table) | set(health_by_table)):
        table_rows = by_table.get(name, [])
        current_health = health_by_table.get(name)
        points = trend(table_rows, current_health, now)
        if current_health is not None and current_health.figures is not None:
            current, source = dict(current_health.figures), "now"
        elif points:
            current, source = dict(points[-1].figures), "history"
        else:
            current, source = {}, "none"
        table_streaks = streaks(name, table_rows)
        failed = sum(r.status == "failed" for r in table_rows)
        longest = max((s.runs_in_a_row for s in table_streaks), default=0)
        parts = score(current, failed, longest)
        tables.append(TableReport(
            table=name, node=next((r.node for r in table_rows if r.node), None), score=sum(parts.values()),
            score_parts=parts, current=current, current_source=source,
            health_error=current_health.error if current_health is not None else None, trend=tuple(points),
            runs=tuple(run_figures(run_id, run_rows) for run_id, run_rows in _by_run(table_rows)),
            streaks=tuple(table_streaks), failed_steps=failed,
            blocked_steps=sum(1 for r in table_rows if r.blocked), estimates=estimates_by_table.get(name)))
    tables.sort(key=lambda t: (-t.score, t.table))
    runs = _by_run(window)
    return Report(
        generated_at=now, since=since, days=days, history_table=history_table, rows=len(window),
        runs=tuple(run_figures(run_id, run_rows) for run_id, run_rows in runs), tables=tuple(tables),
        backlog=tuple(backlog(runs[0][1])) if runs else (), last_run_id=runs[0][0] if runs else None)
