"""The field benchmarks' --quick forms (overhead, effect, merge_conflicts), each run as users run
it (`python -m benchmarks.<name>`, its own Spark application) on the session's standalone cluster
and PostgreSQL JDBC catalog: their invariants and JSON shape, not the statistical targets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.field import SCHEMA
from dbt_iceberg_maint.conflicts.kinds import RETRYABLE_KINDS
from lab.cluster import JdbcCatalog, SparkCluster

pytestmark = [pytest.mark.integration, pytest.mark.lab]

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 1800  # a backstop: the suite-wide pytest timeout (900 s per test) stops a stuck run first


def bench(name: str, cluster: SparkCluster, catalog: JdbcCatalog, results: Path, *extra: str) -> dict[str, Any]:
    properties = {**catalog.properties(), "warehouse": str(results / "warehouse")}
    command = [sys.executable, "-m", f"benchmarks.{name}", "--quick", "--results", str(results),
               "--master", cluster.master_url, *extra,
               *(arg for key, value in properties.items() for arg in ("--catalog-property", f"{key}={value}"))]
    # run() kills the benchmark (its own Spark application ends with it) if it overruns.
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=DEADLINE_S)
    assert done.returncode == 0, f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert (results / f"{name}.png").stat().st_size > 0
    figures: dict[str, Any] = json.loads((results / f"{name}.json").read_text())
    assert figures["benchmark"] == name and figures["quick"] is True
    assert figures["master"] == cluster.master_url
    assert figures["machine"]["load_average_1m"]["samples"] >= 1
    assert figures["versions"]["pyspark"] and figures["versions"]["postgresql"]
    assert_provenance(figures)
    return figures


def assert_provenance(figures: dict[str, Any]) -> None:
    """benchmarks/field.py's `provenance`: the code, whether it was dirty, the load at both ends."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert figures["commit"] == head and isinstance(figures["dirty"], bool)
    assert all(len(figures["load_average"][end]) == 3 for end in ("start", "end")), figures["load_average"]
    assert figures["machine"]["cpus"] and figures["versions"]["dbt-core"]


def test_overhead_quick_compares_each_procedure_on_identical_states(
        spark_cluster: SparkCluster, jdbc_catalog: JdbcCatalog, tmp_path: Path) -> None:
    figures = bench("overhead", spark_cluster, jdbc_catalog, tmp_path)
    procedures = figures["procedures"]
    assert sorted(procedures) == sorted(["rewrite_data_files", "rewrite_position_delete_files", "expire_snapshots",
                                         "remove_orphan_files", "rewrite_manifests"])
    for name, p in procedures.items():
        assert p["pairs"] == figures["repetitions"] == 1, name
        # Both sides started from the same table state, sent the same CALL, got the same result and
        # left the same state behind; the macro's call changed the table (what it is for).
        assert p["identical_start_states"] == p["identical_end_states"] == p["pairs"], (name, p)
        assert p["identical_outputs"] == p["identical_sql"] == p["pairs"], (name, p)
        assert p["calls_that_changed_the_state"] == {"macro": p["pairs"], "raw": p["pairs"]}, (name, p)
        assert p["sql"].startswith(f"CALL system.{name}("), p["sql"]
        medians = p["median_s"]
        assert all(medians[k] > 0 for k in ("raw", "macro_call_s", "macro_sql_span_s", "macro_end_to_end_s")), name
        # The CALL is one of the statements the macro sent, inside its invocation.
        assert medians["macro_call_s"] <= medians["macro_sql_span_s"] <= medians["macro_end_to_end_s"], (name, medians)
        # The lease's statements are part of the span; without them, the CALL still is.
        assert 0 < medians["macro_lease_s"] and medians["macro_call_s"] <= medians["macro_sql_span_without_lease_s"] \
            < medians["macro_sql_span_s"], (name, medians)
        assert all(isinstance(r, float) for r in p["ratios"].values()), p["ratios"]
        # Existence by two SHOW statements: run-operation lists and describes no schema.
        assert p["macro_sent"][:2] == [f"show namespaces like '{SCHEMA}'",
                                       f"show tables in {SCHEMA} like 'overhead_target'"], p["macro_sent"]
        # The CALL, then its history row (the table's summary read after it, the history table's checks,
        # one INSERT: docs/history.md) and the lease's release (docs/leases.md): both part of the macro's cost.
        sent = p["macro_sent"]
        call = next(i for i, statement in enumerate(sent) if statement.startswith("CALL system."))
        after = sent[call + 1:]
        assert sum(s.startswith("insert into") and ".iceberg_maint_history " in s for s in after) == 1, sent
        assert after[-1].startswith("insert into") and ".iceberg_maint_leases values" in after[-1] \
            and all("'release'" in s for s in after if ".iceberg_maint_leases" in s), sent
    state = procedures["remove_orphan_files"]["samples"][0]
    assert state["macro"]["metrics"]["orphan_file_count"] == figures["state"]["orphans"]
    assert "files_in_data_folder" in procedures["remove_orphan_files"]["changed_by_macro"]
    assert state["macro_state"]["before"]["total-delete-files"] > 0  # rewrite_position_delete_files has work
    # A dry run of every procedure changes nothing, not even the current snapshot.
    assert figures["dry_runs"]["unchanged"] == figures["dry_runs"]["runs"] == figures["repetitions"] + 1
    assert figures["dry_runs"]["changed"] == []


def test_effect_quick_maintained_copy_has_fewer_files_and_the_same_answers(
        spark_cluster: SparkCluster, jdbc_catalog: JdbcCatalog, tmp_path: Path) -> None:
    figures = bench("effect", spark_cluster, jdbc_catalog, tmp_path, "--rounds", "12", "--maintain-every", "6")
    assert figures["commits"] == 12
    files = figures["files"]
    assert [p["commit"] for p in files["over_commits"]] == list(range(1, 13))  # a sample after every commit
    assert 0 < files["final"]["maintained"] < files["final"]["unmaintained"]
    averaged = files["time_averaged"]
    assert 0 < averaged["maintained"] < averaged["unmaintained"] and averaged["fewer_pct"] <= files["best"]["fewer_pct"]
    unmaintained = [p["unmaintained"] for p in files["over_commits"]]
    assert unmaintained == sorted(unmaintained), "the unmaintained copy never loses a file"
    latency = figures["latency"]
    # Latency sampled after the first commit, then just before and just after each maintenance run.
    assert [(c["commit"], c["phase"]) for c in latency["checkpoints"]] == [
        (1, "start"), (6, "before"), (6, "after"), (12, "before"), (12, "after")]
    assert latency["time_averaged"]["speedup"] > 0 and latency["best"]["phase"] == "after"
    for checkpoint in latency["checkpoints"]:
        assert checkpoint["same_answer"] and checkpoint["answer_rows"] > 0, checkpoint
        assert checkpoint["median_s"]["maintained"] > 0 and checkpoint["median_s"]["unmaintained"] > 0
    assert [m["commit"] for m in figures["maintenance"]] == [6, 12]
    for record in figures["maintenance"]:
        assert record["operations"]["rewrite_data_files"]["status"] == "success", record
        assert record["files_after"] < record["files_before"]
        # Iceberg's own count of the bytes it rewrote is the size of the files that left the table.
        assert record["compaction_bytes"] == record["rewritten_input_bytes"] > 0, record
    throughput = figures["throughput"]
    assert throughput["spark_bytes"] == throughput["proxy_bytes"] > 0
    assert throughput["spark_bytes_per_s"] > 0 and throughput["proxy_bytes_per_s"] > 0
    [bulk] = throughput["bulk"]  # the bigger files' compaction: every input file rewritten, one per day left
    assert bulk["spark_bytes"] == bulk["proxy_bytes"] > 0
    assert (bulk["files_before"], bulk["files_after"]) == (bulk["files"], bulk["days"])
    # Our default options and each Iceberg option set, on the same table state every time.
    compared = bulk["options"]
    assert compared["identical_start_states"] == compared["runs"] == compared["repetitions"] * 7
    assert list(compared["option_sets"]) == ["ours", "ours_above_threshold", "iceberg_defaults", "serial_one_commit",
                                             "partial_progress_defaults", "parallel_2_group_commits",
                                             "parallel_4_group_commits"]
    # maintain sent the options the Python engine plans for the table's size (the summary's
    # total-files-size, the bytes every compaction rewrote): far below partial_progress_above_mb.
    assert compared["policy_options_in_maintain_call"] and "error" not in compared["warmup"], compared["warmup"]
    assert compared["table_bytes"] == bulk["spark_bytes"] and compared["ours_partial_progress"] is False
    ours = compared["option_sets"]["ours"]
    assert ours["failures"] == 0 and ours["median_commits"] == 1, ours  # parallel groups, one commit
    above = compared["option_sets"]["ours_above_threshold"]
    assert above["failures"] == 0 and above["median_commits"] == bulk["days"], above  # a commit per group
    assert compared["ours_above_threshold_over_best"] > 0
    for name, found in compared["option_sets"].items():
        assert len(found["runs"]) == compared["repetitions"], name
        if found["failures"] == 0:
            # Every set rewrote every input file into one per day, the same bytes each time.
            assert found["all_files_rewritten"] and found["median_bytes_per_s"] > 0, (name, found)
    assert compared["option_sets"]["iceberg_defaults"]["median_commits"] == 1
    assert compared["best_iceberg"] in compared["option_sets"]
    assert compared["best_iceberg"] not in ("ours", "ours_above_threshold")
    assert compared["ours_over_best"] > 0 and compared["met"] == (compared["ours_over_best"] >= 0.9)
    assert figures["goals"]["default_options_met"] == compared["met"]
    assert figures["snapshots"]["effect_maintained"] < figures["snapshots"]["effect_unmaintained"]


def test_merge_conflicts_quick_runs_both_writers_together_in_every_variant(
        spark_cluster: SparkCluster, jdbc_catalog: JdbcCatalog, tmp_path: Path) -> None:
    figures = bench("merge_conflicts", spark_cluster, jdbc_catalog, tmp_path, "--rounds", "1")
    assert {r["outcome"] for r in figures["rounds"]} <= {"conflict", "no_conflict"}
    assert [v["name"] for v in figures["variants"]] == ["serializable/no_predicate", "serializable/predicate",
                                                        "snapshot/no_predicate", "snapshot/predicate"]
    assert figures["rounds_played"] == 4 and not figures["stopped_early"]
    assert figures["duplicate_ids"] == 0
    for variant in figures["variants"]:
        assert variant["rounds"] == 1 and variant["writer_runs"] == 2
        # Both MERGEs reached the barrier, so both had planned before either could commit; where
        # both finished (a failed statement has no end in dbt's events), their runs overlapped.
        assert variant["barrier_met"] == variant["rounds"] and variant["barrier_not_met"] == 0, variant
        assert variant["conflict_rounds"] + variant["no_conflict_rounds"] == variant["barrier_met"], variant
        assert variant["merges_overlapped"] == variant["rounds"] - variant["conflict_rounds"], variant
        # Green writers' rows carry their round; failed writers changed nothing.
        assert variant["state_mismatches"] == 0, variant
        # Every failure is a real Iceberg commit conflict, never a broken benchmark.
        assert set(variant["failures_by_kind"]) <= set(RETRYABLE_KINDS), variant
