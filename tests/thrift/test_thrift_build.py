"""The integration project built over a real Spark Thrift Server (dbt-spark `method: thrift`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.thrift.conftest import ThriftDbtProject, ThriftSql

pytestmark = pytest.mark.integration


def test_project_builds_and_merges_over_thrift(thrift_project: ThriftDbtProject, thrift_sql: ThriftSql) -> None:
    build = thrift_project("build", batch=1)
    statuses = {node.name: node.status for node in build.nodes}
    assert statuses["events"] == statuses["event_log"] == statuses["user_summary"] == "success"
    assert all(status in {"success", "pass"} for status in statuses.values()), statuses
    events = thrift_project.table("events")
    assert thrift_sql.scalar(f"select count(*) from {events}") == 30

    thrift_project("run", "--select", "events", batch=2)

    operations = [row[0] for row in thrift_sql.rows(f"select operation from {events}.snapshots order by committed_at")]
    assert operations[-1] == "overwrite" and len(operations) >= 2  # a MERGE, not a create-or-replace
    assert thrift_sql.rows(f"select count(*), count(distinct event_id) from {events}") == [(60, 60)]


def test_a_staging_view_is_created_then_replaced_over_thrift(thrift_project: ThriftDbtProject,
                                                             thrift_sql: ThriftSql) -> None:
    """The server's catalog is the embedded one (a SQLite JDBC catalog): views work over thrift too."""
    for batch in (1, 2):
        build = thrift_project("build", "--select", "raw_events", "path:models/views_scenario",
                               "--vars", "{views_scenario: true}", batch=batch)
        assert {node.name: node.status for node in build.nodes} == dict.fromkeys(
            ("raw_events", "stg_events", "daily_amounts", "events_by_day"), "success")
    assert thrift_sql.scalar(f"select max(batch) from {thrift_project.table('stg_events')}") == 2
    by_day = thrift_project.table("events_by_day")
    assert thrift_sql.rows(f"select count(*) = count(distinct event_id) from {by_day}") == [(True,)]
    operations = [row[0] for row in thrift_sql.rows(f"select operation from {by_day}.snapshots order by committed_at")]
    assert len(operations) == 2 and operations[-1] == "overwrite"  # a MERGE on top of the first build
