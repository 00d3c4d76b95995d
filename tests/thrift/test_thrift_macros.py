"""Every maintenance macro over a real Spark Thrift Server: the dbt Cloud path, SQL only.

dbt connects with dbt-spark `method: thrift`; the test reads table state back through the
server with its own PyHive connection. Macros are called the way a dbt Cloud job calls them:
`dbt run-operation dbt_iceberg_maint.<macro> --args ...` and model post-hooks.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dbt_iceberg_maint.maintenance.results import MaintenanceResult, parse_result_lines
from dbt_iceberg_maint.runtime.invoke import DbtInvocation

if TYPE_CHECKING:
    from dbt_iceberg_maint.runtime.thrift_server import ThriftServer
    from tests.thrift.conftest import ThriftDbtProject, ThriftSql

pytestmark = pytest.mark.integration

DAY_S = 24 * 3600


def run_operation(
    project: ThriftDbtProject, macro: str, expect_success: bool = True, **kwargs: Any
) -> tuple[DbtInvocation, list[MaintenanceResult]]:
    invocation = project("run-operation", macro, "--args", json.dumps(kwargs), expect_success=expect_success)
    return invocation, list(parse_result_lines(invocation.log_messages))


def snapshots(sql: ThriftSql, table: str) -> list[tuple[int, str]]:
    return sql.rows(f"select snapshot_id, operation from {table}.snapshots order by committed_at")


def fingerprint(sql: ThriftSql, table: str) -> tuple[int, int]:
    [row] = sql.rows(f"select count(*), sum(hash(*)) from {table}")
    return row[0], row[1]


def properties(sql: ThriftSql, table: str) -> dict[str, str]:
    return dict(sql.rows(f"show tblproperties {table}"))


def small_files_table(sql: ThriftSql, table: str, inserts: int, parts: tuple[str, ...]) -> None:
    sql.execute(f"create or replace table {table} (id bigint, part string) using iceberg partitioned by (part)")
    for i in range(inserts):
        sql.execute(f"insert into {table} values " + ", ".join(f"({i * 10 + j}, '{p}')" for j, p in enumerate(parts)))


@pytest.fixture(scope="module")
def built(thrift_project: ThriftDbtProject) -> ThriftDbtProject:
    """Seeds and the append model over thrift, two batches: small files and two manifests."""
    thrift_project("seed")
    thrift_project("run", "--select", "event_log", batch=1)
    thrift_project("run", "--select", "event_log", batch=2)
    return thrift_project


def test_apply_table_properties_post_hook_reconciles_drift(built: ThriftDbtProject, thrift_sql: ThriftSql) -> None:
    events = built.table("events")
    built("run", "--select", "events", batch=1)
    declared = {
        "write.delete.isolation-level": "serializable",
        "write.update.isolation-level": "snapshot",
        "write.merge.isolation-level": "snapshot",
        "commit.retry.num-retries": "10",
        "commit.retry.min-wait-ms": "100",
        "write.metadata.previous-versions-max": "50",
    }
    assert declared.items() <= properties(thrift_sql, events).items()

    # Someone changes the table behind dbt's back; the next run's post-hook puts it back.
    thrift_sql.execute(f"alter table {events} set tblproperties ('write.merge.isolation-level'='serializable', "
                       "'commit.retry.num-retries'='2')")
    run = built("run", "--select", "events", batch=2)
    assert declared.items() <= properties(thrift_sql, events).items()
    [result] = [r for r in parse_result_lines(run.log_messages) if r.operation == "apply_table_properties"]
    assert result.status == "success" and result.table.endswith(f"{built.schema}.events")
    assert "write.merge.isolation-level" in (result.sql or "") and "commit.retry.num-retries" in (result.sql or "")
    # The MERGE itself happened: batch 2's new rows and corrections.
    assert thrift_sql.rows(f"select count(*), count(distinct event_id) from {events}") == [(60, 60)]
    assert snapshots(thrift_sql, events)[-1][1] == "overwrite"


def test_rewrite_data_files_and_rewrite_manifests(built: ThriftDbtProject, thrift_sql: ThriftSql) -> None:
    table = f"local.{built.schema}.compact"
    small_files_table(thrift_sql, table, 6, ("a", "b"))
    before = fingerprint(thrift_sql, table)
    assert thrift_sql.scalar(f"select count(*) from {table}.data_files") == 12

    _, [result] = run_operation(built, "dbt_iceberg_maint.rewrite_data_files", relation=f"{built.schema}.compact",
                                where="part = 'a'", options={"min-input-files": "2"})
    assert (result.operation, result.status) == ("rewrite_data_files", "success")
    assert result.metrics["rewritten_data_files_count"] == 6 and result.metrics["added_data_files_count"] == 1
    files = dict(thrift_sql.rows(f"select partition.part, count(*) from {table}.data_files group by 1"))
    assert files == {"a": 1, "b": 6}  # only the `where` partition was compacted
    assert fingerprint(thrift_sql, table) == before
    assert snapshots(thrift_sql, table)[-1][1] == "replace"

    manifests = thrift_sql.scalar(f"select count(*) from {table}.manifests")
    assert manifests > 1
    _, [result] = run_operation(built, "dbt_iceberg_maint.rewrite_manifests", relation=f"{built.schema}.compact")
    assert (result.operation, result.status) == ("rewrite_manifests", "success")
    assert result.metrics["rewritten_manifests_count"] == manifests
    assert result.metrics["added_manifests_count"] == 1
    assert thrift_sql.scalar(f"select count(*) from {table}.manifests") == 1
    assert fingerprint(thrift_sql, table) == before


def test_expire_snapshots(built: ThriftDbtProject, thrift_sql: ThriftSql) -> None:
    table = f"local.{built.schema}.expiring"
    small_files_table(thrift_sql, table, 4, ("a",))
    history = snapshots(thrift_sql, table)
    assert len(history) == 4  # one per append
    before = fingerprint(thrift_sql, table)
    # An absolute cut-off just after the newest commit: every snapshot is older, however fast dbt ran.
    cut_off = thrift_sql.scalar(f"select date_format(max(committed_at) + interval 1 millisecond, "
                                f"'yyyy-MM-dd HH:mm:ss.SSS') from {table}.snapshots")

    _, [result] = run_operation(built, "dbt_iceberg_maint.expire_snapshots", relation=f"{built.schema}.expiring",
                                older_than=cut_off, retain_last=1)
    assert (result.operation, result.status) == ("expire_snapshots", "success")
    assert result.metrics["deleted_manifest_lists_count"] == len(history) - 1
    assert snapshots(thrift_sql, table) == history[-1:]
    assert fingerprint(thrift_sql, table) == before


def test_remove_orphan_files_dry_run_then_real_and_refuses_young(
    built: ThriftDbtProject, thrift_sql: ThriftSql, thrift_server: ThriftServer
) -> None:
    table = f"local.{built.schema}.orphans"
    small_files_table(thrift_sql, table, 1, ("a",))
    data_dir = Path(thrift_server.spec.catalog.warehouse) / built.schema / "orphans" / "data"
    orphan = data_dir / "part=a" / "left-behind-by-a-failed-write.parquet"
    orphan.write_bytes(b"not referenced by any snapshot")
    three_days_ago = time.time() - 3 * DAY_S
    os.utime(orphan, (three_days_ago, three_days_ago))
    snapshot = snapshots(thrift_sql, table)[-1]
    relation = f"{built.schema}.orphans"

    refused, results = run_operation(built, "dbt_iceberg_maint.remove_orphan_files", expect_success=False,
                                     relation=relation, older_than_hours=1)
    assert not refused.success and results == []
    assert "`older_than_hours` is 1; it must be at least 24" in "\n".join(refused.log_messages)
    assert orphan.exists()

    _, [dry] = run_operation(built, "dbt_iceberg_maint.remove_orphan_files", relation=relation,
                             older_than_hours=48, dry_run=True)
    assert dry.status == "dry_run" and dry.metrics["orphan_file_count"] == 1
    assert [Path(p.removeprefix("file:")) for p in dry.metrics["orphan_file_location"]] == [orphan]
    assert orphan.exists()

    _, [real] = run_operation(built, "dbt_iceberg_maint.remove_orphan_files", relation=relation, older_than_hours=48)
    assert real.status == "success" and real.metrics["orphan_file_count"] == 1
    assert not orphan.exists()
    assert snapshots(thrift_sql, table)[-1] == snapshot
    assert thrift_sql.scalar(f"select count(*) from {table}") == 1


def test_rewrite_position_delete_files(built: ThriftDbtProject, thrift_sql: ThriftSql) -> None:
    table = f"local.{built.schema}.mor"
    thrift_sql.execute(
        f"create or replace table {table} (id bigint, part string) using iceberg partitioned by (part) "
        "tblproperties ('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    # Three data files, one delete on each: three position delete files (a second delete on
    # the same data file would make Iceberg 1.10 merge it with the file's earlier deletes).
    for low in (0, 100, 200):
        thrift_sql.execute(f"insert into {table} select id, 'a' from range({low}, {low + 100})")
    for low in (0, 100, 200):
        thrift_sql.execute(f"delete from {table} where id >= {low} and id < {low + 5}")
    assert thrift_sql.scalar(f"select count(*) from {table}.delete_files") == 3
    before = fingerprint(thrift_sql, table)

    delete_files = {row[0] for row in thrift_sql.rows(f"select file_path from {table}.delete_files")}

    _, [result] = run_operation(built, "dbt_iceberg_maint.rewrite_position_delete_files",
                                relation=f"{built.schema}.mor", options={"min-input-files": "2"})
    assert (result.operation, result.status) == ("rewrite_position_delete_files", "success")
    assert result.metrics["rewritten_delete_files_count"] == 3
    # File-scoped deletes are rewritten per data file: three new delete files replace the old.
    rewritten = {row[0] for row in thrift_sql.rows(f"select file_path from {table}.delete_files")}
    assert len(rewritten) == result.metrics["added_delete_files_count"] == 3 and not rewritten & delete_files
    assert snapshots(thrift_sql, table)[-1][1] == "replace"
    assert fingerprint(thrift_sql, table) == before == (285, before[1])


def test_iceberg_maintenance_run_operation_dry_run_then_real(built: ThriftDbtProject, thrift_sql: ThriftSql) -> None:
    event_log = built.table("event_log")
    history = snapshots(thrift_sql, event_log)

    dry, results = run_operation(built, "dbt_iceberg_maint.iceberg_maintenance", dry_run=True)
    assert dry.success
    by_table = {name: [r for r in results if r.table.endswith(f".{name}")] for name in ("event_log", "user_summary")}
    assert [r.operation for r in by_table["event_log"]] == [
        "rewrite_data_files", "expire_snapshots", "remove_orphan_files", "rewrite_manifests"
    ]
    assert {r.status for r in results} <= {"dry_run", "skipped"}
    compaction = by_table["event_log"][0]
    assert compaction.status == "dry_run" and (compaction.sql or "").startswith("CALL ")
    assert {r.status for r in by_table["user_summary"]} == {"skipped"}  # its policy's kill switch
    assert any("iceberg_maintenance summary" in m for m in dry.log_messages)
    assert snapshots(thrift_sql, event_log) == history  # nothing ran

    manifests = thrift_sql.scalar(f"select count(*) from {event_log}.manifests")
    assert manifests > 1
    before = fingerprint(thrift_sql, event_log)
    real, [result] = run_operation(built, "dbt_iceberg_maint.iceberg_maintenance", select="event_log",
                                   operations=["rewrite_manifests"], force=True)
    assert real.success
    assert (result.operation, result.status) == ("rewrite_manifests", "success")
    assert result.metrics["rewritten_manifests_count"] == manifests
    assert thrift_sql.scalar(f"select count(*) from {event_log}.manifests") == 1
    assert fingerprint(thrift_sql, event_log) == before

    # Unforced, as a nightly job runs it: the model's policy decides, thresholds included.
    for event_id in (9001, 9002):  # two more small files in one partition: compaction is due
        thrift_sql.execute(f"insert into {event_log} values ({event_id}, 'view', date'2026-11-01', 1.00, 9)")
    before = fingerprint(thrift_sql, event_log)
    files = thrift_sql.scalar(f"select count(*) from {event_log}.data_files")
    nightly, results = run_operation(built, "dbt_iceberg_maint.iceberg_maintenance", select="event_log")
    assert nightly.success
    done = {r.operation: r for r in results}
    assert list(done) == ["rewrite_data_files", "expire_snapshots", "remove_orphan_files", "rewrite_manifests"]
    assert done["rewrite_data_files"].status == "success", done["rewrite_data_files"].reason
    assert done["rewrite_data_files"].reason.startswith("a partition has ")
    assert done["rewrite_data_files"].metrics["rewritten_data_files_count"] >= 2
    # The table is minutes old: no file in it can be older than the orphan window, nothing is listed.
    assert (done["expire_snapshots"].status, done["remove_orphan_files"].status) == ("skipped", "skipped")
    assert "younger than older_than_hours" in done["remove_orphan_files"].reason
    assert "not older than 1 h" in done["expire_snapshots"].reason  # the policy keeps 1 h of history
    assert thrift_sql.scalar(f"select count(*) from {event_log}.data_files") < files
    assert fingerprint(thrift_sql, event_log) == before


def test_maintain_post_hook_compacts_the_model_it_follows(built: ThriftDbtProject, thrift_sql: ThriftSql) -> None:
    table = built.table("maintained_log")
    first = built("run", "--select", "maintained_log", "--vars", "{thrift_maintain_scenario: true, batch: 1}")
    # One file per partition after the first append: nothing is due yet, every operation says why.
    results = parse_result_lines(first.log_messages)
    assert [r.operation for r in results] == [
        "rewrite_data_files",
        "expire_snapshots",
        "remove_orphan_files",
        "rewrite_manifests",
    ]
    assert results[0].status == "skipped" and results[0].reason
    partitions = thrift_sql.scalar(f"select count(*) from {table}.partitions")
    files_before = thrift_sql.scalar(f"select count(*) from {table}.data_files")

    second = built("run", "--select", "maintained_log", "--vars", "{thrift_maintain_scenario: true, batch: 2}")
    results = parse_result_lines(second.log_messages)
    assert [r.operation for r in results] == [
        "rewrite_data_files",
        "expire_snapshots",
        "remove_orphan_files",
        "rewrite_manifests",
    ]
    compaction = results[0]
    assert compaction.status == "success", compaction
    assert compaction.metrics["rewritten_data_files_count"] > files_before - partitions
    assert all(r.status in {"success", "skipped"} for r in results), results
    # Batch 2's append landed, then the post-hook compacted: one file per partition.
    partitions = thrift_sql.scalar(f"select count(*) from {table}.partitions")
    assert thrift_sql.scalar(f"select count(*) from {table}.data_files") == partitions
    assert thrift_sql.scalar(f"select count(*) from {table}") == 30 + 35
    # First build, batch 2's append, then the post-hook's compaction and manifest rewrite.
    assert results[3].status == "success" and results[3].metrics["added_manifests_count"] == 1
    assert [operation for _, operation in snapshots(thrift_sql, table)][1:] == ["append", "replace", "replace"]


def test_iceberg_healthy_generic_test_over_thrift(built: ThriftDbtProject, thrift_sql: ThriftSql) -> None:
    """The generic test reads health with SQL over the dbt connection: dbt Cloud's path."""
    scenario = "{health_scenario: true}"
    built("run", "--select", "health_events", "--vars", scenario)
    table = built.table("health_events")
    for batch in (2, 3):
        thrift_sql.execute(f"insert into {table} select /*+ COALESCE(1) */ id + {batch * 1000}, {batch} from range(20)")

    tested = built("test", "--select", "health_deep", "health_source", "health_missing_table", "--vars", scenario,
                   expect_success=False)

    nodes = {node.name: node for node in tested.nodes}
    assert {name: node.status for name, node in nodes.items()} == {
        "health_deep": "fail", "health_source": "pass", "health_missing_table": "fail"}
    # Three appends: three small files and three data manifests, each above its threshold of 2;
    # the table is minutes old, so days since compaction passes.
    assert nodes["health_deep"].message == "Got 2 results, configured to fail if != 0"
    assert nodes["health_missing_table"].message == "Got 1 result, configured to fail if != 0"
