"""The one process shell for long-running helpers (a Spark Thrift Server, a standalone cluster's
daemons, PostgreSQL, the lab's workers): start in a process group of its own with output appended
to a log, wait until it is ready, read its part of the log, end it with its parent, stop it by pid.

A log may be shared by several starts (appended): `Started.offset` is where this process's lines
begin, so a previous process's lines are never read as this one's.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from dbt_iceberg_maint.errors import RuntimeSetupError

T = TypeVar("T")
STOP_TIMEOUT_S = 30.0


def terminated_with_parent(command: Sequence[str], death_signal: str = "TERM",
                           setpriv_options: Sequence[str] = ()) -> list[str]:
    """`command` under `setpriv --pdeathsig <signal>`: Linux signals it when the thread that
    started it ends (the whole process included, even by SIGKILL). The death signal survives an
    exec chain such as setpriv -> spark-submit -> spark-class -> java, which keeps the pid (no
    pre-exec hook in this multi-threaded process). `setpriv_options` go before it (e.g. --reuid)."""
    setpriv = shutil.which("setpriv")
    if not sys.platform.startswith("linux") or setpriv is None:
        raise RuntimeSetupError("stop_with_parent needs Linux and util-linux's setpriv "
                                "(Debian/Ubuntu: apt-get install util-linux)")
    return [setpriv, *setpriv_options, "--pdeathsig", death_signal, "--", *command]


@dataclass(frozen=True)
class Started:
    """A process started by `start`: the leader of its own process group."""

    process: subprocess.Popen[bytes]
    log: Path
    offset: int  # where this process's lines start in the (appended) log

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def output(self) -> str:
        """What this process wrote to its log so far."""
        return read_from(self.log, self.offset)


def start(command: Sequence[str], log: Path, *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
          with_parent: bool = False, stdin: int | IO[bytes] | None = subprocess.DEVNULL) -> Started:
    """Start `command` in a session (process group) of its own, stdout and stderr appended to
    `log`; with_parent: it also ends when the starting thread does (`terminated_with_parent`)."""
    argv = terminated_with_parent(command) if with_parent else list(command)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        offset = out.tell()
        try:
            process = subprocess.Popen(argv, cwd=cwd, env=None if env is None else dict(env), stdout=out,
                                       stderr=subprocess.STDOUT, stdin=stdin, start_new_session=True)
        except OSError as exc:
            raise RuntimeSetupError(f"cannot start {argv[0]}: {exc}") from exc
    return Started(process, log, offset)


def read_from(path: Path, offset: int = 0) -> str:
    if not path.is_file():
        return ""
    with path.open("rb") as file:
        file.seek(offset)
        return file.read().decode(errors="replace")


def tail(path: Path, lines: int = 40) -> str:
    if not path.is_file():
        return "(no log written)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def wait_until(ready: Callable[[], T | None], started: Started, timeout_s: float, *,
               exited: Callable[[int | None], str], timed_out: Callable[[], str], interval_s: float = 0.25) -> T:
    """Poll `ready` until it returns a value. When the process exits first, or `timeout_s` passes,
    a RuntimeSetupError with the caller's sentence (`exited(code)`, `timed_out()`) and the last
    lines of the process's log."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not started.alive():
            raise RuntimeSetupError(f"{exited(started.process.returncode)}; last lines of {started.log}:\n"
                                    f"{tail(started.log)}")
        found = ready()
        if found is not None:
            return found
        time.sleep(interval_s)
    raise RuntimeSetupError(f"{timed_out()} within {timeout_s:.0f} s; last lines of {started.log}:\n"
                            f"{tail(started.log)}")


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Signal a whole process group; one that already ended is not an error."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def group_alive(pgid: int) -> bool:
    """Whether any process of the group `pgid` is still alive."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def pid_alive(pid: int) -> bool:
    """Whether `pid` still runs; reaps it when it is this process's own child (no zombie)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for_group_exit(pgid: int, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGKILL what is left of the group and wait (bounded) until the kernel has removed it."""
    if group_alive(pgid):
        signal_group(pgid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while group_alive(pgid):
        if time.monotonic() > deadline:
            raise RuntimeSetupError(f"process group {pgid} survived SIGKILL for {timeout_s:.0f} s")
        time.sleep(0.05)


def stop(process: subprocess.Popen[bytes], timeout_s: float = STOP_TIMEOUT_S,
         first: signal.Signals = signal.SIGTERM) -> int | None:
    """`first` to the process's group, SIGKILL if it lingers past `timeout_s`; then whatever is
    left of the group (children, e.g. a worker's executors) must go too. Its exit code."""
    if process.poll() is None:
        signal_group(process.pid, first)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            signal_group(process.pid, signal.SIGKILL)
            process.wait(timeout=timeout_s)
    wait_for_group_exit(process.pid, timeout_s)
    return process.returncode


def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the whole group at once (a crash, or a process past its deadline)."""
    signal_group(process.pid, signal.SIGKILL)
    process.wait(timeout=STOP_TIMEOUT_S)


def stop_pid(pid: int, timeout_s: float = STOP_TIMEOUT_S, first: signal.Signals = signal.SIGTERM,
             whole_group: bool = True) -> None:
    """`stop` for a process known by its pid only (recorded in a state file, or a server whose
    children must get no signal of their own: `whole_group=False`)."""
    def send(sig: signal.Signals) -> None:
        if whole_group:
            signal_group(pid, sig)
        else:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def running() -> bool:
        return group_alive(pid) if whole_group else pid_alive(pid)

    send(first)
    deadline = time.monotonic() + timeout_s
    while running() and time.monotonic() < deadline:
        time.sleep(0.1)
    if whole_group:
        wait_for_group_exit(pid, timeout_s)
        return
    if running():
        send(signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() > deadline:
            raise RuntimeSetupError(f"process {pid} survived SIGKILL for {timeout_s:.0f} s")
        time.sleep(0.05)
