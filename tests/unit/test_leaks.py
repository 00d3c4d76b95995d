"""Issue 56's small leaks stay closed in the lab, the benchmarks and the tests:

- marker lines are read through the one reader (protocol.marker_payloads, or tests/expect.py's
  `markers` over it), not parsed by hand: hand parsers drifted from the reader (a time-stamped
  log format, a line that only quotes a marker's name);
- long-lived helper processes start through the one process shell (dbt_iceberg_maint.runtime.processes:
  own process group, appended log, stop by group), not a bare subprocess.Popen that leaves a
  JVM behind when a test fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("tests", "lab", "benchmarks")
# Installed dbt packages and build output are not our sources.
SKIPPED_PARTS = {"dbt_packages", "target", "__pycache__"}
THIS = Path(__file__).resolve()

# A marker name as a string literal handed to a string method, or tested with `in`.
HAND_PARSED_MARKER = re.compile(
    r"""\.(?:startswith|endswith|removeprefix|split|rsplit|partition|index|find)\(\s*f?["']ICEBERG_MAINT_"""
    r"""|["']ICEBERG_MAINT_[A-Z_]+ ?["']\s+in\s""")


def _sources() -> list[Path]:
    return sorted(path for folder in SCANNED for path in (ROOT / folder).rglob("*.py")
                  if not SKIPPED_PARTS.intersection(path.parts) and path.resolve() != THIS)


def _hits(pattern: re.Pattern[str]) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
            for path in _sources() for number, line in enumerate(path.read_text().splitlines(), 1)
            if pattern.search(line)]


@pytest.mark.parametrize("line", [
    'outcomes = [json.loads(m.split(" ", 1)[1]) for m in messages if m.startswith("ICEBERG_MAINT_CASE ")]',
    'document = json.loads(logged[-1].split("ICEBERG_MAINT_SNAPSHOTS", 1)[1])',
    "line = json.loads(message.removeprefix('ICEBERG_MAINT_GATE '))",
    'logged = [m for m in invocation.log_messages if "ICEBERG_MAINT_SNAPSHOTS" in m]',
])
def test_the_scan_sees_hand_parsing(line: str) -> None:
    assert HAND_PARSED_MARKER.search(line)


def test_marker_lines_are_read_through_the_one_reader() -> None:
    assert _sources()
    hits = _hits(HAND_PARSED_MARKER)
    assert not hits, ("marker lines parsed by hand; read them with tests.expect.markers or "
                      "dbt_iceberg_maint.protocol.marker_payloads:\n" + "\n".join(hits))


POPEN = re.compile(r"\bPopen\(")
# The bare Popens kept on purpose, with how many each file has (a new one there is caught too).
POPEN_ALLOWED = {
    # stdin and stdout are the writer's command channel; already under terminated_with_parent.
    "benchmarks/merge_conflicts.py": 1,
    # The writer's stdout is its answer; start would append it to a log with the JVM's stderr.
    "tests/integration/test_embedded_views.py": 1,
    # The starter is the process under test: SIGKILLed alone, what it started read from its stdout.
    "tests/lab/test_cluster.py": 1,
    "tests/thrift/test_thrift_server_process.py": 1,
    # stop's own test: a bare process group with a child and a bystander group it must not touch.
    "tests/unit/test_thrift_server.py": 2,
}


def test_the_scan_sees_a_popen() -> None:
    assert POPEN.search("writer = subprocess.Popen(command, stdout=log)")
    assert not POPEN.search("process: subprocess.Popen[bytes]")


def test_helper_processes_start_through_the_one_process_shell() -> None:
    found: dict[str, int] = {}
    for hit in _hits(POPEN):
        path = hit.split(":", 1)[0]
        found[path] = found.get(path, 0) + 1
    assert found == POPEN_ALLOWED, ("start helper processes with dbt_iceberg_maint.runtime.processes.start (or "
                                    "terminated_with_parent); a bare Popen needs a reason in POPEN_ALLOWED")
