"""The report's I/O: find and read the history table, read the tables' current health and
estimates (pyiceberg, the catalog `health` and `plan` read), write the files."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.errors import HistoryError, TableMissingError, TableReadError, UsageError
from dbt_iceberg_maint.metadata.catalog import profile_setting
from dbt_iceberg_maint.metadata.catalog_tables import MetadataCatalog
from dbt_iceberg_maint.metadata.health import read_health
from dbt_iceberg_maint.metadata.project import iceberg_models, load_manifest, project_var
from dbt_iceberg_maint.metadata.reader import concurrently
from dbt_iceberg_maint.policy import engine
from dbt_iceberg_maint.policy.checks import parse_instant
from dbt_iceberg_maint.report import render
from dbt_iceberg_maint.report.core import build_report
from dbt_iceberg_maint.report.estimates import estimate
from dbt_iceberg_maint.report.model import CurrentHealth, Estimates, HistoryRow, Report

DEFAULT_HISTORY_TABLE = "iceberg_maint_history"
HISTORY_COLUMNS = ("run_id", "invocation_id", "path", "node", "table_name", "operation", "status", "reason",
                   "started_at", "ended_at", "duration_ms", "output", "health_before", "health_after",
                   "snapshot_id_before", "snapshot_id_after", "lease_holder")


@dataclass(frozen=True)
class EstimateSettings:
    """The expire_snapshots and remove_orphan_files arguments the estimates assume: one given here
    holds for every table; None: each table's own policy (`policies`: table name, lower case ->
    resolved policy), else the package defaults."""

    expire_older_than_hours: float | None = None
    expire_retain_last: int | None = None
    orphan_older_than_hours: float | None = None
    policies: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def for_table(self, name: str, now: dt.datetime) -> tuple[float, int, float]:
        """(expire older_than hours, retain_last, orphan older_than hours) for table `name`."""
        policy = (self.policies.get(name.lower()) or self.policies.get(".".join(name.lower().split(".")[-2:]))
                  or engine.resolved(None))
        expire, orphan = policy[engine.section_of("expire_snapshots")], policy[engine.section_of("remove_orphan_files")]
        instant = parse_instant("policy expire_snapshots", "older_than", expire["older_than"]).value
        expire_hours = (now - instant).total_seconds() / 3600 if instant else expire["older_than_hours"]
        return (self.expire_older_than_hours if self.expire_older_than_hours is not None else float(expire_hours),
                self.expire_retain_last if self.expire_retain_last is not None else int(expire["retain_last"]),
                self.orphan_older_than_hours if self.orphan_older_than_hours is not None
                else float(orphan["older_than_hours"]))


def project_policies(project_dir: Path, profiles_dir: Path | None, target: str | None) -> dict[str, dict[str, Any]]:
    """Each Iceberg model's and source table's resolved policy (meta.iceberg_maint), by
    'schema.table' in lower case; empty outside a dbt project."""
    if not (project_dir / "dbt_project.yml").is_file():
        return {}
    manifest = load_manifest(project_dir.resolve(), profiles_dir, target)
    return {f"{t.ref.schema}.{t.ref.identifier}".lower(): engine.resolved(t.raw_policy)
            for t in iceberg_models(manifest)}


def history_table_name(explicit: str | None, project_dir: Path, profiles_dir: Path | None, target: str | None,
                       vars_yaml: str | None) -> str:
    """`--history-table`, else where the maintenance paths write it: the vars
    dbt_iceberg_maint_history_schema / _table (--vars, then dbt_project.yml), else the profile
    target's schema and iceberg_maint_history (docs/history.md)."""
    if explicit:
        return explicit
    schema = project_var(project_dir, vars_yaml, "dbt_iceberg_maint_history_schema")
    table = project_var(project_dir, vars_yaml, "dbt_iceberg_maint_history_table") or DEFAULT_HISTORY_TABLE
    if not schema:
        if profiles_dir is None:
            raise UsageError("cannot tell where the history table is: pass --history-table SCHEMA.TABLE, or "
                             "--project-dir/--profiles-dir of the dbt project whose target schema holds it")
        schema = profile_setting(project_dir, profiles_dir, target, "schema")
        if not schema:
            raise UsageError("the profile target has no schema; pass --history-table SCHEMA.TABLE")
    return f"{schema}.{table}"


def read_history(catalog: MetadataCatalog, name: str, since: dt.datetime) -> list[HistoryRow]:
    """The rows that started at `since` or later (the table is partitioned by day: older days'
    files are not read)."""
    try:
        table = catalog.load(name)
    except TableMissingError as exc:
        raise HistoryError(
            f"no maintenance history: table {name} does not exist ({exc}). No maintenance path has written it "
            "yet, or the var dbt_iceberg_maint_history_enabled is false; the vars dbt_iceberg_maint_history_schema "
            "and dbt_iceberg_maint_history_table (or --history-table) name another table (docs/history.md)"
        ) from exc
    except TableReadError as exc:
        raise HistoryError(f"cannot read the maintenance history table {name}: {exc}") from exc
    columns = {field.name for field in table.schema().fields}
    missing = [c for c in HISTORY_COLUMNS if c not in columns]
    if missing:
        raise HistoryError(f"table {name} is not a maintenance history table: no column(s) {', '.join(missing)}")
    try:
        records = table.scan(row_filter=f"started_at >= '{since.isoformat()}'",
                             selected_fields=HISTORY_COLUMNS).to_arrow().to_pylist()
    except Exception as exc:  # pyiceberg and pyarrow raise many kinds (missing file, bad Parquet)
        raise HistoryError(f"cannot read the maintenance history table {name}: {type(exc).__name__}: {exc}") from exc
    return [HistoryRow.from_record(record) for record in records]


def current_health(catalog: MetadataCatalog, tables: Sequence[str], workers: int) -> list[CurrentHealth]:
    return [CurrentHealth(r.table, r.figures, r.error) for r in read_health(catalog, tables, workers)]


def estimates(catalog: MetadataCatalog, tables: Sequence[str], settings: EstimateSettings, now: dt.datetime,
              workers: int) -> list[Estimates]:
    now_ms = int(now.timestamp() * 1000)

    def one(name: str) -> Estimates:
        try:
            expire_hours, retain_last, orphan_hours = settings.for_table(name, now)
        except (TypeError, ValueError) as exc:  # a policy maintain() itself would refuse
            return Estimates(name, 0, 0, error=f"its policy's expire_snapshots/remove_orphan_files arguments: {exc}")
        try:
            return estimate(name, catalog.load(name), now_ms, expire_hours, retain_last, orphan_hours)
        except Exception as exc:  # one table's unreadable metadata or location: the others go on
            return Estimates(name, expire_hours, retain_last, orphan_older_than_hours=orphan_hours,
                             error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")

    return concurrently(list(tables), one, workers)


def make_report(catalog: MetadataCatalog, history_table: str, days: float, now: dt.datetime,
                settings: EstimateSettings | None, workers: int = 8) -> Report:
    """Read the history of the last `days`, then the current health (and the estimates, unless
    `settings` is None) of every table it names that still exists."""
    since = now - dt.timedelta(days=days)
    rows = read_history(catalog, history_table, since)
    tables = sorted({r.table_name for r in rows})
    health = current_health(catalog, tables, workers)
    # A table dropped since its maintenance has no health and no estimate; the history still counts.
    readable = [h.table for h in health if h.figures is not None]
    found = estimates(catalog, readable, settings, now, workers) if settings is not None else []
    return build_report(rows, health, found, now=now, days=days, history_table=history_table)


@dataclass(frozen=True)
class Written:
    html: Path
    json: Path
    pngs: tuple[Path, ...]
    document: dict[str, object]


def write_report(report: Report, out: Path) -> Written:
    """report.html (self-contained), report.json and the charts as PNG files in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    drawn = render.charts(report)
    pngs = []
    for name, data in drawn.items():
        (out / name).write_bytes(data)
        pngs.append(out / name)
    document = render.to_json(report, sorted(drawn))
    (out / "report.json").write_text(json.dumps(document, indent=2) + "\n")
    (out / "report.html").write_text(render.to_html(report, drawn))
    return Written(out / "report.html", out / "report.json", tuple(pngs), document)
