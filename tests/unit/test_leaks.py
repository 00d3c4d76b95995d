"""Issue 56's small leaks stay closed: the lab, the benchmarks and the tests read marker lines
through the one reader (protocol.marker_payloads, or tests/expect.py's `markers` over it) instead
of parsing `ICEBERG_MAINT_…` lines by hand, which drifted from the reader before (a time-stamped
log format, a line that only quotes a marker's name)."""

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
