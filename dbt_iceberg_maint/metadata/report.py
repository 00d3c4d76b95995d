"""Output of `health` and `plan`: their rows and columns for the output layer (dbt_iceberg_maint/
cli/output.py prints them as a table or JSON), and the HTML health report (+ PNG)."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.errors import UsageError
from dbt_iceberg_maint.metadata.health import HEALTH_FIELDS, STATISTICS_FIELDS, HealthRecord
from dbt_iceberg_maint.metadata.planner import PlannedOperation
from dbt_iceberg_maint.text_tables import TABLE_COLUMN, Column

# The text table fits 80 columns with these (the JSON and the HTML report carry every figure,
# deletion_vectors and max_partition_delete_ratio included); table names never wrap.
HEALTH_COLUMNS = (TABLE_COLUMN, *(Column(key, key.replace("_", " "), justify="right") for key in (
    "data_files", "small_files", "delete_files", "snapshots", "manifests", "partitions",
    "max_small_files_in_partition")))
PLAN_COLUMNS = (Column("status"), TABLE_COLUMN, Column("operation"), Column("reason"), Column("sql"))


def health_rows(records: Sequence[HealthRecord]) -> list[dict[str, Any]]:
    """One row per table: table_health's figures in the macro's field order, or its error."""
    return [r.to_dict() for r in records]


def health_text(records: Sequence[HealthRecord]) -> tuple[list[dict[str, Any]], list[str]]:
    """The text output: rows of the tables that were read, and one message per table that could
    not be (a missing table is an error to read whole, not a cell of a figures table)."""
    rows = [r.to_dict() for r in records if r.error is None]
    errors = [r.error if r.table in r.error else f"{r.table}: {r.error}" for r in records if r.error is not None]
    return rows, errors


def plan_rows(plan: Sequence[PlannedOperation]) -> list[dict[str, Any]]:
    return [p.to_dict() for p in plan]


def plan_summary(plan: Sequence[PlannedOperation]) -> str:
    due = [p for p in plan if p.status == "dry_run"]
    summary = f"{len(due)} operation(s) due on {len({p.table for p in due})} table(s); {len(plan)} decision(s)"
    unplanned = sorted({p.table for p in plan if p.status == "failed" and not p.due})
    return summary + (f"; {len(unplanned)} table(s) could not be planned: {', '.join(unplanned)}" if unplanned else "")


def catalog_summary(found: Mapping[str, Sequence[str]]) -> str:
    """What --include-catalog found (CatalogSelection.to_dict()): tables taken, patterns that matched
    nothing, matched tables left to their dbt node, tables nobody maintains."""
    parts = [f"{len(found['taken'])} catalog-only table(s) taken"]
    if found["left_to_dbt"]:
        parts.append(f"{len(found['left_to_dbt'])} matched table(s) left to their dbt model or source: "
                     f"{', '.join(found['left_to_dbt'])}")
    if found["unmatched_patterns"]:
        parts.append(f"pattern(s) matching no table: {', '.join(found['unmatched_patterns'])}")
    if found["uncovered"]:
        parts.append(f"{len(found['uncovered'])} table(s) in those namespaces that no dbt node and no pattern covers: "
                     f"{', '.join(found['uncovered'])}")
    return "; ".join(parts)


def load_before(path: Path) -> dict[str, Mapping[str, Any]]:
    """A previous `health --output json` run, by table."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"--compare {path}: cannot read a health JSON list ({exc})") from exc
    if not isinstance(document, list) or not all(isinstance(item, dict) and "table" in item for item in document):
        raise UsageError(f"--compare {path}: expected the JSON list `health --output json` prints")
    return {item["table"]: item for item in document}


def _histogram_svg(sizes: Sequence[int], target: int, width: int = 420, height: int = 120) -> str:
    """File sizes on a log2 axis (bins of powers of two), the target size and 0.75 x target marked."""
    if not sizes:
        return '<p class="muted">no data files</p>'
    low = 2 ** max(0, int(math.log2(max(1, min(sizes)))))
    high = max(target * 2, max(sizes) + 1)
    bins = max(1, math.ceil(math.log2(high / low)))
    counts = [0] * bins
    for size in sizes:
        counts[min(bins - 1, int(math.log2(max(size, low) / low)))] += 1
    peak = max(counts)
    bar = (width - 40) / bins
    parts = [f'<svg width="{width}" height="{height + 30}" xmlns="http://www.w3.org/2000/svg">']
    for i, count in enumerate(counts):
        h = 0 if peak == 0 else count / peak * height
        upper = low * 2 ** (i + 1)
        color = "#d9534f" if upper <= target * 0.75 else "#5b9bd5"
        parts.append(f'<rect x="{20 + i * bar:.1f}" y="{height - h:.1f}" width="{bar - 2:.1f}" height="{h:.1f}" '
                     f'fill="{color}"><title>{count} file(s) &lt; {upper} bytes</title></rect>')
    # The two marks are close on a log axis: one label left of its line, one right.
    for value, label, anchor, dx in ((target * 0.75, "small &lt; 0.75 x target", "end", -3), (target, "target",
                                                                                            "start", 3)):
        x = 20 + math.log2(value / low) / bins * (width - 40)
        parts.append(f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height}" stroke="#333" stroke-dasharray="4 3"/>'
                     f'<text x="{x + dx:.1f}" y="10" font-size="10" text-anchor="{anchor}">{label}</text>')
    parts.append(f'<text x="20" y="{height + 28}" font-size="10">{_human(low)} .. {_human(high)} (log scale)</text>')
    parts.append("</svg>")
    return "".join(parts)


def _human(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}"
        size /= 1024
    return f"{size:.0f} TiB"


def health_html(records: Sequence[HealthRecord], before: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    esc = html.escape
    sections = []
    for record in records:
        if record.figures is None:
            sections.append(f'<section><h2>{esc(record.table)}</h2><p class="error">{esc(record.error or "")}</p>'
                            "</section>")
            continue
        figures = record.figures
        old = (before or {}).get(record.table)
        head = "<tr><th>figure</th>" + ("<th>before</th>" if old else "") + "<th>now</th></tr>"
        rows = []
        for key in (*HEALTH_FIELDS[1:], *STATISTICS_FIELDS):
            now_value = figures.get(key)
            was = old.get(key) if old else None
            changed = old is not None and was != now_value and key != "oldest_snapshot_age_hours"
            cls = ' class="changed"' if changed else ""
            before_cell = f"<td>{esc(str(was))}</td>" if old else ""
            rows.append(f"<tr{cls}><td>{key}</td>{before_cell}<td>{esc(str(now_value))}</td></tr>")
        partitions = "".join(
            f'<tr><td>{esc(name)}</td><td><div class="bar" style="width:{min(300, 6 * count)}px"></div> {count}</td>'
            "</tr>" for name, count in record.small_files_by_partition[:15])
        sections.append(
            f"<section><h2>{esc(record.table)}</h2><div class='grid'><div><table>{head}{''.join(rows)}</table></div>"
            f"<div><h3>File sizes vs target</h3>{_histogram_svg(record.file_sizes, figures['target_file_size_bytes'])}"
            f"<h3>Small files per partition</h3>"
            f"{'<table>' + partitions + '</table>' if partitions else '<p class=muted>none</p>'}</div></div></section>")
    style = ("body{font-family:sans-serif;margin:24px;color:#222}section{border:1px solid #ccc;border-radius:6px;"
             "padding:8px 16px;margin-bottom:16px}.grid{display:flex;gap:32px;flex-wrap:wrap}"
             "td,th{padding:2px 8px;text-align:left;font-size:13px}.changed{background:#fff3cd}"
             ".bar{display:inline-block;height:10px;background:#d9534f}.muted{color:#888}.error{color:#b00}")
    title = "Iceberg table health" + (" (before / after)" if before else "")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{style}</style></head>"
            f"<body><h1>{title}</h1><p>{len(records)} table(s). Small files are below 0.75 x the target file size "
            f"(table_health's definition).</p>{''.join(sections)}</body></html>")


def health_png(records: Sequence[HealthRecord], path: Path) -> bool:
    """Small vs other data files per table: the picture of where compaction is needed.
    False when matplotlib (the `report` extra) is not installed: the HTML report stands alone."""
    try:
        import matplotlib
    except ImportError:
        return False

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    good = [r for r in records if r.figures is not None][:40]
    names = [r.table for r in good]
    small = [r.figures["small_files"] for r in good if r.figures is not None]
    other = [r.figures["data_files"] - r.figures["small_files"] for r in good if r.figures is not None]
    fig, ax = plt.subplots(figsize=(8, max(2.5, 0.3 * len(names) + 1)))
    ax.barh(names, small, color="#d9534f", label="small files")
    ax.barh(names, other, left=small, color="#5b9bd5", label="other data files")
    ax.set_xlabel("data files")
    ax.legend(loc="lower right")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
