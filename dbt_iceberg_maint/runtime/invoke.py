"""Run dbt in-process with dbtRunner and collect what it reports.

Every invocation in one Python process shares the one SparkSession (dbt-spark `method:
session` reuses the active session), so the JVM starts once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.errors import UsageError
from dbt_iceberg_maint.runtime.embedded_profile import embedded_environment
from dbt_iceberg_maint.runtime.parse_states import PARSE_STATES, parse_key, parse_state, target_folder

INTEGRATION_PROJECT = Path(__file__).resolve().parents[2] / "integration_tests"
# The manifest.json keys of a node that the re-run planner (runner.py) reads: idempotency
# (resource_type, config, meta), ancestry (depends_on), exact selection (fqn, package_name,
# original_file_path), and landed verification (schema, alias: the table whose snapshots it reads).
PLANNER_KEYS = ("unique_id", "name", "resource_type", "package_name", "fqn", "original_file_path",
                "config", "meta", "depends_on", "schema", "alias")


# dbt's node statuses of a failure (run_results.json); skipped and warn are not failures.
FAILED_STATUSES = frozenset({"error", "fail", "runtime error"})


@dataclass(frozen=True)
class NodeResult:
    unique_id: str
    name: str
    status: str
    message: str | None
    resource_type: str
    # The node in manifest.json form, `PLANNER_KEYS` only.
    manifest_node: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class ManifestGraph:
    """The whole project as dbt's manifest.json describes it.

    Run results only show the nodes that ran; ephemeral models never do, so a parent chain
    through one (a -> ephemeral e -> c) is only visible here. Unit tests are nodes too.
    """

    project_name: str | None  # the root project: dbt's `path:` selector resolves against it
    nodes: Mapping[str, Mapping[str, Any]] = field(repr=False)

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> ManifestGraph:
        nodes = {**(document.get("nodes") or {}), **(document.get("unit_tests") or {})}
        metadata = document.get("metadata") or {}
        return cls(
            project_name=metadata.get("project_name"),
            nodes={uid: _planner_view(node) for uid, node in nodes.items() if isinstance(node, Mapping)},
        )


def _planner_view(node: Mapping[str, Any]) -> dict[str, Any]:
    view = {key: node[key] for key in PLANNER_KEYS if key in node}
    view["depends_on"] = {"nodes": list((node.get("depends_on") or {}).get("nodes") or [])}
    return view


@dataclass(frozen=True)
class LoggedEvent:
    """One of dbt's structured events: its type name (e.g. JinjaLogInfo for a macro's log()),
    message, and the unique_id of the node it belongs to (None outside a node)."""

    name: str
    msg: str
    node_id: str | None = None


@dataclass(frozen=True)
class DbtInvocation:
    args: tuple[str, ...]
    success: bool
    nodes: tuple[NodeResult, ...]
    log_messages: tuple[str, ...] = field(repr=False)
    exception: str | None = None
    # dbt rejected its arguments (DbtUsageException): a usage error, not a failed run.
    usage_error: bool = False
    # Read only when asked for (`invoke_dbt(read_manifest=True)`) and dbt wrote one.
    manifest: ManifestGraph | None = field(default=None, repr=False)
    # The same messages as structured events (empty for invocations recorded as text only).
    events: tuple[LoggedEvent, ...] = field(default=(), repr=False)
    # Per node unique_id, its SQL statements in order as (started, ended) epoch ms from dbt's
    # SQLQuery / SQLQueryStatus events; ended is None for a statement that raised.
    statements: Mapping[str, tuple[tuple[int, int | None], ...]] = field(default_factory=dict, repr=False)
    # Every statement of the invocation in order, a run-operation's too: (sql, started, ended).
    sql_statements: tuple[tuple[str, int, int | None], ...] = field(default=(), repr=False)
    # What `dbt ls` printed (one string per node), for `ls` invocations.
    listed: tuple[str, ...] = field(default=(), repr=False)

    def failed_nodes(self) -> tuple[NodeResult, ...]:
        return tuple(node for node in self.nodes if node.status in FAILED_STATUSES)


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


def kept_parse_state(
    args: Sequence[str],
    project_dir: str | os.PathLike[str] = INTEGRATION_PROJECT,
    profiles_dir: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Path | None:
    """The file invoke_dbt keeps the partial-parse state of these inputs in between invocations
    (same arguments as invoke_dbt), None where the target folder is unknown. A state put there is
    what dbt starts from when these inputs next run: dbt checks it like any other."""
    project, full_args, overrides = _invocation_inputs(args, project_dir, profiles_dir, env)
    with environment(overrides):
        target = target_folder(full_args, project)
        return None if target is None else target / PARSE_STATES / f"{parse_key(full_args, project)}.msgpack"


def _invocation_inputs(
    args: Sequence[str], project_dir: str | os.PathLike[str], profiles_dir: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None,
) -> tuple[Path, list[str], dict[str, str]]:
    """The project folder, dbt's whole command line and the environment of one invocation."""
    project = Path(project_dir).resolve()
    profiles = Path(profiles_dir).resolve() if profiles_dir else project
    full_args = [*args, "--project-dir", str(project), "--profiles-dir", str(profiles)]
    return project, full_args, {**embedded_environment({**os.environ, **(env or {})}), **(env or {})}


def _manifest_node(node: Any) -> dict[str, Any]:
    return _planner_view(node.to_dict(omit_none=True))  # dbt's own manifest.json form


def _manifest_path(artifacts: Mapping[str, str]) -> Path | None:
    """Where this invocation wrote manifest.json, from dbt's ArtifactWritten events."""
    if "WritableManifest" in artifacts:
        return Path(artifacts["WritableManifest"])
    if "RunExecutionResult" in artifacts:  # dbt writes manifest.json beside run_results.json
        return Path(artifacts["RunExecutionResult"]).with_name("manifest.json")
    return None


def _read_manifest(path: Path | None) -> ManifestGraph | None:
    """None when dbt wrote none (e.g. --no-write-json): the planner then knows only run results."""
    if path is None or not path.is_file():
        return None
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return ManifestGraph.from_document(document) if isinstance(document, Mapping) else None


def _epoch_ms(ts: Any) -> int | None:
    """An event's timestamp (a protobuf Timestamp, or an ISO string) as epoch milliseconds."""
    if hasattr(ts, "seconds") and hasattr(ts, "nanos"):
        return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000
    if isinstance(ts, str) and ts:
        from datetime import datetime, timezone

        parsed = datetime.fromisoformat(ts.replace("Z", "+00:00"))
        return int((parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp() * 1000)
    return None


class _StatementLog:
    """Collects statement times from dbt's SQLQuery / SQLQueryStatus events: each node's, and
    every statement's in order with its SQL (a run-operation's statements belong to no node)."""

    def __init__(self) -> None:
        self.by_node: dict[str, list[list[int | None]]] = {}
        self.ordered: list[tuple[str, int, list[int | None]]] = []

    def record(self, event: Any) -> None:
        name = event.info.name
        if name not in {"SQLQuery", "SQLQueryStatus"}:
            return
        node_info = getattr(event.data, "node_info", None)
        unique_id = getattr(node_info, "unique_id", "") if node_info is not None else ""
        ms = _epoch_ms(event.info.ts)
        if name == "SQLQuery":
            self.ordered.append((getattr(event.data, "sql", ""), int(ms or 0), [None]))
        elif self.ordered and self.ordered[-1][2][0] is None:
            self.ordered[-1][2][0] = ms
        if not unique_id or ms is None:
            return
        statements = self.by_node.setdefault(unique_id, [])
        if name == "SQLQuery":
            statements.append([ms, None])
        elif statements and statements[-1][1] is None:
            statements[-1][1] = ms

    def frozen(self) -> dict[str, tuple[tuple[int, int | None], ...]]:
        return {uid: tuple((int(s[0] or 0), s[1]) for s in items) for uid, items in self.by_node.items()}

    def in_order(self) -> tuple[tuple[str, int, int | None], ...]:
        return tuple((sql, started, ended[0]) for sql, started, ended in self.ordered)


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


# Runs one dbt command (arguments after `dbt`); tests pass recorded invocations instead.
Invoker = Callable[[Sequence[str]], DbtInvocation]


def default_profiles_dir(project_dir: Path, environ: Mapping[str, str]) -> Path:
    """dbt's own order: DBT_PROFILES_DIR, the project directory if it has profiles.yml, ~/.dbt."""
    if environ.get("DBT_PROFILES_DIR"):
        return Path(environ["DBT_PROFILES_DIR"])
    if (project_dir / "profiles.yml").is_file():
        return project_dir
    return Path.home() / ".dbt"


def invoke_dbt(
    args: Sequence[str],
    project_dir: str | os.PathLike[str] = INTEGRATION_PROJECT,
    profiles_dir: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    read_manifest: bool = False,
    manifest: Any = None,
) -> DbtInvocation:
    """Invoke one dbt command in this process; log lines are captured, not printed.

    `read_manifest`: also read the manifest.json dbt wrote (the whole project graph).
    `manifest`: a parsed dbt Manifest (ParsedManifests) that dbt uses instead of parsing again.
    """
    from dbt.cli.exceptions import DbtUsageException
    from dbt.cli.main import dbtRunner

    if not args:
        raise UsageError("dbt arguments are empty; expected a command such as `run` or `build`")
    project, full_args, overrides = _invocation_inputs(args, project_dir, profiles_dir, env)
    messages: list[str] = []
    artifacts: dict[str, str] = {}
    statements = _StatementLog()

    events: list[LoggedEvent] = []

    def collect(event: Any) -> None:
        statements.record(event)
        messages.append(event.info.msg)
        node_info = getattr(event.data, "node_info", None)
        events.append(LoggedEvent(event.info.name, event.info.msg, getattr(node_info, "unique_id", None) or None))
        if event.info.name == "ArtifactWritten":
            artifacts[event.data.artifact_type] = event.data.artifact_path

    # The profile's catalog is prepared by the package's dbt plugin (dbt_plugin.py), inside dbt.
    with environment(overrides), parse_state(full_args, project) if manifest is None else nullcontext():
        outcome = dbtRunner(manifest=manifest, callbacks=[collect]).invoke(full_args)
    return DbtInvocation(
        args=tuple(args),
        success=bool(outcome.success),
        nodes=_node_results(outcome.result),
        log_messages=tuple(messages),
        exception=None if outcome.exception is None else str(outcome.exception),
        usage_error=isinstance(outcome.exception, DbtUsageException),
        manifest=_read_manifest(_manifest_path(artifacts)) if read_manifest else None,
        events=tuple(events),
        statements=statements.frozen(),
        sql_statements=statements.in_order(),
        listed=tuple(outcome.result) if isinstance(outcome.result, list) else (),
    )


class ParsedManifests:
    """dbt's parsed Manifest per project, profiles folder and parse-relevant flags (`--target`,
    `--vars`, ...), parsed once and handed to every later invocation in this process. A process
    that runs many short run-operations (a fleet worker) would otherwise pay dbt's partial parse
    each time: about 1 s on a 1,000-model project, against 0.1 s with the manifest given. Only for
    a run whose project files do not change; a parse that fails is not kept (the invocation then
    parses itself and reports the error as usual)."""

    def __init__(self) -> None:
        self._parsed: dict[tuple[str, str, tuple[str, ...]], Any] = {}

    def get(self, project_dir: str | os.PathLike[str], profiles_dir: str | os.PathLike[str] | None,
            flags: Sequence[str], env: Mapping[str, str] | None = None) -> Any:
        from dbt.cli.main import dbtRunner

        project = Path(project_dir).resolve()
        profiles = Path(profiles_dir).resolve() if profiles_dir else project
        key = (str(project), str(profiles), tuple(flags))
        if key not in self._parsed:
            with environment(env or {}):
                outcome = dbtRunner(callbacks=[lambda _event: None]).invoke(
                    ["parse", "--quiet", *flags, "--project-dir", str(project), "--profiles-dir", str(profiles)])
            if not outcome.success or outcome.result is None:
                return None
            self._parsed[key] = outcome.result
        return self._parsed[key]
