"""`./scripts/bench peers --quick` in the suite: a lake of 3 tables of 5 appends on the embedded
catalog, maintained from the same restored state by our `maintain` and by iceberg-zamboni (its own
venv, .venv-peers, made on first use from PyPI). Asserts what must hold whatever the
speed (docs/benchmarks-peers.md): both tools leave every table's rows exactly as they were, our
run leaves no unreferenced data file on disk, and the figures are there. No assertion on time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import harness, peers

pytestmark = [pytest.mark.lab]


@pytest.mark.timeout(1500)
def test_quick_peers_keep_every_row_and_ours_leaves_no_replaced_file(tmp_path: Path) -> None:
    tables, appends = peers.QUICK_SHAPE
    try:
        figures = peers.run(tables, appends, peers.CONCURRENCY, quick=True)
    except peers.PeerUnavailable as exc:  # no PyPI: a failure that says so, never a silent skip
        pytest.fail(f"the peer could not be installed, so nothing was compared: {exc}")
    harness.publish(peers.NAME, figures, tmp_path, peers.plot, peers.summary)

    written = json.loads((tmp_path / "peers.json").read_text())
    assert written["quick"] and written["complete"] and (tmp_path / "peers.png").is_file()
    assert isinstance(written["commit"], str) and len(written["load_average"]["start"]) == 3
    assert written["versions"]["peer:iceberg-zamboni"] == peers.PEER_VERSION
    before = written["before"]
    # The lake as built: 5 appends a table, 5 files each on the day-partitioned table, 1 elsewhere.
    assert (before["data_files"], before["snapshots"]) == (appends * (5 + tables - 1), tables * appends), before
    assert before["unreferenced_data_files_on_disk"] == 0
    assert [(v["tool"], v["concurrency"]) for v in written["variants"]] == [
        ("dbt-iceberg-maint", 1), (peers.PEER, None)]
    for variant in written["variants"]:
        for key in ("wall_s", "data_files_after", "snapshots_after", "bytes_on_disk_after", "rows_equal"):
            assert variant[key] is not None, (key, variant)
        assert variant["ok"] and variant["wall_s"] > 0, variant
        # Exact data: every table's count and row hash equal the original's.
        assert variant["rows_equal"], variant
        # Both compacted every table (one file per day partition, one elsewhere) and kept one snapshot.
        assert (variant["data_files_after"], variant["snapshots_after"]) == (5 + tables - 1, tables), variant
    runs = {r["tool"]: r for r in written["runs"]}
    ours, theirs = runs["dbt-iceberg-maint"], runs[peers.PEER]
    assert ours["rows_after"] == theirs["rows_after"] == written["rows_before"]
    assert all(t["rows"] == appends * 10 for t in written["rows_before"].values()), written["rows_before"]
    # Our expiry deleted what the compaction replaced: no data file on disk that no snapshot references.
    assert ours["after"]["unreferenced_data_files_on_disk"] == 0, ours["after"]
    assert ours["after"]["data_files_on_disk"] == ours["after"]["data_files"], ours["after"]
    # Where our time goes: every due step ran (a compaction and an expiry a table), timed.
    time = ours["time"]
    assert time["calls"] == 2 * tables and time["counts"]["failed"] == 0, time
    assert set(time["operations"]) == {"rewrite_data_files", "expire_snapshots"}, time
    assert all(op["steps"] == tables and op["call_s"] > 0 for op in time["operations"].values()), time
    assert theirs["operations"]["compact"]["ok"] == theirs["operations"]["expire"]["ok"] == tables, theirs
    assert written["ratio_ours_over_theirs"] == round(ours["wall_s"] / theirs["wall_s"], 2)
