"""The quick torture run (issue 14, docs/torture.md): separate writer and maintenance processes on
a PostgreSQL JDBC catalog and on a Hive Metastore's Hive catalog, kill -9 crashes, catalog
connections cut at commit, the orphan-safety audit and the ledger. Its fuzzed bad input runs on
the suite's session: tests/integration/test_fuzzed_input.py."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from lab.torture import CATALOGS as TORTURE_CATALOGS
from lab.torture import quick_settings, run_torture

# The fixture runs both catalogs at once, each starting PostgreSQL (and on the Hive catalog the
# metastore's JVM) and five JVMs: its setup counts against the first test's timeout, which must
# cover a loaded machine.
pytestmark = [pytest.mark.integration, pytest.mark.lab, pytest.mark.timeout(2400)]


@pytest.fixture(scope="module")
def tortures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """One quick run per catalog, both at once. A run's length is set by its phases (a load of
    fixed length, kills that wait for a rewrite or a MERGE to be running, writers that must commit
    once more), not by the CPU it gets: side by side the two took 188 and 197 s, alone 185-196 s
    each. Each document is kept beside its run's logs (torture.json), the evidence of what each
    fault did."""
    folders = {catalog: tmp_path_factory.mktemp(f"torture_{catalog}") for catalog in TORTURE_CATALOGS}

    def one(catalog: str) -> dict[str, Any]:
        document = run_torture(quick_settings(), folders[catalog] / "run", catalog=catalog,
                               log=lambda message: print(f"torture[{catalog}] {message}", flush=True))
        (folders[catalog] / "torture.json").write_text(json.dumps(document, indent=2, default=str))
        return document

    with ThreadPoolExecutor(len(TORTURE_CATALOGS)) as pool:
        running = {catalog: pool.submit(one, catalog) for catalog in TORTURE_CATALOGS}
        return {catalog: future.result() for catalog, future in running.items()}


# Not named CATALOGS (tests/conftest.py parametrises the suite's own warehouse by that name): the
# torture starts its own catalog servers.
@pytest.fixture(scope="module", params=TORTURE_CATALOGS)
def torture(request: pytest.FixtureRequest, tortures: dict[str, dict[str, Any]]) -> dict[str, Any]:
    document = tortures[request.param]
    assert document["catalog"] == request.param
    return document


def test_no_row_lost_or_duplicated_and_no_referenced_file_deleted(torture: dict[str, Any]) -> None:
    problems = [t["details"] for t in torture["tables"] if not t["ok"]]
    assert (torture["rows_lost"], torture["rows_duplicated"], problems) == (0, 0, [])
    assert torture["referenced_files_deleted"] == 0
    assert torture["load"]["commits"] >= 6, torture["load"]
    # The loop completes invocations between its crashes (the last full run's loop never did).
    assert torture["load"]["maintenance_invocations_ok"] >= 1, torture["load"]
    assert torture["load"]["maintenance_operations"], "the maintenance loop never ran an operation"
    assert torture["unexpected_exits"] == [], [e["log_tail"][-500:] for e in torture["unexpected_exits"]]


def test_every_crash_and_cut_was_injected_and_survived(torture: dict[str, Any]) -> None:
    faults = torture["faults"]
    for kind in ("kill_maintenance_mid_rewrite", "kill_writer_mid_merge"):
        assert faults.get(kind, {}).get("injected", 0) >= 1, (kind, faults, torture["crashes"])
    cuts = [k for k in faults if k.startswith("catalog_cut_")]
    assert cuts, f"no catalog cut reached a commit: {torture['catalog_faults']}"
    not_survived = [(c["kind"], c.get("survived_why")) for c in [*torture["crashes"], *torture["catalog_faults"]]
                    if c.get("injected", True) and not c["survived"]]
    assert all(v["survived"] == v["injected"] for v in faults.values()), (faults, not_survived)
    assert torture["next_maintenance_completed"]


def test_orphans_removed_once_old_and_in_flight_files_kept(torture: dict[str, Any]) -> None:
    orphans = torture["orphans"]
    assert orphans["left_by_crashes"] == orphans["aged"]
    assert orphans["aged_left_after_remove_orphan_files"] == 0, orphans
    assert orphans["young_orphan_kept"]
    in_flight = torture["in_flight_writer"]
    assert in_flight["files_before_remove_orphan_files"] >= 1 and in_flight["files_kept"], in_flight
    assert in_flight["committed_after"]
