"""The field benchmarks' pure pieces: statement timings from dbt's events, the MERGE barrier and a
round's outcome, the raw CALL's comparison with the macro's, the overhead state check, the effect
benchmark's time averages, the lake arguments and every results JSON's provenance."""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.effect import file_figures, latency_figures, trapezoid_mean
from benchmarks.field import TimedDbt, add_lake_arguments, catalog_properties
from benchmarks.harness import git_state, provenance, run_start
from benchmarks.merge_conflicts import barrier_function, barrier_met, round_outcome
from benchmarks.overhead import _masked, changed_keys, comparable, comparable_output

QUERY_COMMENT = '/* {"app": "dbt", "node_id": "model.field_bench.merge_target"} */'


def timed(*statements: tuple[str, int, int | None]) -> TimedDbt:
    return TimedDbt(True, 9.0, statements, ())


def test_statement_spans_skip_dbts_query_comment_and_the_materializations_comment_lines() -> None:
    merge = f"{QUERY_COMMENT}\n\n    -- back compat for old kwarg name\n  \n  merge into t as DBT_INTERNAL_DEST"
    run = timed((f"{QUERY_COMMENT}\nshow tables in s", 1000, 1100), (merge, 1200, 4200),
                (f"{QUERY_COMMENT}\n CALL system.rewrite_manifests(table => 's.t')", 4300, 4800))
    assert run.statement_span("merge into") == (1200, 4200)
    assert run.statement_s("call") == 0.5
    assert run.sql_span_s == 3.8  # first start to last end
    assert run.statement_span("delete from") is None


def test_a_statement_that_raised_has_no_span() -> None:
    run = timed((f"{QUERY_COMMENT}\nmerge into t", 1000, None))
    assert run.statement_span("merge into") is None and run.sql_span_s is None


def test_the_barrier_holds_the_first_row_of_each_party_until_both_arrived(tmp_path: Path) -> None:
    barrier = barrier_function(str(tmp_path), ("a", "b"), timeout_s=30)
    released: list[str] = []
    first = threading.Thread(target=lambda: released.append("a" if barrier("7", "a") else "?"))
    first.start()
    time.sleep(0.2)
    assert released == [] and (tmp_path / "7.a").exists()
    assert barrier("7", "a")  # a later row of the same party passes at once
    assert barrier("7", "b")  # the second party arrives: it passes, and so does the first
    first.join(timeout=10)
    assert released == ["a"]


def test_the_barrier_gives_up_after_its_timeout(tmp_path: Path) -> None:
    started = time.monotonic()
    assert barrier_function(str(tmp_path), ("a", "b"), timeout_s=0.3)("1", "a")
    assert 0.3 <= time.monotonic() - started < 5


def test_the_raw_side_is_compared_in_the_macros_terms() -> None:
    macro = {"metrics": {"orphan_file_count": 3, "orphan_file_location": ["x", "y", "z"]}}
    assert comparable_output("remove_orphan_files", macro, {"rows": 3, "first_row": {}}) == (3, 3)
    macro = {"metrics": {"rewritten_data_files_count": 12, "added_data_files_count": 4,
                         "rewritten_bytes_count": 9000, "failed_data_files_count": 0}}
    raw = {"rows": 1, "first_row": {"rewritten_data_files_count": 12, "added_data_files_count": 4,
                                    "rewritten_bytes_count": 9001, "failed_data_files_count": 0}}
    # Byte counts depend on the bytes Spark wrote (compression), not on what the call did.
    assert comparable_output("rewrite_data_files", macro, raw)[0] == comparable_output(
        "rewrite_data_files", macro, raw)[1]
    assert _masked("CALL system.remove_orphan_files(table => 't', older_than => TIMESTAMP '2026-11-20 19:04:42Z')") \
        == "CALL system.remove_orphan_files(table => 't', older_than => TIMESTAMP '<instant>')"


def test_lake_arguments_need_a_warehouse_with_a_given_catalog() -> None:
    parser = argparse.ArgumentParser()
    add_lake_arguments(parser)
    assert catalog_properties(parser.parse_args([])) == {}
    given = parser.parse_args(["--catalog-property", "type=jdbc", "--catalog-property", "warehouse=/w",
                               "--catalog-property", "uri=jdbc:postgresql://127.0.0.1:5/x?a=b"])
    assert catalog_properties(given) == {"type": "jdbc", "warehouse": "/w", "uri": "jdbc:postgresql://127.0.0.1:5/x?a=b"}
    with pytest.raises(SystemExit, match="warehouse"):
        catalog_properties(parser.parse_args(["--catalog-property", "type=jdbc"]))
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        catalog_properties(parser.parse_args(["--catalog-property", "type"]))


def test_a_barrier_that_timed_out_is_not_met_even_when_both_parties_arrived(tmp_path: Path) -> None:
    assert barrier_function(str(tmp_path), ("a", "b"), timeout_s=0.1)("3", "a")  # b is late: a gives up
    assert barrier_function(str(tmp_path), ("a", "b"), timeout_s=0.1)("3", "b")  # b arrives after all
    assert (tmp_path / "3.a").exists() and (tmp_path / "3.b").exists()
    assert not barrier_met(tmp_path, "3", ("a", "b"))
    for party in ("a", "b"):
        (tmp_path / f"4.{party}").touch()
    assert barrier_met(tmp_path, "4", ("a", "b"))
    assert not barrier_met(tmp_path, "5", ("a", "b"))  # nobody arrived


def test_a_round_without_its_barrier_is_neither_a_pass_nor_a_conflict() -> None:
    assert round_outcome(False, True) == round_outcome(False, False) == "barrier_not_met"
    assert round_outcome(True, True) == "conflict" and round_outcome(True, False) == "no_conflict"


def _state(snapshot_id: int, **changes: Any) -> dict[str, Any]:
    state: dict[str, Any] = {"snapshot_id": snapshot_id, "snapshots": 4, "total-data-files": 12,
                             "total-delete-files": 2, "total-records": 1200, "files_in_data_folder": 16,
                             "properties": {"format-version": "2", "current-snapshot-id": str(snapshot_id)}}
    state.update(changes)
    return state


def test_the_overhead_state_check_sees_what_a_call_changes() -> None:
    before = _state(7)
    assert changed_keys(before, _state(7)) == []
    compacted = _state(8, snapshots=5, **{"total-data-files": 4})
    compacted["properties"]["current-snapshot-id"] = "8"
    assert changed_keys(before, compacted) == ["snapshot_id", "snapshots", "total-data-files",
                                               "properties.current-snapshot-id"]
    assert changed_keys(before, _state(7, files_in_data_folder=14)) == ["files_in_data_folder"]  # orphans removed
    changed_property = _state(7)
    changed_property["properties"]["write.target-file-size-bytes"] = "1"
    assert changed_keys(before, changed_property) == ["properties.write.target-file-size-bytes"]


def test_two_rebuilds_of_one_state_compare_equal_without_their_snapshot_ids() -> None:
    assert comparable(_state(7)) == comparable(_state(99))
    assert comparable(_state(7)) != comparable(_state(99, **{"total-records": 1199}))


def test_trapezoid_mean_averages_the_path_through_the_samples() -> None:
    assert trapezoid_mean([]) is None
    assert trapezoid_mean([(5, 2.0)]) == 2.0
    assert trapezoid_mean([(0, 0.0), (10, 10.0)]) == 5.0
    # A sawtooth: up to 10 by commit 10, down to 0 there (a jump), up to 10 again by commit 20.
    assert trapezoid_mean([(0, 0.0), (10, 10.0), (10, 0.0), (20, 10.0)]) == 5.0


def test_latency_figures_put_the_time_average_beside_the_best_point() -> None:
    def point(commit: int, phase: str, maintained: float, unmaintained: float) -> dict[str, Any]:
        return {"commit": commit, "phase": phase, "median_s": {"maintained": maintained, "unmaintained": unmaintained},
                "speedup": round(unmaintained / maintained, 2)}

    found = latency_figures([point(10, "after", 1.0, 4.0), point(1, "start", 1.0, 1.0), point(10, "before", 3.0, 4.0),
                             point(20, "before", 3.0, 7.0), point(20, "after", 1.0, 7.0)])
    assert found["best"]["commit"] == 20 and found["best"]["speedup"] == 7.0
    assert found["final"]["phase"] == "after" and found["final"]["commit"] == 20
    # Maintained: 1 -> 3 over commits 1-10, 1 -> 3 over 10-20: 2 on average; unmaintained 1 -> 4 -> 7.
    assert found["time_averaged"]["median_s"]["maintained"] == pytest.approx(2.0)
    assert found["time_averaged"]["median_s"]["unmaintained"] == pytest.approx((9 * 2.5 + 10 * 5.5) / 19)
    assert found["time_averaged"]["speedup"] < found["best"]["speedup"]


def test_file_figures_average_over_every_commit() -> None:
    points = [{"commit": 1, "maintained": 2, "unmaintained": 2}, {"commit": 2, "maintained": 4, "unmaintained": 4},
              {"commit": 3, "maintained_before": 6, "maintained": 1, "unmaintained": 6}]
    found = file_figures(points)
    assert found["time_averaged"] == {"maintained": 2.3, "unmaintained": 4.0, "fewer_pct": 41.7}
    assert found["best"]["commit"] == 3 and found["best"]["fewer_pct"] == 83.3
    assert found["fewer_pct"] == 83.3 and found["final"]["commit"] == 3


def test_provenance_records_the_code_the_load_and_the_machine(tmp_path: Path) -> None:
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "first")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert git_state(tmp_path) == (head, False)
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "x.json").write_text("{}")
    assert git_state(tmp_path) == (head, False)  # results written by a run do not make the code dirty
    (tmp_path / "code.py").write_text("x = 1\n")
    assert git_state(tmp_path) == (head, True)
    assert git_state(tmp_path / "nowhere") == (None, None)

    start = run_start(tmp_path)
    assert start.commit == head and start.dirty is True and len(start.load) == 3
    found = provenance(start, versions_=lambda: {"python": "3.x"})
    assert set(found) == {"commit", "dirty", "load_average", "machine", "versions"}
    assert found["commit"] == head and found["dirty"] is True and found["versions"] == {"python": "3.x"}
    assert found["load_average"]["start"] == list(start.load) and len(found["load_average"]["end"]) == 3
    assert found["machine"]["cpus"] and "load_average_1m" not in found["machine"]
