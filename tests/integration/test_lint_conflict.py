"""The claim behind `merge_without_partition_predicate`, on real Spark and real Iceberg commits.

conflict_merge (merge on event_id into a days(event_ts)-partitioned table, serializable
isolation, no incremental_predicates) is flagged by the lint. Two dbt-style MERGE statements
(the text spark__get_merge_sql renders) run on two sessions of one Spark: the model's batch into
today's partition, and a correction of an old partition by another job. The gate UDF holds the
model's MERGE between planning and commit until the correction has committed, so every round
is the same race. Without a predicate the model's MERGE read the whole target and fails
(`Found conflicting files ... matching true`); with the predicate the lint suggests, the scan
and Iceberg's conflict check cover the recent partitions only, and both commits land. A last
round under `snapshot` isolation shows why the rule is only `info` for models that declare and
reconcile it: the unscoped MERGE then does not conflict either.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.conflicts import classify
from dbt_iceberg_maint.lint import run_lint
from dbt_iceberg_maint.runtime._conflict_gate import ConflictGate
from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT
from dbt_iceberg_maint.runtime.spark import CatalogSpec, register_catalog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration

MODEL = "conflict_merge"
ROUNDS = 3
OLD_DAY = "2026-11-02"  # a seed partition, far outside the suggested window


def dbt_merge_sql(target: str, source: str, unique_key: str, predicates: list[str]) -> str:
    """The MERGE dbt-spark renders for an incremental merge model (spark__get_merge_sql)."""
    on = " and ".join([*predicates, f"DBT_INTERNAL_SOURCE.{unique_key} = DBT_INTERNAL_DEST.{unique_key}"])
    return (f"merge into {target} as DBT_INTERNAL_DEST using {source} as DBT_INTERNAL_SOURCE on {on} "
            "when matched then update set * when not matched then insert *")


@dataclass(frozen=True)
class Round:
    predicates: tuple[str, ...]
    isolation: str  # the table's write.merge.isolation-level
    model_error: str | None  # the model's MERGE: None when it committed
    correction_error: str | None
    seconds: float


@dataclass(frozen=True)
class Outcome:
    suggested: str
    rounds: tuple[Round, ...]
    rows_before: int
    rows_after: int
    old_day_rows: int
    old_day_total_before: float
    old_day_total_after: float


def suggested_predicate() -> str:
    result = run_lint(INTEGRATION_PROJECT, vars_yaml="{conflict_scenario: true}")
    [finding] = [f for f in result.findings
                 if f.rule == "merge_without_partition_predicate" and f.node.endswith(f".{MODEL}")]
    suggestion = finding.suggestion
    return str(json.loads(suggestion[len("incremental_predicates: "):suggestion.index("]") + 1])[0])


@pytest.fixture(scope="module")
def outcome(
    spark: SparkSession, warehouse: Path, dbt_project: DbtProject, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Outcome]:
    suggested = suggested_predicate()
    gate = ConflictGate(tmp_path_factory.mktemp("lint_gate"))
    gate.register(spark)
    dbt_project("build", "--select", "raw_events", MODEL, "--vars", "{conflict_scenario: true, batch: 1}")
    table = dbt_project.table(MODEL)
    other = spark.newSession()  # another job: its own session and catalog instance
    register_catalog(other, CatalogSpec(warehouse=str(warehouse.resolve())))

    def total_of_old_day() -> float:
        return float(spark.sql(f"select sum(amount) from {table} where cast(event_ts as date) = date'{OLD_DAY}'")
                     .collect()[0][0])

    rows_before = spark.sql(f"select count(*) from {table}").collect()[0][0]
    old_day = f"cast(event_ts as date) = date'{OLD_DAY}'"
    old_day_rows = spark.sql(f"select count(*) from {table} where {old_day}").collect()[0][0]
    old_total_before = total_of_old_day()
    rounds = []
    plan = [((), "serializable")] * ROUNDS + [((suggested,), "serializable")] * ROUNDS + [((), "snapshot")]
    for index, (predicates, isolation) in enumerate(plan):
        spark.sql(f"alter table {table} set tblproperties ('write.merge.isolation-level' = '{isolation}')")
        for session in (spark, other):
            session.sql(f"refresh table {table}")
        # The model's batch: new events today, its source held by the gate once planned.
        spark.sql(
            f"create or replace temporary view {MODEL}__dbt_tmp as select 900000 + {index} * 10 + id as event_id, "
            "1L as user_id, 'view' as event_type, current_timestamp() as event_ts, cast(1 as decimal(12,2)) as amount, "
            f"99 as loaded_batch from range(5) where iceberg_maint_conflict_gate('{MODEL}', 900000 + id)")
        # Another job corrects an old partition (a dbt-style MERGE too).
        other.sql(
            f"create or replace temporary view correction__dbt_tmp as select event_id, user_id, event_type, event_ts, "
            f"amount + 1 as amount, loaded_batch from {table} where cast(event_ts as date) = date'{OLD_DAY}'")
        gate.arm(MODEL)
        correction = gate.commit_when_reached(
            MODEL, other, dbt_merge_sql(table, "correction__dbt_tmp", "event_id", []))
        started = time.monotonic()
        model_error = None
        try:
            spark.sql(dbt_merge_sql(table, f"{MODEL}__dbt_tmp", "event_id", list(predicates)))
        except Exception as exc:  # the conflict under test, reported by the round
            model_error = str(exc)
        correction.join(timeout=120)
        gate.disarm(MODEL)
        assert correction.reached, "the gate was never reached: the race did not happen"
        rounds.append(Round(predicates, isolation, model_error,
                            None if correction.error is None else str(correction.error), time.monotonic() - started))
    yield Outcome(suggested, tuple(rounds), rows_before, spark.sql(f"select count(*) from {table}").collect()[0][0],
                  old_day_rows, old_total_before, total_of_old_day())
    print("\nlint conflict rounds:", [(bool(r.predicates), r.isolation, r.model_error is not None,
                                       round(r.seconds, 1)) for r in rounds])


def test_the_flagged_merge_conflicts_with_a_merge_into_another_partition(outcome: Outcome) -> None:
    unscoped = [r for r in outcome.rounds if not r.predicates and r.isolation == "serializable"]
    assert len(unscoped) == ROUNDS
    for round_ in unscoped:
        assert round_.correction_error is None
        assert round_.model_error is not None
        verdict = classify(round_.model_error)
        assert verdict.kind == "conflicting_added_files", round_.model_error[:500]
        assert "Found conflicting files that can contain records matching true" in round_.model_error


def test_the_suggested_predicate_removes_the_conflict(outcome: Outcome) -> None:
    assert outcome.suggested == "DBT_INTERNAL_DEST.event_ts >= date_sub(current_date(), 3)"
    scoped = [r for r in outcome.rounds if r.predicates]
    assert {r.isolation for r in scoped} == {"serializable"}
    assert [(r.model_error, r.correction_error) for r in scoped] == [(None, None)] * ROUNDS


def test_under_snapshot_isolation_the_unscoped_merge_does_not_conflict(outcome: Outcome) -> None:
    """Why the rule is only `info` for a model that declares and reconciles merge isolation snapshot."""
    [last] = [r for r in outcome.rounds if r.isolation == "snapshot"]
    assert last.predicates == ()
    assert (last.model_error, last.correction_error) == (None, None)


def test_every_commit_that_succeeded_landed_and_nothing_else(outcome: Outcome) -> None:
    # 5 new rows per successful model round (scoped + snapshot); the failed rounds added nothing;
    # corrections never add rows.
    assert outcome.rows_after == outcome.rows_before + 5 * (ROUNDS + 1)
    # every correction (one per round) added 1 to each row of the old day
    assert outcome.old_day_rows > 0
    assert outcome.old_day_total_after - outcome.old_day_total_before == outcome.old_day_rows * len(outcome.rounds)
