"""A fleet worker process: `python -m dbt_iceberg_maint.fleet.worker`.

dbtRunner is not safe for concurrent use in one process, so each of the engine's concurrent
workers is a process of its own that runs dbt invocations one after the other (dbt, and with
dbt-spark `method: session` its Spark application, start once per worker). It reads one job per
line on stdin, `{"args": [...], "project_dir": ..., "profiles_dir": ..., "out": PATH}`, runs
invoke_dbt with the manifest it parsed once at start (its `preload`: the project and the dbt
flags every job of the run ends with), and writes the DbtInvocation as JSON to PATH (written
whole, then renamed). Its own stdout and stderr are dbt's console noise: the engine sends them to
a log file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.runtime.invoke import DbtInvocation, LoggedEvent


def invocation_to_dict(invocation: DbtInvocation) -> dict[str, Any]:
    return {"args": list(invocation.args), "success": invocation.success, "exception": invocation.exception,
            "usage_error": invocation.usage_error, "log_messages": list(invocation.log_messages),
            "events": [[e.name, e.msg, e.node_id] for e in invocation.events],
            "sql_statements": [list(s) for s in invocation.sql_statements]}


def invocation_from_dict(data: dict[str, Any]) -> DbtInvocation:
    return DbtInvocation(
        args=tuple(data["args"]), success=bool(data["success"]), nodes=(),
        log_messages=tuple(data["log_messages"]), exception=data.get("exception"),
        usage_error=bool(data.get("usage_error")),
        events=tuple(LoggedEvent(name, msg, node) for name, msg, node in data.get("events") or ()),
        sql_statements=tuple((sql, int(start), None if end is None else int(end))
                             for sql, start, end in data.get("sql_statements") or ()))


def serve(ready: Path | None = None, preload: dict[str, Any] | None = None) -> None:
    """Serve jobs until stdin closes; `ready` is created once dbt is imported and the project of
    `preload` (`{"project_dir", "profiles_dir", "flags"}`) parsed: the engine's step timeout does
    not count a worker's start."""
    import dbt.cli.main  # noqa: F401 (the slow import, before the first job)

    from dbt_iceberg_maint.runtime.invoke import ParsedManifests, invoke_dbt

    manifest = None if preload is None else ParsedManifests().get(
        preload["project_dir"], preload.get("profiles_dir"), preload["flags"])
    if ready is not None:
        ready.touch()
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            invocation = invoke_dbt(job["args"], job["project_dir"], job.get("profiles_dir"), manifest=manifest)
        except Exception as exc:  # reported as the invocation's failure; the worker serves on
            invocation = DbtInvocation(tuple(job["args"]), False, (), (), exception=f"{type(exc).__name__}: {exc}")
        out = Path(job["out"])
        partial = out.with_suffix(".partial")
        partial.write_text(json.dumps(invocation_to_dict(invocation)))
        os.replace(partial, out)


if __name__ == "__main__":
    serve(Path(sys.argv[1]) if len(sys.argv) > 1 else None, json.loads(sys.argv[2]) if len(sys.argv) > 2 else None)
