"""Read Iceberg snapshot logs for landed verification through dbt itself (thin I/O shell).

Everything goes over the dbt connection the user's run uses, so it works wherever the run works
(session, thrift): `dbt ls` names the selected models and their tables, and
`dbt run-operation dbt_iceberg_maint.table_snapshots` reads their `snapshots` metadata tables.
The decision itself is pure (`landed.verify_landed`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dbt_iceberg_maint.errors import SnapshotLogError
from dbt_iceberg_maint.runner.landed import TableLog, parse_snapshot_lines
from dbt_iceberg_maint.runtime.invoke import Invoker

# dbt flags that change what the project is (selection aside): kept for `ls` and `run-operation`.
CONTEXT_FLAGS = frozenset({"--vars", "--target", "-t", "--profile", "--state", "--defer", "--no-defer",
                           "--favor-state", "--no-favor-state", "--defer-state"})
SELECTION_FLAGS = frozenset({"--select", "-s", "--models", "--model", "-m", "--exclude", "--selector"})
VALUELESS = frozenset({"--defer", "--no-defer", "--favor-state", "--no-favor-state"})
WRITING_MATERIALIZATIONS = frozenset({"table", "incremental"})


@dataclass(frozen=True)
class SnapshotRead:
    """What one `table_snapshots` call returned; `error` when it could not run."""

    app_id: str | None
    tables: Mapping[str, TableLog] = field(default_factory=dict)
    error: str | None = None


class SnapshotReader(Protocol):
    def selected_nodes(self, dbt_args: Sequence[str]) -> dict[str, Mapping[str, Any]]:
        """Manifest nodes (unique_id -> node with schema, alias, config) that `dbt_args` select."""

    def read(self, tables: Sequence[str]) -> SnapshotRead:
        """The whole snapshot logs of `tables`."""


def keep_flags(dbt_args: Sequence[str], flags: frozenset[str]) -> list[str]:
    """The flags of `dbt_args` in `flags`, with their values (multi-value flags run to the next flag)."""
    kept: list[str] = []
    keeping = False
    for arg in dbt_args:
        flag = arg.split("=", 1)[0]
        if arg.startswith("-"):
            keeping = flag in flags and "=" not in arg and flag not in VALUELESS
            if flag in flags:
                kept.append(arg)
        elif keeping:
            kept.append(arg)
    return kept


def verified_table(node: Mapping[str, Any]) -> str | None:
    """'schema.table' of a node whose write landed verification can check, else None."""
    config = node.get("config") or {}
    if node.get("resource_type") != "model" or not isinstance(config, Mapping):
        return None
    if config.get("file_format") != "iceberg" or config.get("materialized") not in WRITING_MATERIALIZATIONS:
        return None
    schema, alias = node.get("schema"), node.get("alias") or node.get("name")
    return f"{schema}.{alias}" if schema and alias else None


class DbtSnapshotReader:
    """`SnapshotReader` over in-process dbt invocations (`invoke`), in the run's dbt context."""

    def __init__(self, invoke: Invoker, dbt_args: Sequence[str]) -> None:
        self.invoke = invoke
        self.context = keep_flags(dbt_args, CONTEXT_FLAGS)

    def selected_nodes(self, dbt_args: Sequence[str]) -> dict[str, Mapping[str, Any]]:
        selection = keep_flags(dbt_args, SELECTION_FLAGS)
        invocation = self.invoke(["ls", "--resource-type", "model", "--output", "json", "--output-keys",
                                  "unique_id name resource_type schema alias config", *selection, *self.context,
                                  "--log-level", "none"])  # the list comes back as the result, not printed
        nodes: dict[str, Mapping[str, Any]] = {}
        for line in invocation.listed:
            try:
                node = json.loads(line)
            except ValueError:
                continue
            if isinstance(node, dict) and node.get("unique_id"):
                nodes[str(node["unique_id"])] = node
        return nodes

    def read(self, tables: Sequence[str]) -> SnapshotRead:
        if not tables:
            return SnapshotRead(None)
        args = json.dumps({"tables": list(tables)})
        invocation = self.invoke(["run-operation", "dbt_iceberg_maint.table_snapshots", "--args", args,
                                  *self.context, "--quiet"])
        try:
            app_id, logs = parse_snapshot_lines(invocation.log_messages)
        except SnapshotLogError as exc:
            return SnapshotRead(None, {}, str(exc))
        if not invocation.success or not logs:
            return SnapshotRead(app_id, logs, invocation.exception or "table_snapshots logged no snapshot line")
        return SnapshotRead(app_id, logs)
