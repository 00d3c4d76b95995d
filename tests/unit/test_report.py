"""The report's pure core: history rows -> figures, streaks, ranking, backlog, JSON shape, and a
self-contained HTML page; the estimates' set arithmetic (docs/report.md)."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest

from dbt_iceberg_maint.errors import HistoryError, UsageError
from dbt_iceberg_maint.policy import engine
from dbt_iceberg_maint.report import render
from dbt_iceberg_maint.report.core import WEIGHT_FAILED_STEP, WEIGHT_STREAK_RUN, build_report
from dbt_iceberg_maint.report.estimates import SnapshotNode, freed, orphans, retained_snapshots
from dbt_iceberg_maint.report.model import CurrentHealth, Estimates, HistoryRow, blocked_kind
from dbt_iceberg_maint.report.shell import EstimateSettings, history_table_name

NOW = dt.datetime(2026, 3, 10, 12, 0, tzinfo=dt.timezone.utc)


def row(run: str, hour: float, table: str, operation: str, status: str = "success", reason: str | None = "due",
        **record: Any) -> HistoryRow:
    started = NOW - dt.timedelta(hours=hour)
    return HistoryRow.from_record({
        "run_id": run, "path": "iceberg_maintenance", "table_name": table, "operation": operation, "status": status,
        "reason": reason, "started_at": started.replace(tzinfo=None), "ended_at": started + dt.timedelta(seconds=30),
        "duration_ms": record.pop("duration_ms", 0), **record})


def health(data_files: int, snapshots: int, small: int | None = None, delete_files: int = 0) -> str:
    figures = {"data_files": data_files, "snapshots": snapshots, "delete_files": delete_files, "snapshot_id": 1}
    if small is not None:
        figures["small_files"] = small
    return json.dumps(figures)


LEASE = "lease held by run-7 until 2026-03-10 10:00:00"
GATE = "cost gate: last maintained 1 h ago, less than min_interval_hours 6"
ROWS = [
    # run r1, three days ago: events compacted, expired; orders' compaction failed
    row("r1", 72, "a.events", "rewrite_data_files", output=json.dumps(
        {"rewritten_data_files_count": 40, "added_data_files_count": 4, "rewritten_bytes_count": 4000}),
        health_before=health(44, 6, 40), health_after=health(8, 7, 4), duration_ms=1500),
    row("r1", 71.9, "a.events", "expire_snapshots", output=json.dumps(
        {"deleted_data_files_count": 40, "deleted_manifest_lists_count": 5}),
        health_before=health(8, 7, 4), health_after=health(8, 2, 4), duration_ms=500),
    row("r1", 71.8, "a.orders", "rewrite_data_files", "failed", "GC is disabled"),
    # run r2: orders blocked by another job's lease; events not due
    row("r2", 48, "a.orders", "rewrite_data_files", "skipped", LEASE),
    row("r2", 48, "a.events", "rewrite_data_files", "skipped", "12 small files (< min_input_files 5)"),
    # run r3 (the last): orders skipped by the cost gate; events' manifests rewritten, its orphans
    # removed; a lease skip of events' expiry that a replay in the same run finished
    row("r3", 2, "a.orders", "rewrite_data_files", "skipped", GATE),
    row("r3", 2, "a.events", "rewrite_manifests", output=json.dumps({"rewritten_manifests_count": 3})),
    row("r3", 1.9, "a.events", "remove_orphan_files", output=json.dumps({"orphan_file_count": 2})),
    row("r3", 1.8, "a.events", "expire_snapshots", "skipped", LEASE),
    row("r3", 1.5, "a.events", "expire_snapshots", output="{}"),
    # outside a 7-day window
    row("old", 24 * 9, "a.events", "rewrite_data_files", "failed", "boom"),
]
HEALTH = [CurrentHealth("a.events", {"data_files": 9, "small_files": 5, "delete_files": 0, "snapshots": 3,
                                     "data_manifests": 2}),
          CurrentHealth("a.orders", {"data_files": 30, "small_files": 28, "delete_files": 2, "snapshots": 12})]
ESTIMATES = [Estimates("a.events", 168, 5, 1, 10, 1 << 20, 72, 2, 2048)]


@pytest.fixture
def report() -> Any:
    return build_report(ROWS, HEALTH, ESTIMATES, now=NOW, days=7, history_table="a.iceberg_maint_history")


def test_runs_figures_equal_the_rows(report: Any) -> None:
    assert [r.run_id for r in report.runs] == ["r3", "r2", "r1"] and report.rows == len(ROWS) - 1
    r1 = report.runs[2]
    assert (r1.steps, r1.succeeded, r1.failed, r1.tables, r1.procedure_ms) == (3, 2, 1, 2, 2000)
    assert (r1.data_files_rewritten, r1.data_files_added, r1.bytes_compacted) == (40, 4, 4000)
    assert (r1.data_files_expired, r1.snapshots_expired, r1.files_removed) == (40, 5, 36 + 40)
    r3 = report.runs[0]
    assert (r3.skipped_for_lease, r3.skipped_by_cost_gate, r3.orphan_files_removed, r3.manifests_rewritten) == (
        1, 1, 2, 3)
    assert report.last_run_id == "r3"


def test_streaks_count_bad_runs_in_a_row_as_the_streak_test_does(report: Any) -> None:
    orders = next(t for t in report.tables if t.table == "a.orders")
    [streak] = orders.streaks
    assert (streak.operation, streak.runs_in_a_row, streak.kinds) == (
        "rewrite_data_files", 3, ("cost_gate", "failed", "lease"))
    assert (streak.last_run_id, streak.last_reason) == ("r3", GATE)
    events = next(t for t in report.tables if t.table == "a.events")
    assert events.streaks == ()  # the replay finished the blocked expiry; "not due" is a good run
    assert [blocked_kind("skipped", r) for r in (LEASE, "lease lost: x", GATE, "not due")] == [
        "lease", "lease", "cost_gate", None]


def test_worst_tables_first_by_the_documented_score(report: Any) -> None:
    assert [t.table for t in report.tables] == ["a.orders", "a.events"]
    orders = report.tables[0]
    assert dict(orders.score_parts) == {"small_files": 28, "delete_files": 2, "snapshots": 12,
                                        "failed_steps": WEIGHT_FAILED_STEP, "streak": 3 * WEIGHT_STREAK_RUN}
    assert orders.score == sum(orders.score_parts.values()) and orders.current_source == "now"


def test_backlog_is_what_the_last_run_left(report: Any) -> None:
    assert [(b.table, b.operation, b.kind) for b in report.backlog] == [("a.orders", "rewrite_data_files",
                                                                          "cost_gate")]


def test_trend_from_health_before_and_after_then_now(report: Any) -> None:
    events = next(t for t in report.tables if t.table == "a.events")
    assert [(p.source, p.figures["data_files"], p.figures["snapshots"]) for p in events.trend] == [
        ("before", 44, 6), ("after", 8, 7), ("after", 8, 2), ("now", 9, 3)]  # equal neighbours left out
    assert events.trend[0].figures["small_files"] == 40 and events.trend[0].figures["data_manifests"] is None


def test_without_current_health_the_last_figures_of_the_history_count() -> None:
    report = build_report(ROWS[:2], [CurrentHealth("a.events", error="gone")], [], now=NOW, days=7,
                          history_table="h")
    [events] = report.tables
    assert events.current_source == "history" and events.current["snapshots"] == 2
    assert events.health_error == "gone"


def test_json_has_the_same_figures(report: Any) -> None:
    document = json.loads(json.dumps(render.to_json(report, ["ranking.png"])))
    assert set(document) == {"generated_at", "since", "days", "history_table", "rows", "runs", "tables", "backlog",
                             "last_run_id", "totals", "charts"}
    assert document["tables"][0]["rank"] == 1 and document["tables"][0]["table"] == "a.orders"
    assert document["runs"][2]["files_removed"] == 76 and document["runs"][2]["bytes_compacted"] == 4000
    events = document["tables"][1]
    assert events["estimates"]["expire_bytes"] == 1 << 20 and events["streaks"] == []
    assert events["trend"][0] == {"at": "2026-03-07T12:00:00+00:00", "source": "before", "figures": {
        "data_files": 44, "small_files": 40, "delete_files": 0, "snapshots": 6, "data_manifests": None}}
    assert document["totals"]["failed_steps"] == 1 and document["totals"]["backlog_steps"] == 1
    assert document["totals"]["expire_bytes_estimate"] == 1 << 20


def test_html_is_self_contained(report: Any) -> None:
    drawn = render.charts(report)
    assert {"ranking.png", "runs.png", "trend_a.events.png", "trend_a.orders.png"} <= set(drawn)
    assert all(data.startswith(b"\x89PNG") for data in drawn.values())
    page = render.to_html(report, drawn)
    assert page.count('src="data:image/png;base64,') == len(drawn)
    without_images = re.sub(r'src="data:image/png;base64,[^"]*"', "", page)
    assert "http" not in without_images and "<script" not in without_images and "src=" not in without_images
    assert "<link" not in page and "@import" not in page and "url(" not in page
    for text in ("a.orders", "Worst tables first", "Backlog of the last run", "Failure and skip streaks", GATE):
        assert text in page


def test_a_bad_row_is_a_history_error() -> None:
    with pytest.raises(HistoryError, match="column health_before is not JSON"):
        row("r", 1, "t", "expire_snapshots", health_before="{nope")
    with pytest.raises(HistoryError, match="column run_id is null"):
        HistoryRow.from_record({"table_name": "t", "operation": "x", "status": "s", "started_at": NOW})


def test_expiring_snapshots_as_iceberg_decides() -> None:
    hour = 3_600_000
    # main: 1 <- 2 <- 3 <- 4 (head); 5 on no branch (old); 6 tagged (old)
    nodes = [SnapshotNode(1, None, 0), SnapshotNode(2, 1, hour), SnapshotNode(3, 2, 10 * hour),
             SnapshotNode(4, 3, 11 * hour), SnapshotNode(5, None, 0), SnapshotNode(6, None, 0)]
    refs = [(4, "branch"), (6, "tag")]
    assert retained_snapshots(nodes, refs, cutoff_ms=5 * hour, retain_last=1) == {4, 3, 6}
    assert retained_snapshots(nodes, refs, cutoff_ms=5 * hour, retain_last=3) == {4, 3, 2, 6}
    assert retained_snapshots(nodes, refs, cutoff_ms=0, retain_last=1) == {1, 2, 3, 4, 5, 6}
    assert freed({"a": 10, "b": 20, "m": 5}, ["b"]) == (2, 15)


def test_orphans_are_unreferenced_old_visible_files() -> None:
    listed = {"/w/t/data/a.parquet": (100, 0), "/w/t/data/b.parquet": (200, 0), "/w/t/data/new.parquet": (50, 99),
              "/w/t/data/.a.parquet.crc": (12, 0), "/w/t/metadata/v1.metadata.json": (7, 0)}
    referenced = ["file:/w/t/data/a.parquet", "file:///w/t/metadata/v1.metadata.json"]
    assert orphans(listed, referenced, cutoff_ms=10, root="/w/t") == (1, 200)


def test_history_table_name(tmp_path: Path) -> None:
    (tmp_path / "dbt_project.yml").write_text("name: p\nprofile: p\nvars:\n  dbt_iceberg_maint_history_table: h\n")
    (tmp_path / "profiles.yml").write_text(
        "p:\n  target: dev\n  outputs:\n    dev:\n      type: spark\n      schema: \"{{ env_var('S', 'an') }}\"\n"
        "      password: \"{{ env_var('UNSET_PASSWORD') }}\"\n")
    assert history_table_name(None, tmp_path, tmp_path, None, None) == "an.h"
    assert history_table_name(None, tmp_path, tmp_path, None, "{dbt_iceberg_maint_history_schema: ops}") == "ops.h"
    assert history_table_name("x.y", tmp_path, None, None, None) == "x.y"
    with pytest.raises(UsageError, match="--history-table"):
        history_table_name(None, tmp_path, None, None, None)


def test_estimate_settings_come_from_each_tables_policy_unless_given() -> None:
    now = dt.datetime(2026, 11, 27, 12, tzinfo=dt.timezone.utc)
    policies = {
        "analytics.events": {**engine.resolved({"expire_snapshots": {"older_than_hours": 1, "retain_last": 2},
                                                "remove_orphan_files": {"older_than_hours": 96}})},
        "analytics.audit": engine.resolved({"expire_snapshots": {"older_than": "2026-11-26 12:00:00"}}),
    }
    settings = EstimateSettings(policies=policies)
    assert settings.for_table("analytics.events", now) == (1, 2, 96)
    assert settings.for_table("lake.ANALYTICS.events", now) == (1, 2, 96)  # a catalog-qualified name
    assert settings.for_table("analytics.audit", now) == (24, 5, 72)  # an absolute older_than, from now
    assert settings.for_table("analytics.undeclared", now) == (168, 5, 72)  # the package defaults
    given = EstimateSettings(expire_retain_last=9, orphan_older_than_hours=30, policies=policies)
    assert given.for_table("analytics.events", now) == (1, 9, 30)
