"""Every conflict kind Iceberg 1.10 produces through Spark, for real, classified from dbt's own text.

One dbt invocation (through the runner) runs one MERGE model per kind
(integration_tests/models/conflict_kinds). Each model's source holds at the conflict gate
until the concurrent commit that makes it lose has landed, so every outcome is deterministic:

- other jobs' commits come from a separate Spark session (its own catalog instance, cache off);
- `concurrent_modification` comes from a compaction on the *same* session (several dbt threads);
- `commit_failed` is a real lost catalog race: the Hadoop catalog's metadata-version lock is held
  while another writer commits that version, so the MERGE's rename finds it taken; the table has
  `commit.retry.num-retries = 0`, so Iceberg does not retry it itself.

The runner re-runs every one of them (all are retryable and the models idempotent) and the
tables end as one clean run leaves them. docs/conflict-kinds-evidence.md lists the kinds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from dbt_iceberg_maint.cli import main
from dbt_iceberg_maint.conflicts import classify
from dbt_iceberg_maint.runner import RunReport, run_dbt_with_retries
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT
from tests.expect import first
from tests.integration.concurrency import (
    HADOOP_CATALOG,
    RACE_CATALOG,
    BackgroundAction,
    join_all,
    lose_catalog_race,
    other_job,
    when,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import ConflictGate, DbtProject

pytestmark = pytest.mark.integration
# The lost commit race staged here is the Hadoop catalog's (tests/integration/concurrency.py).
CATALOG_PROPERTIES = HADOOP_CATALOG

VALIDATION = "org.apache.iceberg.exceptions.ValidationException"
EXPECTED = {
    # model: (kind, exception class)
    "kind_added_files": ("conflicting_added_files", VALIDATION),
    "kind_new_delete": ("new_delete_for_replaced_file", VALIDATION),
    "kind_missing_data": ("missing_data_files", VALIDATION),
    "kind_conflicting_deletes": ("conflicting_delete_files", VALIDATION),
    "kind_concurrent_dv": ("concurrent_dv", VALIDATION),
    "kind_concurrent_modification": ("concurrent_modification", "java.lang.IllegalStateException"),
    "kind_history_broken": ("history_broken", VALIDATION),
    "kind_commit_failed": ("commit_failed", "org.apache.iceberg.exceptions.CommitFailedException"),
}
MERGES = tuple(m for m in EXPECTED if m != "kind_concurrent_dv")
TIMEOUT_SECONDS = 180.0


@dataclass(frozen=True)
class Outcome:
    report: RunReport
    actions: dict[str, BackgroundAction]
    raw_rows: int
    log: Path  # this module's own dbt.log (text format)


def metadata_dir(warehouse: Path, schema: str, table: str) -> Path:
    return warehouse.resolve() / schema / table / "metadata"


@pytest.fixture(scope="module")
def outcome(
    spark: SparkSession,
    warehouse: Path,
    dbt_project: DbtProject,
    conflict_gate: ConflictGate,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Outcome]:
    vars_ = "{conflict_kinds: true, batch: %d}"
    dbt_project("build", "--select", "raw_events", "path:models/conflict_kinds", "--vars", vars_ % 1)
    job = other_job(spark, warehouse, tmp_path_factory.mktemp("race"))
    schema = dbt_project.schema

    def local(model: str) -> str:
        return f"local.{schema}.{model}"

    def sql(session: SparkSession, *statements: str) -> Callable[[], None]:
        def run() -> None:
            for statement in statements:
                session.sql(statement).collect()

        return run

    compaction = (
        "CALL local.system.rewrite_data_files(table => '{schema}.{model}', "
        "options => map('min-input-files', '1', 'rewrite-all', 'true'))"
    )
    append_one = "insert into {t} select event_id + 1000000, user_id, event_type, event_ts, amount, 0 from {t} limit 1"
    expire_before = (datetime.now(timezone.utc) + timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S")
    plans: dict[str, tuple[SparkSession, tuple[str, ...]]] = {
        "kind_added_files": (job, (append_one.format(t=local("kind_added_files")),)),
        "kind_new_delete": (job, (f"delete from {local('kind_new_delete')} where event_id % 5 = 0",)),
        "kind_missing_data": (job, (compaction.format(schema=schema, model="kind_missing_data"),)),
        "kind_conflicting_deletes": (job, (f"delete from {local('kind_conflicting_deletes')} where event_id % 5 = 0",)),
        "kind_concurrent_dv": (job, (f"delete from {local('kind_concurrent_dv')} where event_id % 2 = 0",)),
        # The same session as dbt: its catalog instance sees the compaction at once.
        "kind_concurrent_modification": (
            spark, (compaction.format(schema=schema, model="kind_concurrent_modification"),)),
        # Two commits, then both they and the MERGE's starting snapshot expire: the chain from the
        # current snapshot back to the starting one is broken (one expired commit is not enough,
        # Iceberg still finds the start as the parent of the oldest snapshot it knows).
        "kind_history_broken": (job, (
            append_one.format(t=local("kind_history_broken")),
            append_one.format(t=local("kind_history_broken")).replace("1000000", "2000000"),
            # Any time after the MERGE's starting snapshot: everything but the newest snapshot goes.
            f"CALL local.system.expire_snapshots(table => '{schema}.kind_history_broken', "
            f"older_than => TIMESTAMP '{expire_before}', retain_last => 1)",
        )),
    }
    actions: dict[str, BackgroundAction] = {}
    for model, (session, statements) in plans.items():
        conflict_gate.arm(model)
        reached = conflict_gate.directory / f"{model}.reached"
        done = conflict_gate.directory / f"{model}.done"
        actions[model] = when(
            reached.exists, sql(session, *statements), name=model, waits_for=f"conflict gate {model!r} reached",
            timeout_seconds=TIMEOUT_SECONDS, finally_=done.touch,
        )

    # commit_failed: another writer takes the metadata version the MERGE is about to write.
    actions["kind_commit_failed"] = lose_catalog_race(
        spark, job, metadata_dir(warehouse, schema, "kind_commit_failed"),
        f"{RACE_CATALOG}.{schema}.kind_commit_failed", name="kind_commit_failed", timeout_seconds=TIMEOUT_SECONDS)
    logs = tmp_path_factory.mktemp("kinds_logs")
    try:
        report = run_dbt_with_retries(
            ["--select", "path:models/conflict_kinds", "--vars", vars_ % 2, "--log-path", str(logs)],
            command="run",
            max_attempts=2,
            project_dir=INTEGRATION_PROJECT,
            env=dbt_project.env,
            backoff=lambda _attempt: 0.0,
            sleep=lambda _seconds: None,
        )
    finally:
        join_all(actions.values(), TIMEOUT_SECONDS)
        for model in plans:
            conflict_gate.disarm(model)
    raw = spark.sql(f"select count(distinct event_id) from {local('raw_events')} where batch <= 2").collect()[0][0]
    yield Outcome(report, actions, raw, logs / "dbt.log")


def test_every_concurrent_commit_really_ran(outcome: Outcome) -> None:
    for action in outcome.actions.values():
        action.check()


@pytest.mark.parametrize("model", list(EXPECTED))
def test_kind_is_produced_by_real_iceberg_and_classified_from_dbt_text(outcome: Outcome, model: str) -> None:
    kind, exception_class = EXPECTED[model]
    node = outcome.report.node(model)
    attempt = first(node.attempts, f"an attempt of {model}")
    assert attempt.status == "error", (model, attempt)
    verdict = classify(attempt.message or "")
    assert (verdict.kind, verdict.exception_class, verdict.retryable) == (kind, exception_class, True), (
        model, (attempt.message or "")[:800])
    # The runner re-ran it (retryable, idempotent) and the re-run succeeded.
    assert [a.kind for a in node.attempts] == [kind, None]
    assert node.attempts[1].status == "success"


def test_commit_failed_names_the_version_another_writer_took(outcome: Outcome, dbt_project: DbtProject) -> None:
    attempts = outcome.report.node("kind_commit_failed").attempts
    message = first(attempts, "an attempt of kind_commit_failed").message or ""
    assert "Version " in message and " already exists: " in message
    assert f"{os.sep}{dbt_project.schema}{os.sep}kind_commit_failed{os.sep}metadata{os.sep}v" in message


def test_re_runs_leave_what_one_clean_run_leaves(
    outcome: Outcome, spark: SparkSession, dbt_project: DbtProject
) -> None:
    assert outcome.report.success and outcome.report.attempts == 2
    for model in MERGES:
        row = spark.sql(
            f"select count(*) as n, count(distinct event_id) as ids from {dbt_project.table(model)} "
            "where loaded_batch = 2"
        ).collect()[0]
        # Every raw row up to batch 2, merged once; nothing the concurrent deletes removed is missing.
        assert row["n"] == row["ids"] == outcome.raw_rows, model
    # The DV table: the post-hook deleted the odd ids of a fresh copy, the rest is there once.
    dv = spark.sql(
        f"select count(*) as n, count(distinct event_id) as ids, max(event_id % 2) as odd "
        f"from {dbt_project.table('kind_concurrent_dv')}"
    ).collect()[0]
    raw_even = spark.sql(
        f"select count(distinct event_id) from {dbt_project.table('raw_events')} where batch <= 2 and event_id % 2 = 0"
    ).collect()[0][0]
    assert (dv["n"], dv["ids"], dv["odd"]) == (raw_even, raw_even, 0)


def test_classify_command_reads_every_kind_from_the_real_text_dbt_log(outcome: Outcome) -> None:
    result = CliRunner().invoke(main, ["classify", "--output", "json", str(outcome.log)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    found = {model: {row["kind"] for row in rows if model in row["source"]} for model in EXPECTED}
    assert found == {model: {kind} for model, (kind, _) in EXPECTED.items()}
    assert len(rows) == len(EXPECTED)  # one row per failed node, the re-runs succeeded
