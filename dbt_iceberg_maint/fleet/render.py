"""What people see of a fleet run: a live progress line on stderr (steps done / running / left,
ETA) and, at the end, one row per step plus the totals."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich.table import Table

from dbt_iceberg_maint.fleet.scheduler import FleetReport
from dbt_iceberg_maint.text_tables import add_name_column

if TYPE_CHECKING:
    from rich.console import Console

_COLOURS = {"success": "green", "skipped": "yellow", "failed": "red", "dry_run": "cyan", "backlog": "magenta"}


@contextmanager
def progress_display(out: Console | None) -> Iterator[Callable[[Mapping[str, Any]], None] | None]:
    """A progress callback for run_fleet that draws on `out` (the CLI passes its stderr console),
    or None when there is no console to draw on."""
    if out is None:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn

    lock = threading.Lock()
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[detail]}"),
                  console=out, transient=True) as bar:
        task = bar.add_task("fleet", total=None, detail="planning")

        def update(state: Mapping[str, Any]) -> None:
            eta = state.get("eta_s")
            detail = (f"{state['done']} done, {state['running']} running, {state['left']} left"
                      + (f", ETA {eta:.0f} s" if eta is not None else ""))
            with lock:
                bar.update(task, total=state["total"], completed=state["done"], detail=detail)

        yield update


def fleet_table(report: FleetReport) -> Callable[[Console], None]:
    def text(out: Console) -> None:
        table = Table(title=f"fleet maintenance (run {report.run_id}, concurrency {report.concurrency})")
        add_name_column(table, "table", (o.table for o in report.outcomes))
        for column in ("operation", "status", "worker", "seconds", "details"):
            table.add_column(column)
        for o in report.outcomes:
            counts = ", ".join(f"{k}={v}" for k, v in o.metrics.items() if isinstance(v, int)
                               and not isinstance(v, bool))
            details = (o.reason or "") if o.status in {"skipped", "failed", "backlog"} else counts
            if o.left_files:
                details += f" ({o.left_files} eligible file(s) left)"
            table.add_row(o.table, o.operation, f"[{_COLOURS.get(o.status, 'white')}]{o.status}[/]",
                          "" if o.worker is None else str(o.worker),
                          "" if o.duration_s is None else f"{o.duration_s:.1f}", details)
        out.print(table)
        if report.catalog is not None:
            from dbt_iceberg_maint.metadata.report import catalog_summary

            out.print(catalog_summary(report.catalog))
        totals = report.to_dict()["totals"]
        backlog = totals["backlog"]
        out.print(f"planning {totals['planning_s']:.1f} s, execution {totals['execution_s']:.1f} s, "
                  f"{totals['statements']} statement(s), {totals['calls']} CALL(s); "
                  + (f"[magenta]backlog: {backlog['steps']} step(s) on {backlog['tables']} table(s), "
                     f"{backlog['eligible_files']} eligible file(s), {backlog['eligible_bytes']} byte(s)[/]; "
                     if backlog["steps"] else "")
                  + (f"[red]{len(report.failed)} step(s) failed[/red]" if report.failed
                     else "[green]no step failed[/green]"))
        for problem in report.history_problems:
            out.print(f"[yellow]warning: maintenance history not written: {problem}[/yellow]")
    return text
