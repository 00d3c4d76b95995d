"""A real commit conflict over a Spark Thrift Server, as a dbt Cloud job meets it.

dbt MERGEs the `conflict_events` model through the server while a second client connection
(its own Spark session in the same server, like a maintenance job) compacts the very files the
MERGE read. One source row of the MERGE passes a gate (tests/thrift/gate/, a Hive UDF): the
test waits until the MERGE, planned against its snapshot, has reached the gate, compacts, and
only then opens it, so the compaction always commits between the MERGE's planning and its
commit, however fast or slow the machine. Empirically (Spark 3.5.9, Iceberg 1.10.2) the MERGE
then fails at commit time with `ValidationException: Missing required files to delete` —
separate connections do not share a catalog instance, so the runtime-filtering abort
(`concurrent_modification`) does not occur.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.conflicts import classify
from dbt_iceberg_maint.runner import RunReport, run_dbt_with_retries
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT, DbtInvocation
from tests.expect import first
from tests.thrift.conftest import ThriftSql, running_statements

if TYPE_CHECKING:
    from dbt_iceberg_maint.runtime.thrift_server import ThriftServer
    from tests.thrift.conftest import ThriftDbtProject

pytestmark = pytest.mark.integration

GATE_EVENT_ID = 60  # a batch-2 row: the MERGE source waits at the gate on it
START_TIMEOUT_S = 300.0


def scenario_vars(batch: int) -> str:
    return f"{{thrift_conflict_scenario: true, batch: {batch}}}"


class MergeGate:
    """The gate one MERGE source row waits at (tests/thrift/gate/IcebergMaintThriftGate.java)."""

    def __init__(self, folder: Path, jar: Path) -> None:
        self.folder = folder
        self.jar = jar

    def scenario_vars(self, batch: int) -> str:
        return (f"{{thrift_conflict_scenario: true, batch: {batch}, conflict_gate_id: {GATE_EVENT_ID}, "
                f"thrift_gate_dir: '{self.folder}', thrift_gate_jar: '{self.jar}'}}")

    def wait_reached(self, merge: threading.Thread) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (self.folder / f"reached-{GATE_EVENT_ID}").exists():
            assert merge.is_alive(), "the MERGE ended before it reached the gate (see the dbt result)"
            assert time.monotonic() < deadline, f"the MERGE did not reach the gate within {START_TIMEOUT_S:.0f} s"
            time.sleep(0.1)

    def open(self) -> None:
        (self.folder / "open").touch()


@pytest.fixture
def merge_gate(tmp_path: Path, thrift_gate_jar: Path) -> MergeGate:
    return MergeGate(tmp_path, thrift_gate_jar)


def merge_is_executing(server: ThriftServer) -> bool:
    return any("merge into" in statement.lower() for statement in running_statements(server))


def data_files(sql: ThriftSql, table: str) -> set[str]:
    return {row[0].removeprefix("file:") for row in sql.rows(f"select file_path from {table}.files")}


def test_merge_over_thrift_loses_to_compaction_from_another_connection(
    thrift_server: ThriftServer, thrift_project: ThriftDbtProject, thrift_sql: ThriftSql, merge_gate: MergeGate
) -> None:
    target = thrift_project.table("conflict_events")
    thrift_project("seed", "--select", "raw_events")
    thrift_project("run", "--select", "conflict_events", "--vars", scenario_vars(1))
    # Three more small appends: every day partition the MERGE reads now has four small files.
    for round_ in (1, 2, 3):
        thrift_sql.execute(
            f"insert into {target} select event_id + {1000 * round_}, user_id, event_type, event_ts, "
            f"amount, loaded_batch from {target} where event_id <= 30"
        )
    files_before = data_files(thrift_sql, target)
    partitions = thrift_sql.scalar(f"select count(*) from {target}.partitions")
    assert len(files_before) == 4 * partitions
    assert thrift_sql.scalar(f"select count(*) from {target}") == 120
    assert not merge_is_executing(thrift_server)

    outcome: dict[str, DbtInvocation] = {}

    def merge() -> None:
        outcome["merge"] = thrift_project(
            "run", "--select", "conflict_events", "--vars", merge_gate.scenario_vars(2), expect_success=False
        )

    runner = threading.Thread(target=merge, name="dbt-merge")
    runner.start()
    maintenance = ThriftSql(thrift_server)  # the second connection: its own server session
    try:
        merge_gate.wait_reached(runner)
        assert merge_is_executing(thrift_server)
        compaction = maintenance.rows(
            f"CALL local.system.rewrite_data_files(table => '{target.removeprefix('local.')}', "
            "options => map('min-input-files', '2'))"
        )
        merge_still_running = runner.is_alive()
        snapshots_after_compaction = thrift_sql.rows(
            f"select snapshot_id, operation from {target}.snapshots order by committed_at"
        )
    finally:
        merge_gate.open()
        runner.join(timeout=300)
        maintenance.close()

    assert not runner.is_alive(), "the dbt MERGE over thrift did not end within 300 s"
    # The compaction really replaced the MERGE's input, and committed while the MERGE ran.
    rewritten, added = first(compaction, "the result row of the concurrent compaction")[:2]
    assert (rewritten, added) == (len(files_before), partitions), compaction
    assert merge_still_running
    assert snapshots_after_compaction[-1][1] == "replace"

    # dbt Cloud shows the run_results message; classify names the conflict from it.
    invocation = outcome["merge"]
    assert not invocation.success
    [node] = invocation.nodes
    assert node.name == "conflict_events" and node.status == "error"
    [result] = thrift_project.run_results()["results"]
    assert result["status"] == "error" and result["message"] == node.message
    verdict = classify(result["message"])
    assert verdict.kind == "missing_files_to_delete", verdict
    assert verdict.retryable
    assert verdict.exception_class == "org.apache.iceberg.exceptions.ValidationException"
    assert verdict.files and set(verdict.files) <= files_before - data_files(thrift_sql, target)

    # The MERGE committed nothing: the compaction is still the newest snapshot, no batch-2 row.
    assert thrift_sql.rows(f"select snapshot_id, operation from {target}.snapshots order by committed_at") == (
        snapshots_after_compaction
    )
    assert thrift_sql.rows(f"select count(*), max(loaded_batch) from {target}") == [(120, 1)]

    # The model is an idempotent MERGE: re-running it (what the runner would do) is safe.
    thrift_project("run", "--select", "conflict_events", "--vars", scenario_vars(2))
    assert thrift_sql.rows(f"select count(*), count(distinct event_id) from {target}") == [(150, 150)]


def test_runner_verifies_over_thrift_that_a_non_idempotent_merge_did_not_land(
    thrift_server: ThriftServer, thrift_project: ThriftDbtProject, thrift_sql: ThriftSql, merge_gate: MergeGate
) -> None:
    """Landed verification through the dbt connection: the runner reads the snapshot log over the
    Thrift Server (dbt ls + run-operation table_snapshots), proves the MERGE did not land and
    re-runs the model although it is declared not idempotent."""
    model = "conflict_events_unsafe"
    target = thrift_project.table(model)
    thrift_project("seed", "--select", "raw_events")
    thrift_project("run", "--select", model, "--vars", scenario_vars(1))
    for round_ in (1, 2, 3):
        thrift_sql.execute(
            f"insert into {target} select event_id + {1000 * round_}, user_id, event_type, event_ts, "
            f"amount, loaded_batch from {target} where event_id <= 30"
        )
    snapshots_before = [row[0] for row in thrift_sql.rows(f"select snapshot_id from {target}.snapshots "
                                                          "order by committed_at")]
    assert thrift_sql.scalar(f"select count(*) from {target}") == 120
    assert not merge_is_executing(thrift_server)

    reports: dict[str, RunReport] = {}

    def run() -> None:
        reports["run"] = run_dbt_with_retries(
            ["--select", model, "--vars", merge_gate.scenario_vars(2)], project_dir=INTEGRATION_PROJECT,
            env=thrift_project.env, backoff=lambda attempt: 0.0, sleep=lambda seconds: None)

    runner = threading.Thread(target=run, name="runner-merge")
    runner.start()
    maintenance = ThriftSql(thrift_server)
    try:
        merge_gate.wait_reached(runner)
        maintenance.rows(f"CALL local.system.rewrite_data_files(table => '{target.removeprefix('local.')}', "
                         "options => map('min-input-files', '2'))")
        merge_still_running = runner.is_alive()
    finally:
        merge_gate.open()
        runner.join(timeout=600)
        maintenance.close()
    assert not runner.is_alive(), "the runner over thrift did not end within 600 s"
    assert merge_still_running

    report = reports["run"]
    node = report.node(model)
    assert [a.status for a in node.attempts] == ["error", "success"], node.to_dict()
    assert first(node.attempts, f"an attempt of {model}").kind == "missing_files_to_delete"
    document = node.to_dict()
    assert document["write_landed"] is False
    assert document["landed_evidence"]["recorded_snapshot_id"] == snapshots_before[-1]
    assert "no data-changing snapshot of this application" in document["landed_evidence"]["why"]
    assert report.success and report.attempts == 2
    # One compaction, then one MERGE: batch 2 merged exactly once.
    operations = [row[0] for row in thrift_sql.rows(f"select operation from {target}.snapshots order by committed_at")]
    assert operations[len(snapshots_before):] == ["replace", "overwrite"]
    assert thrift_sql.rows(f"select count(*), count(distinct event_id) from {target}") == [(150, 150)]
