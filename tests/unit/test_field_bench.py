"""The field benchmarks' pure pieces: statement timings from dbt's events, the MERGE barrier,
the raw CALL's comparison with the macro's, and the lake arguments."""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import pytest

from benchmarks.field import TimedDbt, add_lake_arguments, catalog_properties
from benchmarks.merge_conflicts import barrier_function
from benchmarks.overhead import _masked, comparable_output

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
