"""The report's renderers: a JSON document, PNG charts (matplotlib) and one self-contained HTML
page (inline CSS, the charts as data URIs, no script, no outside URL). Pure but for matplotlib
drawing in memory: the shell writes the files."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import html
import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

from dbt_iceberg_maint.report.core import WEIGHT_FAILED_STEP, WEIGHT_STREAK_RUN
from dbt_iceberg_maint.report.model import TREND_FIGURES, Report, TableReport

# Tables drawn with their own trend chart (worst first): the page stays readable on a large lake.
TREND_CHARTS = 12
RANKING_ROWS = 25
RUN_ROWS = 40
_COLOURS = {"data_files": "#4c78a8", "small_files": "#e45756", "delete_files": "#f58518", "snapshots": "#54a24b",
            "data_manifests": "#b279a2", "failed_steps": "#9d1c1c", "streak": "#ff9da6", "succeeded": "#54a24b",
            "failed": "#e45756", "skipped": "#bab0ac", "blocked": "#f58518"}


def _value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_value(v) for v in value]
    return value


def to_json(report: Report, charts: Sequence[str] = ()) -> dict[str, Any]:
    """The report as JSON values: every figure the HTML page shows, tables ranked worst first."""
    document: dict[str, Any] = _value(report)
    for rank, table in enumerate(document["tables"], start=1):
        table["rank"] = rank
        for run in table["runs"]:
            run["files_removed"] = _files_removed(run)
    for run in document["runs"]:
        run["files_removed"] = _files_removed(run)
    document["totals"] = totals(report)
    document["charts"] = list(charts)
    return document


def _files_removed(run: Mapping[str, int]) -> int:
    return (max(0, run["data_files_rewritten"] - run["data_files_added"]) + run["data_files_expired"]
            + run["orphan_files_removed"])


def totals(report: Report) -> dict[str, int]:
    """The window's totals (the page's summary cards)."""
    estimates = [t.estimates for t in report.tables if t.estimates is not None and t.estimates.error is None]
    return {
        "tables": len(report.tables), "runs": len(report.runs), "steps": report.rows,
        "failed_steps": sum(r.failed for r in report.runs),
        "blocked_steps": sum(r.skipped_for_lease + r.skipped_by_cost_gate for r in report.runs),
        "tables_with_streaks": sum(1 for t in report.tables if t.streaks),
        "backlog_steps": len(report.backlog),
        "bytes_compacted": sum(r.bytes_compacted for r in report.runs),
        "files_removed": sum(r.files_removed for r in report.runs),
        "expire_bytes_estimate": sum(e.expire_bytes for e in estimates),
        "orphan_bytes_estimate": sum(e.orphan_bytes for e in estimates),
    }


def chart_name(table: str) -> str:
    return "trend_" + re.sub(r"[^A-Za-z0-9_.-]+", "_", table) + ".png"


def charts(report: Report) -> dict[str, bytes]:
    """PNG charts by file name: the ranking, the runs, and the trends of the worst tables.
    Empty without matplotlib (the `report` extra): the page then has tables only."""
    try:
        import matplotlib
    except ImportError:
        return {}
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import dates
    from matplotlib.ticker import MaxNLocator

    drawn: dict[str, bytes] = {}

    def save(name: str, figure: Any) -> None:
        buffer = io.BytesIO()
        figure.tight_layout()
        figure.savefig(buffer, format="png", dpi=100)
        plt.close(figure)
        drawn[name] = buffer.getvalue()

    ranked = [t for t in report.tables[:RANKING_ROWS] if t.score > 0]
    if ranked:
        fig, ax = plt.subplots(figsize=(9, 1.4 + 0.34 * len(ranked)))
        left = [0.0] * len(ranked)
        for part in ("small_files", "delete_files", "snapshots", "failed_steps", "streak"):
            values = [float(t.score_parts.get(part, 0)) for t in ranked]
            ax.barh([t.table for t in ranked], values, left=left, color=_COLOURS.get(part, "#888"),
                    label=part.replace("_", " "), height=0.6)
            left = [a + b for a, b in zip(left, values, strict=True)]
        ax.invert_yaxis()
        ax.set_xlabel("score (worst tables first)")
        ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), fontsize=8, frameon=False, ncols=5)
        _tidy(ax)
        save("ranking.png", fig)

    runs = list(reversed(report.runs[:RUN_ROWS]))
    if runs:
        fig, ax = plt.subplots(figsize=(9, 3.0))
        labels = [f"{r.run_id[:18]}\n{r.started_at.strftime('%m-%d %H:%M')}" for r in runs]
        positions = list(range(len(runs)))
        bottom = [0.0] * len(runs)
        for status in ("succeeded", "failed", "blocked", "skipped"):
            if status == "blocked":
                values = [float(r.skipped_for_lease + r.skipped_by_cost_gate) for r in runs]
            elif status == "skipped":
                values = [float(r.skipped - r.skipped_for_lease - r.skipped_by_cost_gate) for r in runs]
            else:
                values = [float(getattr(r, status)) for r in runs]
            name = "skipped (lease / cost gate)" if status == "blocked" else status
            ax.bar(positions, values, bottom=bottom, color=_COLOURS[status], label=name,
                   width=0.6 if len(runs) > 4 else 0.35)
            bottom = [a + b for a, b in zip(bottom, values, strict=True)]
        ax.set_xticks(positions, labels, rotation=30 if len(runs) > 8 else 0, ha="right" if len(runs) > 8 else "center",
                      fontsize=7)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("steps")
        ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), fontsize=8, frameon=False, ncols=4)
        _tidy(ax)
        save("runs.png", fig)

    for table in report.tables[:TREND_CHARTS]:
        if len(table.trend) < 1:
            continue
        fig, ax = plt.subplots(figsize=(6.4, 3.0))
        times = [float(t) for t in dates.date2num([p.at for p in table.trend])]  # type: ignore[no-untyped-call]
        for key in TREND_FIGURES:
            points = [(t, float(v)) for t, p in zip(times, table.trend, strict=True)
                      if (v := p.figures.get(key)) is not None]
            if points:
                ax.plot([t for t, _ in points], [v for _, v in points], marker="o", markersize=3, linewidth=1.6,
                        color=_COLOURS[key], label=key.replace("_", " "), drawstyle="steps-post")
        ax.set_title(table.table, fontsize=10, loc="left", pad=22)
        ax.legend(fontsize=7, frameon=False, loc="lower left", bbox_to_anchor=(0, 1.0), ncols=5)
        ax.set_ylim(bottom=0)
        span = max(times) - min(times)
        if span < 1 / 24:  # points minutes apart (or one instant): a margin of their own scale, not years
            margin = max(span * 0.1, 2 / 1440)
            ax.set_xlim(min(times) - margin, max(times) + margin)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        locator = dates.AutoDateLocator()  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(dates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
        _tidy(ax)
        save(chart_name(table.table), fig)
    return drawn


def _tidy(ax: Any) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.grid(axis="x" if ax.get_xlabel().startswith("score") else "y", alpha=0.25)


def human_bytes(size: float | None) -> str:
    if size is None:
        return ""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""  # unreachable: the loop returns at TiB


def _when(value: dt.datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC")


def _cell(value: Any) -> str:
    if value is None:
        return '<td class="muted">–</td>'
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, int | float):
        return f'<td class="num">{value:,}</td>' if isinstance(value, int) else f'<td class="num">{value:,.1f}</td>'
    return f"<td>{html.escape(str(value))}</td>"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], raw: bool = False, css: str = "") -> str:
    """An HTML table; with `raw`, cells are already <td> markup."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(str(c) if raw else _cell(c) for c in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _image(charts: Mapping[str, bytes], name: str, alt: str) -> str:
    if name not in charts:
        return ""
    data = base64.b64encode(charts[name]).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def _streak_text(table: TableReport) -> str:
    return ", ".join(f"{s.operation} ×{s.runs_in_a_row}" for s in table.streaks)


def _estimate_cells(table: TableReport) -> list[str]:
    estimate = table.estimates
    if estimate is None:
        return ['<td class="muted">–</td>'] * 2
    if estimate.error is not None:
        return [f'<td class="error" colspan="2">{html.escape(estimate.error)}</td>']
    return [f'<td class="num">{human_bytes(estimate.expire_bytes)}<br><span class="muted">'
            f'{estimate.expire_files:,} file(s), {estimate.expiring_snapshots} snapshot(s)</span></td>',
            f'<td class="num">{human_bytes(estimate.orphan_bytes)}<br><span class="muted">'
            f'{estimate.orphan_files:,} file(s)</span></td>']


STYLE = """
*{box-sizing:border-box}
body{font-family:-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;background:#f5f6f8;color:#1f2328}
header{background:#1f3a5f;color:#fff;padding:20px 32px}
header h1{margin:0 0 4px;font-size:22px}
header p{margin:0;opacity:.85;font-size:13px}
main{padding:20px 32px;max-width:1280px}
section{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:14px 20px;margin-bottom:18px}
h2{font-size:17px;margin:4px 0 10px}
h3{font-size:14px;margin:12px 0 6px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin-bottom:18px}
.card{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:10px 16px;min-width:150px}
.card b{display:block;font-size:22px}
.card span{font-size:12px;color:#57606a}
.card.bad b{color:#c62828}
table{border-collapse:collapse;width:100%;font-size:13px;margin:6px 0 10px}
th{text-align:left;background:#f0f2f5;font-weight:600;padding:5px 8px;border-bottom:1px solid #d0d7de}
td{padding:4px 8px;border-bottom:1px solid #eef0f3;vertical-align:top}
td:first-child,td.when{white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr:hover td{background:#fafbfc}
.muted{color:#8c959f;font-size:12px}
.error{color:#c62828}
.pill{display:inline-block;border-radius:10px;padding:1px 8px;font-size:12px;color:#fff}
.pill.failed{background:#c62828}.pill.lease{background:#ef6c00}.pill.cost_gate{background:#8e6c00}
.pill.success{background:#2e7d32}.pill.skipped{background:#8c959f}
.grid{display:flex;flex-wrap:wrap;gap:20px;align-items:flex-start}
.grid>div{flex:1 1 420px;min-width:0}
img{max-width:100%;height:auto}
.score{font-weight:600}
.empty{color:#57606a;font-style:italic}
"""


def _pill(status: str) -> str:
    return f'<span class="pill {html.escape(status)}">{html.escape(status.replace("_", " "))}</span>'


def to_html(report: Report, charts: Mapping[str, bytes]) -> str:
    """The page: summary cards, worst tables, backlog, streaks, runs, then one section per table."""
    esc = html.escape
    total = totals(report)
    cards: list[tuple[str, int | str, bool]] = [
        ("tables", total["tables"], False), ("runs", total["runs"], False),
        ("failed steps", total["failed_steps"], total["failed_steps"] > 0),
        ("skipped: lease / cost gate", total["blocked_steps"], total["blocked_steps"] > 0),
        ("tables with a streak", total["tables_with_streaks"], total["tables_with_streaks"] > 0),
        ("backlog of the last run", total["backlog_steps"], total["backlog_steps"] > 0),
        ("bytes compacted", human_bytes(total["bytes_compacted"]), False),
        ("files removed", total["files_removed"], False),
        ("expire_snapshots would free", human_bytes(total["expire_bytes_estimate"]), False),
        ("remove_orphan_files would free", human_bytes(total["orphan_bytes_estimate"]), False),
    ]
    card_html = "".join(f'<div class="card{" bad" if bad else ""}"><b>{esc(f"{v:,}" if isinstance(v, int) else v)}'
                        f"</b><span>{esc(label)}</span></div>" for label, v, bad in cards)

    ranking_rows = []
    for rank, t in enumerate(report.tables, start=1):
        figures = t.current
        ranking_rows.append([
            _cell(rank), f"<td><a href='#t{rank}'>{esc(t.table)}</a></td>",
            f'<td class="num score">{t.score:,.0f}</td>',
            _cell(figures.get("small_files")), _cell(figures.get("data_files")), _cell(figures.get("delete_files")),
            _cell(figures.get("snapshots")), _cell(t.failed_steps), _cell(_streak_text(t) or None),
            *_estimate_cells(t)])
    ranking = (_table(["#", "table", "score", "small files", "data files", "delete files", "snapshots",
                       "failed steps", "streaks", "expire_snapshots would free", "remove_orphan_files would free"],
                      ranking_rows, raw=True)
               if ranking_rows else '<p class="empty">no table in the history window</p>')

    backlog = (_table(["table", "operation", "status", "reason", "at"],
                      [[_cell(b.table), _cell(b.operation), f"<td>{_pill(b.kind)}</td>", _cell(b.reason),
                        _cell(_when(b.at))] for b in report.backlog], raw=True)
               if report.backlog else '<p class="empty">nothing: the last run left no failed or blocked step</p>')
    streak_rows = [[_cell(s.table), _cell(s.operation), f'<td class="num"><b>{s.runs_in_a_row}</b></td>',
                    "<td>" + " ".join(_pill(k) for k in s.kinds) + "</td>", _cell(s.last_reason),
                    _cell(_when(s.last_at))]
                   for t in report.tables for s in t.streaks]
    streak_html = (_table(["table", "operation", "runs in a row", "kinds", "last reason", "last at"], streak_rows,
                          raw=True) if streak_rows
                   else '<p class="empty">none: no operation failed or was blocked in its latest run</p>')
    run_headers = ["run", "started", "tables", "steps", "ok", "failed", "skipped", "lease / cost gate",
                   "procedure time", "bytes compacted", "files rewritten → added", "files removed",
                   "snapshots expired", "manifests rewritten"]

    def run_row(r: Any, with_tables: bool = True) -> list[str]:
        cells = [_cell(r.run_id), _cell(_when(r.started_at))]
        if with_tables:
            cells.append(_cell(r.tables))
        return [*cells, _cell(r.steps), _cell(r.succeeded),
                f'<td class="num{" error" if r.failed else ""}">{r.failed}</td>', _cell(r.skipped),
                _cell(r.skipped_for_lease + r.skipped_by_cost_gate), _cell(f"{r.procedure_ms / 1000:.1f} s"),
                f'<td class="num">{human_bytes(r.bytes_compacted)}</td>',
                _cell(f"{r.data_files_rewritten} → {r.data_files_added}"), _cell(r.files_removed),
                _cell(r.snapshots_expired), _cell(r.manifests_rewritten)]

    runs_html = (_table(run_headers, [run_row(r) for r in report.runs[:RUN_ROWS]], raw=True)
                 if report.runs else '<p class="empty">no run in the window</p>')

    sections = []
    for rank, t in enumerate(report.tables, start=1):
        shown = [(k, t.current.get(k)) for k in ("data_files", "small_files", "delete_files", "snapshots",
                                                   "manifests", "data_manifests", "oldest_snapshot_age_hours",
                                                   "max_small_files_in_partition") if k in t.current]
        source = {"now": "now (table metadata)", "history": "as the history last saw them",
                  "none": "unknown"}[t.current_source]
        error = f'<p class="error">current health: {esc(t.health_error)}</p>' if t.health_error else ""
        parts = ", ".join(f"{k.replace('_', ' ')} {v:,.0f}" for k, v in t.score_parts.items() if v)
        estimate = ""
        if t.estimates is not None and t.estimates.error is None:
            e = t.estimates
            estimate = (f"<p>expire_snapshots (older than {e.expire_older_than_hours:g} h, retain last "
                        f"{e.expire_retain_last}) would free <b>{human_bytes(e.expire_bytes)}</b> in "
                        f"{e.expire_files:,} file(s) of {e.expiring_snapshots} snapshot(s); remove_orphan_files "
                        f"(older than {e.orphan_older_than_hours:g} h) <b>{human_bytes(e.orphan_bytes)}</b> in "
                        f"{e.orphan_files:,} file(s).</p>")
        elif t.estimates is not None:
            estimate = f'<p class="error">estimates: {esc(t.estimates.error or "")}</p>'
        table_runs = (_table([h for h in run_headers if h != "tables"], [run_row(r, False) for r in t.runs[:15]],
                             raw=True) if t.runs else '<p class="empty">no step in the window</p>')
        sections.append(
            f'<section id="t{rank}"><h2>{rank}. {esc(t.table)} <span class="muted">score {t.score:,.0f}'
            f'{" (" + esc(parts) + ")" if parts else ""}{" · node " + esc(t.node) if t.node else ""}</span></h2>'
            f'{error}<div class="grid"><div><h3>Figures {esc(source)}</h3>'
            f'{_table(["figure", "value"], [(k.replace("_", " "), v) for k, v in shown])}{estimate}</div>'
            f'<div>{_image(charts, chart_name(t.table), "trend of " + t.table)}</div></div>'
            f"<h3>Runs</h3>{table_runs}</section>")

    title = "Iceberg maintenance report"
    last = f", last run <b>{esc(report.last_run_id)}</b>" if report.last_run_id else ""
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{title}</title><style>{STYLE}</style>"
        f"</head><body><header><h1>{title}</h1><p>{esc(_when(report.since))} – {esc(_when(report.generated_at))} "
        f"({report.days:g} day(s)) · history table <b>{esc(report.history_table)}</b> · {report.rows:,} step(s)"
        f"{last}</p></header><main><div class='cards'>{card_html}</div>"
        f"<section><h2>Worst tables first</h2><p class='muted'>score = small files + delete files + snapshots "
        f"+ {WEIGHT_FAILED_STEP} × failed steps in the window + {WEIGHT_STREAK_RUN} × the longest streak (runs in a "
        f"row an operation failed or was skipped for a lease or the cost gate)</p>"
        f"{_image(charts, 'ranking.png', 'score per table')}{ranking}</section>"
        f"<section><h2>Backlog of the last run</h2>{backlog}</section>"
        f"<section><h2>Failure and skip streaks</h2>{streak_html}</section>"
        f"<section><h2>Runs</h2>{_image(charts, 'runs.png', 'steps per run')}{runs_html}</section>"
        f"{''.join(sections)}</main></body></html>")
