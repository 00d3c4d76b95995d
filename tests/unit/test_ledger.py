"""The batch ledger's checker: every way a table can disagree with what its writers recorded."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from lab.ledger import (
    Expected,
    Ledger,
    LedgerEntry,
    LedgerError,
    Observed,
    batch_rows,
    batch_rows_sql,
    check,
    expectations,
    observed_from_rows,
)


def entry(batch: int, event: str, rows: int = 3, table: str = "t") -> LedgerEntry:
    return LedgerEntry.for_batch("w", table, batch, event, rows)


def observed(batch: int, rows: int = 3) -> Observed:
    return Observed(batch, rows, sum(zlib.crc32(f"{i}|{p}".encode()) for i, p in batch_rows(batch, rows)))


def test_batch_rows_are_unique_across_batches_and_match_the_sql() -> None:
    assert batch_rows(2, 2) == [(2_000_000, "b2-r0"), (2_000_001, "b2-r1")]
    assert set(batch_rows(1, 5)).isdisjoint(batch_rows(2, 5))
    assert "range(5)" in batch_rows_sql(7, 5) and "cast(7 as bigint) * 1000000 + id" in batch_rows_sql(7, 5)
    with pytest.raises(LedgerError, match="rows must be"):
        batch_rows(1, 0)


def test_a_table_equal_to_the_ledger_is_ok() -> None:
    expected = expectations([entry(1, "committed"), entry(2, "committed")], "t")
    result = check("t", expected, [observed(1), observed(2)])
    assert result.ok and result.batches_expected == 2 and result.batches_observed == 2
    assert (result.rows_lost, result.rows_duplicated) == (0, 0)


def test_a_committed_batch_missing_is_lost() -> None:
    result = check("t", expectations([entry(1, "committed", rows=4)], "t"), [])
    assert result.lost == (1,) and result.rows_lost == 4 and not result.ok
    assert "none present" in result.details[0]


def test_a_partial_batch_loses_its_missing_rows() -> None:
    result = check("t", expectations([entry(1, "committed", rows=4)], "t"), [observed(1, rows=3)])
    assert result.lost == (1,) and result.rows_lost == 1


def test_a_batch_written_twice_is_duplicated() -> None:
    twice = Observed(1, 6, 2 * observed(1).checksum)
    result = check("t", expectations([entry(1, "committed")], "t"), [twice])
    assert result.duplicated == (1,) and result.rows_duplicated == 3 and not result.ok


def test_a_batch_no_writer_recorded_is_unexpected() -> None:
    result = check("t", {}, [observed(9)])
    assert result.unexpected == (9,) and "no writer recorded it" in result.details[0]


def test_a_batch_reported_failed_must_be_absent() -> None:
    expected = expectations([entry(1, "failed")], "t")
    assert check("t", expected, []).ok
    result = check("t", expected, [observed(1)])
    assert result.unexpected == (1,) and "reported it failed" in result.details[0]


def test_a_rerun_that_committed_is_expected_once() -> None:
    events = [entry(1, "unknown"), entry(1, "failed"), entry(1, "rerun"), entry(1, "committed")]
    expected = expectations(events, "t")
    assert expected[1] == Expected(1, 3, entry(1, "committed").checksum, "committed", reruns=1)
    assert check("t", expected, [observed(1)]).ok


def test_an_unknown_batch_may_be_absent_or_present_once_but_never_twice() -> None:
    expected = expectations([entry(1, "unknown")], "t")
    assert check("t", expected, []).ok
    landed = check("t", expected, [observed(1)])
    assert landed.ok and landed.unknown_landed == 1
    assert check("t", expected, [Observed(1, 6, 0)]).duplicated == (1,)


def test_same_count_other_contents_is_mismatched() -> None:
    result = check("t", expectations([entry(1, "committed")], "t"), [Observed(1, 3, 12345)])
    assert result.mismatched == (1,) and not result.ok


def test_expectations_keep_only_the_named_table() -> None:
    assert set(expectations([entry(1, "committed", table="a"), entry(2, "committed", table="b")], "a")) == {1}


def test_unknown_events_are_refused() -> None:
    with pytest.raises(LedgerError, match="event must be one of"):
        entry(1, "landed")


def test_ledger_file_round_trips_and_ignores_a_torn_last_line(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    assert ledger.entries() == []
    ledger.record(entry(1, "committed"))
    ledger.record(entry(2, "failed"))
    with ledger.path.open("a") as handle:
        handle.write('{"writer": "w", "tab')  # a writer killed mid-write
    assert [(e.batch_id, e.event) for e in ledger.entries()] == [(1, "committed"), (2, "failed")]
    with pytest.raises(LedgerError, match="unreadable"):
        LedgerEntry.from_json('{"writer": "w"}')


def test_observed_from_query_rows() -> None:
    assert observed_from_rows([(1, 3, 7), (2, 1, None)]) == [Observed(1, 3, 7), Observed(2, 1, 0)]
