"""Run dbt in-process with dbtRunner and collect what it reports.

Every invocation in one Python process shares the one SparkSession (dbt-spark `method:
session` reuses the active session), so the JVM starts once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from dbt_iceberg_maint.errors import UsageError

INTEGRATION_PROJECT = Path(__file__).resolve().parent.parent / "integration_tests"


@dataclass(frozen=True)
class NodeResult:
    unique_id: str
    name: str
    status: str
    message: str | None
    resource_type: str
    # The node in manifest.json form (resource_type, config, depends_on): what the re-run
    # planner (runner.py) needs to judge idempotency and to find skipped children.
    manifest_node: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class DbtInvocation:
    args: tuple[str, ...]
    success: bool
    nodes: tuple[NodeResult, ...]
    log_messages: tuple[str, ...] = field(repr=False)
    exception: str | None = None
    # dbt rejected its arguments (DbtUsageException): a usage error, not a failed run.
    usage_error: bool = False

    def failed_nodes(self) -> tuple[NodeResult, ...]:
        return tuple(node for node in self.nodes if node.status in {"error", "fail", "runtime error"})


@contextmanager
def environment(overrides: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for one dbt invocation (profiles read them via env_var)."""
    saved = {key: os.environ.get(key) for key in overrides}
    os.environ.update(overrides)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _manifest_node(node: Any) -> dict[str, Any]:
    config = getattr(node, "config", None)
    depends_on = getattr(node, "depends_on", None)
    return {
        "unique_id": node.unique_id,
        "name": node.name,
        "resource_type": str(getattr(node.resource_type, "value", node.resource_type)),
        "package_name": getattr(node, "package_name", None),
        "fqn": list(getattr(node, "fqn", None) or []),
        "config": config.to_dict(omit_none=True) if hasattr(config, "to_dict") else {},
        "depends_on": {"nodes": list(getattr(depends_on, "nodes", None) or [])},
    }


def _node_results(result: Any) -> tuple[NodeResult, ...]:
    if result is None or not hasattr(result, "results"):
        return ()
    nodes = []
    for item in result.results:
        node = getattr(item, "node", None)
        if node is None:  # run-operation results (RunResultOutput) carry no node
            continue
        nodes.append(
            NodeResult(
                unique_id=node.unique_id,
                name=node.name,
                status=str(getattr(item.status, "value", item.status)),
                message=item.message,
                resource_type=str(getattr(node.resource_type, "value", node.resource_type)),
                manifest_node=_manifest_node(node),
            )
        )
    return tuple(nodes)


def invoke_dbt(
    args: Sequence[str],
    project_dir: str | os.PathLike[str] = INTEGRATION_PROJECT,
    profiles_dir: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> DbtInvocation:
    """Invoke one dbt command in this process; log lines are captured, not printed."""
    from dbt.cli.main import dbtRunner

    if not args:
        raise UsageError("dbt arguments are empty; expected a command such as `run` or `build`")
    project = Path(project_dir).resolve()
    messages: list[str] = []

    def collect(event: Any) -> None:
        messages.append(event.info.msg)

    full_args = [
        *args,
        "--project-dir",
        str(project),
        "--profiles-dir",
        str(Path(profiles_dir).resolve() if profiles_dir else project),
    ]
    with environment(env or {}):
        outcome = dbtRunner(callbacks=[collect]).invoke(full_args)
    return DbtInvocation(
        args=tuple(args),
        success=bool(outcome.success),
        nodes=_node_results(outcome.result),
        log_messages=tuple(messages),
        exception=None if outcome.exception is None else str(outcome.exception),
        usage_error=type(outcome.exception).__name__ == "DbtUsageException",
    )
