"""`dbt-iceberg-maint leases`: list the current per-table leases, or break one.

The leases live in Iceberg tables the macros append to (macros/internal/lease.sql,
docs/leases.md); only the macros read them, so this runs the `list_leases` / `break_lease`
run-operations through dbt (the user's own connection, as dbt Cloud would) and reads the one
ICEBERG_MAINT_LEASES line they log.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.errors import LeaseError
from dbt_iceberg_maint.protocol import LEASES_MARKER, marker_payloads
from dbt_iceberg_maint.runtime.invoke import DbtInvocation, Invoker, default_profiles_dir, invoke_dbt

# The macros' holder identity: dbt-iceberg-maint maintain sets it for all of its invocations, so
# a replay after a failure re-enters the leases its first invocation took.
RUN_ID_ENV = "DBT_ICEBERG_MAINT_RUN_ID"
# Added to a failed step's reason when giving its lease back failed too.
LEASE_KEPT = "its lease could not be given back, so it is held until its TTL"


def create_logs_args(namespaces: Iterable[str]) -> list[str]:
    """The run-operation that creates the lease logs of `namespaces` if missing, before workers
    start at one instant: a lost race to create a log fails a run on PostgreSQL's JDBC catalog."""
    return ["run-operation", "dbt_iceberg_maint.create_lease_logs", "--args",
            json.dumps({"schemas": sorted(set(namespaces))})]


def claim_args(tables: Sequence[str], release: Sequence[Mapping[str, Any]] = (),
               checked: Mapping[str, Iterable[str]] | None = None,
               history_rows: Sequence[Mapping[str, Any]] = (), history_checked: bool = False) -> list[str]:
    """The run-operation that ends `release` (the run's own leases, as ICEBERG_MAINT_KEPT lines
    handed them over) and claims the leases of `tables`, each log's rows in one commit; it logs the
    leases it holds in an ICEBERG_MAINT_KEPT line (results.kept_leases). Last it writes
    `history_rows` (the rows the run's steps deferred: results.deferred_history_rows) in one INSERT;
    `history_checked`: an earlier invocation of the run found the history table ready."""
    args: dict[str, Any] = {"tables": list(tables)}
    if release:
        args["release"] = [dict(lease) for lease in release]
    known = {kind: sorted(names) for kind, names in (checked or {}).items() if names}
    if known.get("lease_logs"):
        args["checked"] = {"lease_logs": known["lease_logs"]}
    if history_rows:
        args["history_rows"] = [dict(row) for row in history_rows]
        if history_checked:
            args["history_checked"] = True
    return ["run-operation", "dbt_iceberg_maint.claim_leases", "--args", json.dumps(args)]


def give_back_args(table: str, run_id: str) -> list[str]:
    """The run-operation that ends `table`'s lease only if run `run_id` holds it (break_lease with
    `holder`). A step Spark rejected stopped its macro with the lease taken, since dbt's Jinja
    cannot catch the error; without this, other jobs would skip the table until the TTL."""
    return ["run-operation", "dbt_iceberg_maint.break_lease", "--args", json.dumps({"relation": table,
                                                                                    "holder": run_id})]


@dataclass(frozen=True)
class Lease:
    table: str
    holder: str  # the holder's run id
    acquired_at: str  # UTC, ISO 8601
    expires_at: str
    path: str | None = None  # maintain, iceberg_maintenance, execute_maintenance_steps, a procedure
    claim_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Lease:
        return cls(str(data["table"]), str(data["holder"]), str(data["acquired_at"]), str(data["expires_at"]),
                   data.get("path"), data.get("claim_id"))


def leases_from_log(messages: Iterable[str]) -> tuple[Lease, ...]:
    """The leases of the last ICEBERG_MAINT_LEASES line (pure)."""
    payloads = list(marker_payloads(messages, LEASES_MARKER))
    if not payloads:
        raise LeaseError(f"no {LEASES_MARKER} line: is the dbt_iceberg_maint package the project installs older "
                         "than this command?")
    try:
        return tuple(Lease.from_dict(item) for item in json.loads(payloads[-1]))
    except (ValueError, KeyError, TypeError) as exc:
        raise LeaseError(f"unreadable {LEASES_MARKER} line ({exc}): {payloads[-1][:200]!r}") from exc


def list_args(schemas: Sequence[str] = ()) -> list[str]:
    args = {"schemas": list(schemas)} if schemas else {}
    return ["run-operation", "dbt_iceberg_maint.list_leases", "--args", json.dumps(args)]


def break_args(table: str) -> list[str]:
    return ["run-operation", "dbt_iceberg_maint.break_lease", "--args", json.dumps({"relation": table})]


def run_lease_command(
    args: Sequence[str],
    *,
    dbt_args: Sequence[str] = (),
    project_dir: str | os.PathLike[str] = ".",
    profiles_dir: str | os.PathLike[str] | None = None,
    invoke: Invoker | None = None,
) -> tuple[Lease, ...]:
    """Run one lease run-operation (`list_args` or `break_args`) and return the leases it logged."""
    profiles = profiles_dir or default_profiles_dir(Path(project_dir).resolve(), os.environ)
    run = invoke or (lambda a: invoke_dbt([*a, *dbt_args], project_dir, profiles))
    invocation: DbtInvocation = run(list(args))
    if not invocation.success:
        refusal = next((e.msg for e in invocation.events if e.name.startswith("RunningOperation")), None)
        raise LeaseError(f"{args[1]} failed: {refusal or invocation.exception or 'dbt failed'}")
    return leases_from_log(invocation.log_messages)
