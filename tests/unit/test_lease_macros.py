"""The lease macros without Spark: the state a log replays to, the reasons, the SQL they send.

The replay (`_iceberg_maint_lease_state`) is what makes the lease mutual exclusion: every
contender reads a prefix of the same commit-ordered log and must reach the same verdicts, so
each rule is pinned here (docs/leases.md explains why the rules are safe).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dbt_iceberg_maint.runtime.invoke import invoke_dbt
from tests.expect import markers

ENV = {"DBT_ICEBERG_MAINT_SCHEMA": "analytics"}
TTL = 1000


def row(event: str, claim: str, holder: str, at: int, seq: int, expires: int | None = None,
        path: str = "maintain") -> dict[str, Any]:
    return {"event": event, "claim_id": claim, "holder": holder, "path": path, "at_ms": at,
            "expires_ms": at + TTL if expires is None else expires, "seq": seq}


STATES: dict[str, list[dict[str, Any]]] = {
    "empty": [],
    # Two claims: the first commit holds, the second is refused whatever its clock says.
    "first_commit_wins": [row("claim", "b", "run-b", 105, 2), row("claim", "a", "run-a", 110, 1)],
    "after_release": [row("claim", "a", "run-a", 100, 1), row("release", "a", "run-a", 200, 2, 200),
                      row("claim", "b", "run-b", 300, 3)],
    # A claim after the holder's expiry (by the claimant's clock) takes over.
    "after_expiry": [row("claim", "a", "run-a", 100, 1), row("claim", "b", "run-b", 1100, 2)],
    "just_before_expiry": [row("claim", "a", "run-a", 100, 1), row("claim", "b", "run-b", 1099, 2)],
    # A renewal in time extends; a later claim is refused.
    "renewed": [row("claim", "a", "run-a", 100, 1), row("renew", "a", "run-a", 900, 2),
                row("claim", "b", "run-b", 1500, 3)],
    # A renewal after expiry is void: the taker committed first, or the lease had lapsed.
    "late_renewal": [row("claim", "a", "run-a", 100, 1), row("claim", "b", "run-b", 1200, 2),
                     row("renew", "a", "run-a", 1250, 3)],
    "lapsed_renewal": [row("claim", "a", "run-a", 100, 1), row("renew", "a", "run-a", 1200, 2)],
    # The same run takes its own lease again (a replay after a failure) and keeps its first time.
    "reentry": [row("claim", "a1", "run-a", 100, 1), row("claim", "b", "run-b", 300, 2),
                row("claim", "a2", "run-a", 500, 3, path="execute_maintenance_steps")],
    # A release or a break names its claim: it cannot end somebody else's lease.
    "foreign_release": [row("claim", "a", "run-a", 100, 1), row("release", "b", "run-b", 150, 2, 150)],
    "break": [row("claim", "a", "run-a", 100, 1), row("break", "a", "admin", 150, 2, 150),
              row("renew", "a", "run-a", 400, 3), row("claim", "b", "run-b", 500, 4)],
    "stale_break": [row("claim", "a", "run-a", 100, 1), row("release", "a", "run-a", 150, 2, 150),
                    row("claim", "b", "run-b", 160, 3), row("break", "a", "admin", 170, 4, 170)],
}

# Handed-over leases (execute_maintenance_steps' `leases`), checked against run-x's settings.
HANDED = {"table": "analytics.events", "log": "analytics.iceberg_maint_leases", "key": "events",
          "claim_id": "inv/events/1", "holder": "run-x", "path": "execute_maintenance_steps", "ttl_ms": 30000,
          "renewed_ms": 1000, "expires_ms": 31000}
HANDOVERS: dict[str, Any] = {
    "none": None, "good": [HANDED], "text": "yes", "mapping": HANDED,
    "missing_key": [{k: v for k, v in HANDED.items() if k != "claim_id"}],
    "extra_key": [{**HANDED, "held": True}],
    "bad_number": [{**HANDED, "ttl_ms": "30000"}], "boolean": [{**HANDED, "expires_ms": True}],
    "fraction": [{**HANDED, "renewed_ms": 1.5}], "empty_text": [{**HANDED, "claim_id": ""}],
    "other_run": [{**HANDED, "holder": "run-y"}],
    "other_log": [{**HANDED, "log": "raw.iceberg_maint_leases"}], "other_key": [{**HANDED, "key": "orders"}],
    "twice": [HANDED, {**HANDED, "claim_id": "inv/events/2"}],
}

CASES: list[dict[str, Any]] = [
    *({"id": f"state_{name}", "kind": "state", "kwargs": {"rows": rows}} for name, rows in STATES.items()),
    {"id": "reason", "kind": "reason", "kwargs": {"holder": {
        "claim_id": "a", "holder": "run-a", "path": "iceberg_maintenance", "since_ms": 1764024000000,
        "expires_ms": 1764031200000}}},
    {"id": "reason_lost", "kind": "reason", "kwargs": {"holder": None}},
    {"id": "sql", "kind": "sql", "kwargs": {"table": "analytics.Events"}},
    {"id": "sql_catalog", "kind": "sql", "kwargs": {"table": "local.analytics.events"}},
    # Settled (now 2500, TTL 1000): the commit-order prefix written before 1500 and expired before
    # 2500, up to a point where nobody holds the lease (or the whole key).
    {"id": "settled", "kind": "settled", "kwargs": {"written_before_ms": 1500, "expired_before_ms": 2500,
                                                     "rows_by_key": {
        "released": [row("claim", "a", "run-a", 100, 1), row("release", "a", "run-a", 200, 2, 200)],
        "expired": [row("claim", "b", "run-b", 1400, 3)],  # never released, but every row is old
        "expires_late": [row("claim", "c", "run-c", 600, 4, 2600)],
        # Released: the claim's late expiry no longer matters.
        "released_long_ttl": [row("claim", "l", "run-l", 600, 1, 9000), row("release", "l", "run-l", 700, 2, 700)],
        # Tonight's claim stays; last night's released lease goes.
        "nightly": [row("claim", "n1", "run-1", 100, 1), row("release", "n1", "run-1", 150, 2, 150),
                    row("claim", "n2", "run-2", 2000, 3)],
        # A claim refused behind an expired holder: cutting after it would make it the holder.
        "refused_behind": [row("claim", "r1", "run-1", 100, 1), row("claim", "r2", "run-2", 300, 2),
                           row("claim", "r3", "run-3", 2000, 3)],
        # The rows out of clock order: the prefix ends at the first row that is not old.
        "skewed": [row("claim", "s1", "run-1", 100, 1), row("release", "s1", "run-1", 120, 2, 120),
                   row("claim", "s2", "run-2", 1600, 3), row("release", "s2", "run-2", 1700, 4, 1700),
                   row("claim", "s3", "run-3", 200, 5), row("release", "s3", "run-3", 210, 6, 210)],
        # A kept row with a prefix row's clock: the delete could not tell them apart.
        "same_clock": [row("claim", "t1", "run-1", 100, 1), row("release", "t1", "run-1", 150, 2, 150),
                       row("claim", "t2", "run-2", 150, 3, 2600)],
        "empty": []}}},
    *({"id": f"handover_{name}", "kind": "handover", "kwargs": {"leases": leases}}
      for name, leases in HANDOVERS.items()),
    {"id": "namespaces", "kind": "namespaces", "kwargs": {"schemas": ["analytics", "local.raw", "analytics"]}},
    {"id": "namespaces_default", "kind": "namespaces", "kwargs": {}},
]


@pytest.fixture(scope="module")
def rendered(render_target: Path) -> dict[str, Any]:
    invocation = invoke_dbt(["run-operation", "iceberg_maint_lease_cases", "--args", json.dumps({"cases": CASES}),
                             "--target-path", str(render_target), "--vars",
                             "{dbt_iceberg_maint_run_id: run-x, dbt_iceberg_maint_lease_minutes: 0.5}"], env=ENV)
    assert invocation.success, invocation.exception
    outcomes = markers(invocation.log_messages, "ICEBERG_MAINT_CASE")
    return {outcome["id"]: outcome["value"] for outcome in outcomes}


def holder_of(rendered: dict[str, Any], name: str) -> tuple[str, int, int] | None:
    holder = rendered[f"state_{name}"]["holder"]
    return None if holder is None else (holder["claim_id"], holder["since_ms"], holder["expires_ms"])


def accepted(rendered: dict[str, Any], name: str) -> dict[str, bool]:
    return {claim: verdict["accepted"] for claim, verdict in rendered[f"state_{name}"]["verdicts"].items()}


def test_commit_order_decides_not_the_clock(rendered: dict[str, Any]) -> None:
    assert holder_of(rendered, "empty") is None
    assert holder_of(rendered, "first_commit_wins") == ("a", 110, 1110)
    assert accepted(rendered, "first_commit_wins") == {"a": True, "b": False}
    blocker = rendered["state_first_commit_wins"]["verdicts"]["b"]["blocker"]
    assert (blocker["holder"], blocker["since_ms"]) == ("run-a", 110)


def test_release_and_expiry_free_the_lease(rendered: dict[str, Any]) -> None:
    assert holder_of(rendered, "after_release") == ("b", 300, 1300)
    assert holder_of(rendered, "after_expiry") == ("b", 1100, 2100)
    assert holder_of(rendered, "just_before_expiry") == ("a", 100, 1100)
    assert accepted(rendered, "just_before_expiry") == {"a": True, "b": False}


def test_renewals_extend_only_a_live_lease(rendered: dict[str, Any]) -> None:
    assert holder_of(rendered, "renewed") == ("a", 100, 1900)
    assert accepted(rendered, "renewed") == {"a": True, "b": False}
    assert holder_of(rendered, "late_renewal") == ("b", 1200, 2200)
    assert holder_of(rendered, "lapsed_renewal") == ("a", 100, 1100)  # expired: nobody holds it now


def test_the_same_run_reenters_its_own_lease(rendered: dict[str, Any]) -> None:
    assert holder_of(rendered, "reentry") == ("a2", 100, 1500)
    assert accepted(rendered, "reentry") == {"a1": True, "b": False, "a2": True}
    assert rendered["state_reentry"]["holder"]["path"] == "execute_maintenance_steps"


def test_releases_and_breaks_end_only_their_own_claim(rendered: dict[str, Any]) -> None:
    assert holder_of(rendered, "foreign_release") == ("a", 100, 1100)
    assert holder_of(rendered, "break") == ("b", 500, 1500)  # the holder's renewal after the break is void
    assert holder_of(rendered, "stale_break") == ("b", 160, 1160)


def test_reasons(rendered: dict[str, Any]) -> None:
    assert rendered["reason"] == ("lease held by run-a since 2025-11-24T22:40:00Z (iceberg_maintenance, "
                                  "expires 2025-11-25T00:40:00Z)")
    assert rendered["reason_lost"].startswith("lease lost: ")


def test_only_settled_leases_are_removed(rendered: dict[str, Any]) -> None:
    value = rendered["settled"]
    assert value["rows"] == {"released": [100, 200], "expired": [1400], "nightly": [100, 150], "skewed": [100, 120],
                             "released_long_ttl": [600, 700]}
    assert value["delete"] == ("delete from analytics.iceberg_maint_leases where at_ms < 1500 and "
                               "((table_name = 'events' and at_ms in (1, 2)) or "
                               "(table_name = 'o\\'rders' and at_ms in (3)))")


def test_sql(rendered: dict[str, Any]) -> None:
    value = rendered["sql"]
    assert value["settings"] == {"enabled": True, "run_id": "run-x", "ttl_ms": 30000, "table": "iceberg_maint_leases"}
    assert value["target"] == {"log": "analytics.iceberg_maint_leases", "key": "events"}
    assert rendered["sql_catalog"]["target"] == {"log": "local.analytics.iceberg_maint_leases", "key": "events"}
    assert value["create"].startswith("create table if not exists analytics.iceberg_maint_leases (table_name string, ")
    assert "partitioned by (table_name)" in value["create"] and "'commit.retry.num-retries' = '100'" in value["create"]
    assert value["append"] == ("insert into analytics.iceberg_maint_leases values ('events', 'claim', 'c\\'1', "
                               "'run-1', 'maintain', 1000, 2000)")
    assert value["rows"] == (
        "select l.table_name, l.event, l.claim_id, l.holder, l.path, l.at_ms, l.expires_ms, e.sequence_number as seq "
        "from analytics.iceberg_maint_leases l join analytics.iceberg_maint_leases.entries e "
        "on l._file = e.data_file.file_path where e.status < 2 and l.table_name = 'events' "
        "and e.data_file.partition.table_name = 'events'")
    assert value["all_rows"].endswith("where e.status < 2")
    assert rendered["namespaces"] == ["analytics", "local.raw"]
    assert "analytics" in rendered["namespaces_default"]  # the schemas of the project's Iceberg models


def test_a_handed_over_lease_must_be_this_runs_own_as_kept(rendered: dict[str, Any]) -> None:
    """execute_maintenance_steps' `leases` takes back what an ICEBERG_MAINT_KEPT line of the same run
    handed over; anything else is refused, naming the argument, the value and what is expected."""
    assert rendered["handover_none"] == [] and rendered["handover_good"] == []
    shape = ("; expected none or a list of the leases an ICEBERG_MAINT_KEPT line of this run handed over, each a "
             "mapping with keys claim_id, expires_ms, holder, key, log, path, renewed_ms, table, ttl_ms")
    assert rendered["handover_text"] == ['leases is "yes"' + shape]
    for name in ("mapping", "missing_key", "extra_key"):
        [error] = rendered[f"handover_{name}"]
        assert error.startswith("leases ") and error.endswith(shape), (name, error)
    values = ("; expected text for claim_id, holder, key, log, path and table and whole numbers of milliseconds "
              "for expires_ms, renewed_ms and ttl_ms")
    for name in ("bad_number", "boolean", "fraction", "empty_text"):
        [error] = rendered[f"handover_{name}"]
        assert error.startswith("leases contains {") and error.endswith(values), (name, error)
    assert rendered["handover_other_run"] == [
        'leases contains a lease of analytics.events held by "run-y"; only this run (run-x) can be handed its own '
        "leases"]
    assert rendered["handover_other_log"] == [
        "leases contains a lease of analytics.events in raw.iceberg_maint_leases under key events; its lease is in "
        "analytics.iceberg_maint_leases"]
    assert rendered["handover_other_key"] == [
        "leases contains a lease of analytics.events in analytics.iceberg_maint_leases under key orders; its lease "
        "is in analytics.iceberg_maint_leases"]
    assert rendered["handover_twice"] == [
        "leases contains two leases of analytics.events; expected at most one a table"]
