"""`./scripts/bench concurrency --quick` in the suite: one round of every variant and the control
rounds, for real (the suite's standalone cluster with the writers' task slots, separate dbt
processes, the gate), on the PostgreSQL JDBC catalog and on a Hive Metastore (`--catalog hive`),
both at once. Asserts the invariants, not the statistical targets (those need the full run)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from benchmarks.concurrency import CATALOGS as LAB_CATALOGS
from benchmarks.concurrency import COLD_SECONDS_QUICK, VARIANTS, run
from lab.cluster import SparkCluster
from lab.postgres import PostgresServer

pytestmark = [pytest.mark.integration, pytest.mark.lab]


@pytest.fixture(scope="module")
def quick_runs(postgres_server: PostgresServer, spark_cluster: SparkCluster,
               tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Three warm-up batches, one cycle and the control cycle, with the quick form's shorter cold
    window, once per catalog, both side by side on the suite's cluster (it declares both runs'
    writer slots): their time is mostly waiting for days to turn cold, so the pair takes about as
    long as one run. Per catalog: the results folder and the figures."""
    folders = {kind: tmp_path_factory.mktemp(f"concurrency_{kind}") for kind in sorted(LAB_CATALOGS)}

    def one(kind: str) -> dict[str, Any]:
        return run(1, quick=True, results=folders[kind] / "results", run_dir=folders[kind] / "run",
                   cluster=spark_cluster, postgres=postgres_server, cold_seconds=COLD_SECONDS_QUICK,
                   catalog_kind=kind)

    with ThreadPoolExecutor(len(folders)) as pool:
        running = {kind: pool.submit(one, kind) for kind in folders}
        return {kind: (folders[kind] / "results", future.result()) for kind, future in running.items()}


@pytest.mark.timeout(2700)
@pytest.mark.parametrize("catalog_kind", sorted(LAB_CATALOGS))
def test_quick_concurrency_rounds_keep_the_invariants(quick_runs: dict[str, tuple[Path, dict[str, Any]]],
                                                      catalog_kind: str) -> None:
    results, figures = quick_runs[catalog_kind]
    assert figures["settings"]["catalog"] == LAB_CATALOGS[catalog_kind]

    written = json.loads((results / "concurrency.json").read_text())
    assert written["complete"] and (results / "concurrency.png").is_file()
    assert [v["name"] for v in written["variants"]] == [v.name for v in VARIANTS]
    required = {"name", "maintenance", "writer", "rounds", "writer_runs", "green_runs", "reruns", "duplicate_rows",
                "ledger_mismatches", "failures_by_kind"}
    for variant in figures["variants"]:
        assert required <= set(variant), variant
        assert variant["rounds"] == variant["writer_runs"] == 1, variant
        assert variant["duplicate_rows"] == 0, variant
        assert variant["ledger_mismatches"] == 0, variant
        # The append model: never re-run blindly, so every batch it committed is there once.
        assert variant["append_duplicate_rows"] == 0 and variant["append_ledger_ok"], variant
        if variant["writer"] == "runner":
            assert variant["green_runs"] == variant["writer_runs"], variant
        assert variant["overlapped"]["runs"] + variant["not_overlapped_rounds"] == variant["rounds"], variant
    headline = figures["headline"]
    assert headline["compared"] == ["naive_dbt", "policy_runner"] and 0 <= headline["p_value"] <= 1
    assert isinstance(figures["commit"], str) and isinstance(figures["dirty"], bool)
    assert len(figures["load_average"]["start"]) == len(figures["load_average"]["end"]) == 3
    rounds = figures["rounds"]
    assert len(rounds) == len(VARIANTS) + 2  # and one control round per maintenance kind
    for record in rounds:
        if record["writers"]:
            # The MERGE waited at the gate while the maintenance ran: the round truly overlapped.
            assert record["gate"]["reached"] and record["gate"]["overlap_met"], record
            if "hot_days_quiet_at_call_s" in record:
                # The package read the partitions while the days of the writer's last round were
                # still hot and those of the round before were cold: the policy scoped the round.
                assert record["hot_days_quiet_at_call_s"] < COLD_SECONDS_QUICK < \
                    record["left_days_quiet_at_call_s"], record
        # Every round's compaction had cold small files to work on and really ran.
        assert record["cold_small_files_at_start"] > 0, record
        assert record["cold_small_files_alone"] + record["cold_small_files_compactable"] == \
            record["cold_small_files_at_start"], record
        assert record["maintenance"]["status"] in ("success", "failed"), record
        if record["overlap"]["ui_answered"]:  # a loaded machine may leave the Spark UI unanswered
            assert record["overlap"]["compaction_statements"] >= 1, record
            assert (record["overlap"]["merge_statements"] >= 1) == record["writers"], record
    for kind in ("naive", "policy"):
        assert figures["p2"][kind]["writers_stopped"] is not None
