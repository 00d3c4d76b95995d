"""`dbt-iceberg-maint leases` without dbt: the ICEBERG_MAINT_LEASES line, the run-operations it
runs, and its usage errors (the real run: tests/integration/test_leases.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from click.testing import CliRunner

from dbt_iceberg_maint.cli import main
from dbt_iceberg_maint.errors import LeaseError
from dbt_iceberg_maint.maintenance.leases import Lease, break_args, leases_from_log, list_args, run_lease_command
from dbt_iceberg_maint.runtime.invoke import DbtInvocation

LEASE = {"table": "analytics.events", "holder": "run-1", "acquired_at": "2026-11-24T22:40:00Z",
         "expires_at": "2026-11-25T00:40:00Z", "path": "iceberg_maintenance", "claim_id": "c1"}


def recorded(messages: Sequence[str], success: bool = True) -> DbtInvocation:
    return DbtInvocation(args=(), success=success, nodes=(), log_messages=tuple(messages),
                         exception=None if success else "boom")


def test_the_last_leases_line_is_read() -> None:
    messages = ["other", f"ICEBERG_MAINT_LEASES {json.dumps([])}",
                f"12:00:00  ICEBERG_MAINT_LEASES {json.dumps([LEASE])}"]
    assert leases_from_log(messages) == (Lease(**LEASE),)
    assert Lease(**LEASE).as_dict() == LEASE


@pytest.mark.parametrize("messages", [[], ["ICEBERG_MAINT_LEASES [{\"table\": 1}]"]])
def test_a_missing_or_unreadable_line_is_an_error(messages: list[str]) -> None:
    with pytest.raises(LeaseError):
        leases_from_log(messages)


def test_run_operations() -> None:
    assert list_args() == ["run-operation", "dbt_iceberg_maint.list_leases", "--args", "{}"]
    assert json.loads(list_args(["analytics", "local.raw"])[3]) == {"schemas": ["analytics", "local.raw"]}
    assert break_args("analytics.events") == ["run-operation", "dbt_iceberg_maint.break_lease", "--args",
                                              '{"relation": "analytics.events"}']
    seen: list[list[str]] = []

    def invoke(args: Sequence[str]) -> DbtInvocation:
        seen.append(list(args))
        return recorded([f"ICEBERG_MAINT_LEASES {json.dumps([LEASE])}"])

    assert run_lease_command(list_args(), invoke=invoke) == (Lease(**LEASE),)
    assert seen == [list_args()]
    with pytest.raises(LeaseError, match="list_leases failed"):
        run_lease_command(list_args(), invoke=lambda args: recorded([], success=False))


def test_break_with_schema_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["leases", "--break", "analytics.events", "--schema", "analytics"])
    assert result.exit_code == 2 and "--break TABLE" in result.output
