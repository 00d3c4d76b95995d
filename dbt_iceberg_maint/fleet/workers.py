"""The fleet engine's workers: where a step's dbt invocation runs. Workers are dbt processes
(worker.py): dbtRunner is not safe for concurrent use in one process. At concurrency 1 without a
step timeout the one worker is this process (invoke_dbt in-process), as `maintain` always was.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from dbt_iceberg_maint.fleet.worker import invocation_from_dict
from dbt_iceberg_maint.runtime import processes
from dbt_iceberg_maint.runtime.invoke import DbtInvocation, ParsedManifests, invoke_dbt

PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent
POLL_S = 0.05
WORKER_START_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Ran:
    invocation: DbtInvocation | None
    timed_out: bool = False
    error: str | None = None  # the worker died or could not be reached


class InProcessWorker:
    """The one worker of a run at concurrency 1 without a step timeout: dbt in this process.
    `flags`: the dbt flags every invocation of the run ends with (`--target`, `--vars`): the
    project is parsed once with them and its manifest given to every invocation."""

    mode = "in_process"

    def __init__(self, index: int, env: Mapping[str, str], project_dir: Path, profiles_dir: Path,
                 flags: Sequence[str]) -> None:
        self.index, self.env, self.project_dir, self.profiles_dir = index, dict(env), project_dir, profiles_dir
        self.flags = list(flags)
        self.manifests = ParsedManifests()

    def run(self, args: Sequence[str], timeout_s: float | None) -> Ran:
        manifest = self.manifests.get(self.project_dir, self.profiles_dir, self.flags, self.env)
        return Ran(invoke_dbt(list(args), self.project_dir, self.profiles_dir, self.env, manifest=manifest))

    def start(self) -> None:
        self.manifests.get(self.project_dir, self.profiles_dir, self.flags, self.env)

    def close(self) -> None:
        pass


class SubprocessWorker:
    """A worker process (worker.py) in its own process group, started on first use and again
    after a timeout killed it."""

    mode = "subprocess"

    def __init__(self, index: int, env: Mapping[str, str], project_dir: Path, profiles_dir: Path,
                 flags: Sequence[str], work_dir: Path, parse_state: Path | None = None,
                 parse_once: bool = True) -> None:
        self.index, self.project_dir, self.profiles_dir, self.work_dir = index, project_dir, profiles_dir, work_dir
        self.flags = list(flags)
        # False: every job parses (partially) with its own flags, for jobs whose --vars differ.
        self.parse_once = parse_once
        # Its own dbt target and log folders: concurrent dbt processes must not write one
        # partial_parse.msgpack or manifest.json at once. It starts from a copy of the project's
        # `parse_state` (partial_parse.msgpack) so that its one parse is partial, not full.
        target = work_dir / f"target-{index}"
        if parse_state is not None and parse_state.is_file():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(parse_state, target / parse_state.name)
        self.env = {**os.environ, **env, "DBT_TARGET_PATH": str(target),
                    "DBT_LOG_PATH": str(work_dir / f"logs-{index}"),
                    "PYTHONPATH": os.pathsep.join([str(PACKAGE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
        self.process: subprocess.Popen[str] | None = None
        self.log: IO[str] | None = None
        self.jobs = 0
        self.starts = 0

    def _start(self) -> subprocess.Popen[str]:
        """The worker process, started (and waited for: dbt imported) when there is none."""
        if self.process is None or self.process.poll() is not None:
            if self.log is None:
                self.log = open(self.work_dir / f"worker-{self.index}.log", "a")  # noqa: SIM115 (closed in close())
            self.starts += 1
            ready = self.work_dir / f"ready-{self.index}-{self.starts}"
            preload = {"project_dir": str(self.project_dir), "profiles_dir": str(self.profiles_dir),
                       "flags": self.flags}
            self.process = subprocess.Popen([sys.executable, "-m", "dbt_iceberg_maint.fleet.worker", str(ready),
                                             *([json.dumps(preload)] if self.parse_once else [])],
                                            stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT,
                                            env=self.env, cwd=str(self.project_dir), text=True,
                                            start_new_session=True)
            deadline = time.monotonic() + WORKER_START_TIMEOUT_S
            while not ready.exists() and self.process.poll() is None and time.monotonic() < deadline:
                time.sleep(POLL_S)
        return self.process

    def start(self) -> None:
        self._start()

    def run(self, args: Sequence[str], timeout_s: float | None) -> Ran:
        process = self._start()
        self.jobs += 1
        out = self.work_dir / f"job-{self.index}-{self.jobs}.json"
        job = {"args": list(args), "project_dir": str(self.project_dir), "profiles_dir": str(self.profiles_dir),
               "out": str(out)}
        assert process.stdin is not None
        try:
            process.stdin.write(json.dumps(job) + "\n")
            process.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self._kill()
            return Ran(None, error=f"worker {self.index} could not take the job: {exc}")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not out.exists():
            if process.poll() is not None:
                return Ran(None, error=f"worker {self.index} exited with code {process.returncode}; "
                                       f"its log: {self.work_dir / f'worker-{self.index}.log'}")
            if deadline is not None and time.monotonic() > deadline:
                self._kill()
                return Ran(None, timed_out=True)
            time.sleep(POLL_S)
        return Ran(invocation_from_dict(json.loads(out.read_text())))

    def _kill(self) -> None:
        if self.process is not None:
            processes.stop(self.process, first=signal.SIGKILL)  # type: ignore[arg-type]
            self.process = None

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            assert self.process.stdin is not None
            try:
                self.process.stdin.close()  # the worker ends after its current job
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
            processes.stop(self.process)  # type: ignore[arg-type]
        self.process = None
        if self.log is not None:
            self.log.close()


# Either kind: the engine runs them alike.
Worker = InProcessWorker | SubprocessWorker
