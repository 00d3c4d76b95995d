"""dbt writers and maintenance jobs as separate OS processes, as users run them.

Each process gets a work directory of its own (profiles.yml, target/, logs/, output.log), so
concurrent dbt invocations on one project never share dbt's artifacts. Commands are values
(`DbtCommand`); `start()` runs one through the product's process shell
(`dbt_iceberg_maint.runtime.processes`: its own process group, a parent-death signal), and
`Running.wait()` returns what it did.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dbt_iceberg_maint.errors import IcebergMaintError
from dbt_iceberg_maint.runtime import processes

BIN = Path(sys.executable).parent


class LabProcessError(IcebergMaintError):
    """A lab process could not be started or did not end in time."""


def thrift_profile(profile: str, host: str, port: int, schema: str) -> str:
    """A dbt-spark `method: thrift` profile (JSON is valid YAML)."""
    # poll_interval 1 s (dbt-spark's default 5 s), as docs/getting-started.md advises users.
    output = {"type": "spark", "method": "thrift", "host": host, "port": port, "user": "lab", "schema": schema,
              "threads": 1, "connect_retries": 3, "connect_timeout": 10, "poll_interval": 1}
    return json.dumps({profile: {"target": "lab", "outputs": {"lab": output}}}, indent=2)


@dataclass(frozen=True)
class DbtCommand:
    """One dbt-side process: its argv and where its own files live."""

    name: str
    argv: tuple[str, ...]
    workdir: Path
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def output_path(self) -> Path:
        return self.workdir / "output.log"

    @property
    def target_path(self) -> Path:
        return self.workdir / "target"

    @property
    def report_path(self) -> Path:
        return self.workdir / "report.json"

    def environment(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith(("DBT_", "PYSPARK_"))}
        env.update({"DBT_PROFILES_DIR": str(self.workdir), "DBT_TARGET_PATH": str(self.target_path),
                    "DBT_LOG_PATH": str(self.workdir / "logs"), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
                    "PYTHONUNBUFFERED": "1"})
        env.update(self.env)
        return env


def workdir(root: Path, name: str, profile_text: str) -> Path:
    """`root/name` with the profile written; reused across rounds (dbt's partial parse stays warm)."""
    path = root / name
    path.mkdir(parents=True, exist_ok=True)
    (path / "profiles.yml").write_text(profile_text)
    return path


def dbt_run(name: str, project_dir: Path, work: Path, select: str, env: Mapping[str, str] | None = None,
            threads: int | None = None) -> DbtCommand:
    """Plain `dbt run`: the baseline writer. `threads` overrides the profile's (1)."""
    argv = (str(BIN / "dbt"), "run", "--project-dir", str(project_dir), "--select", select)
    return DbtCommand(name, argv + (("--threads", str(threads)) if threads else ()), work, dict(env or {}))


def runner_run(name: str, project_dir: Path, work: Path, select: str, env: Mapping[str, str] | None = None,
               max_attempts: int = 3, backoff_seconds: float = 2.0) -> DbtCommand:
    """`dbt-iceberg-maint run`: dbt run with classification and selective re-runs; JSON report."""
    argv = (str(BIN / "dbt-iceberg-maint"), "run", "--project-dir", str(project_dir), "--profiles-dir", str(work),
            "--max-attempts", str(max_attempts), "--backoff-seconds", str(backoff_seconds),
            "--report", str(work / "report.json"), "--output", "json", "--select", select)
    return DbtCommand(name, argv, work, dict(env or {}))


def maintain(name: str, project_dir: Path, work: Path, select: Sequence[str], operations: Sequence[str],
             env: Mapping[str, str] | None = None) -> DbtCommand:
    """`dbt-iceberg-maint maintain`: the maintenance job with a JSON report of every operation."""
    argv = [str(BIN / "dbt-iceberg-maint"), "maintain", "--project-dir", str(project_dir), "--profiles-dir",
            str(work), "--report", str(work / "report.json"), "--output", "json"]
    for model in select:
        argv += ["--select", model]
    for operation in operations:
        argv += ["--operation", operation]
    return DbtCommand(name, tuple(argv), work, dict(env or {}))


@dataclass(frozen=True)
class Finished:
    name: str
    exit_code: int
    started: float  # time.time() of the start
    seconds: float
    output: str

    def report(self, command: DbtCommand) -> dict[str, Any] | None:
        """The JSON report a `dbt-iceberg-maint` command wrote (None when it wrote none)."""
        path = command.report_path
        return json.loads(path.read_text()) if path.is_file() else None


class Running:
    """A started lab process (its own process group); `wait()` or `kill()` it."""

    def __init__(self, command: DbtCommand, started: processes.Started, started_at: float) -> None:
        self.command = command
        self.process = started.process
        self.started = started_at
        self._output = started
        self._monotonic = time.monotonic()

    def wait(self, timeout_s: float) -> Finished:
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            self.kill()
            raise LabProcessError(f"{self.command.name} did not finish within {timeout_s:.0f} s; output in "
                                  f"{self.command.output_path}") from exc
        ended = time.monotonic()
        code = self.process.wait(timeout=30)
        return Finished(self.command.name, code, self.started, ended - self._monotonic, self._output.output())

    def kill(self) -> None:
        if self.process.poll() is None:
            processes.kill(self.process)


def start(command: DbtCommand) -> Running:
    """Start `command` in its own process group; it dies with the process that started it."""
    command.workdir.mkdir(parents=True, exist_ok=True)
    command.report_path.unlink(missing_ok=True)
    command.output_path.unlink(missing_ok=True)  # output.log holds the last run only
    started_at = time.time()
    started = processes.start(command.argv, command.output_path, env=command.environment(), cwd=command.workdir,
                              with_parent=True)
    return Running(command, started, started_at)


def run(command: DbtCommand, timeout_s: float) -> Finished:
    return start(command).wait(timeout_s)
