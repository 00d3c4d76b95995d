"""The README's main command (`dbt-iceberg-maint demo`), run whole as a user runs it: from the built
wheel, installed with `[embedded]` into a clean venv, from any directory.

One test, slow (a wheel build, a venv, pip install from pip's cache, the whole demo in its own
JVM): deselect it locally with `-m "not wheel"`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dbt_iceberg_maint.cli.demo import DEMO_TABLES

pytestmark = [pytest.mark.integration, pytest.mark.wheel]

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 900) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{' '.join(map(str, args))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def source_tree(tmp_path: Path) -> Path:
    """The checkout's own files (tracked, or new and not ignored), copied: a build in the checkout
    itself would make setuptools walk .venv, warehouses and dbt's build output (minutes)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    tree = tmp_path / "source"
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    return tree


def health_rows(output: str, title: str) -> dict[str, list[str]]:
    """The rows of a rich table in the demo's output, by table name."""
    section = output.split(title, 1)[1]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]
        name = cells[0].rsplit(".", 1)[-1] if cells else None
        if name in DEMO_TABLES:
            rows[name] = cells
        elif rows and not cells:
            break
    return rows


def assert_the_demo_built_maintained_and_recovered(output: str) -> None:
    before = health_rows(output, "Iceberg table health (from metadata tables)")
    assert set(before) == set(DEMO_TABLES), output  # health for every built Iceberg table (>= 3)
    # columns: table, data files, small files, bytes, delete files, records, snapshots, manifests, partitions
    assert all(int(cells[1]) > 0 and int(cells[6]) > 0 for cells in before.values())
    assert int(before["events"][8]) > 1  # day-partitioned
    # Prose is matched with line breaks as spaces: the console wraps long lines at its width.
    prose = " ".join(output.split())
    assert "batch 6: dbt run (incremental MERGE / append) ok" in prose
    assert "iceberg_maintenance: one result per table and operation" in prose
    after = health_rows(output, "Iceberg table health before -> after maintenance")
    assert "->" in after["event_log"][1]  # compaction changed event_log's data files
    # columns: table, data files, small files, max small/partition, snapshots, manifests, records
    for name in ("events", "event_log"):
        counts = [int(n) for n in re.findall(r"\d+", after[name][4])]
        assert counts[-1] <= counts[0], f"{name}: snapshots grew after maintenance: {after[name][4]}"
    # Cold scoping: old days compacted, the days still written to left alone.
    cold = re.search(r"events data files: cold days (\d+) -> (\d+) \(compacted\); "
                     r"hot days (.*?) \((left alone|TOUCHED)\)", prose)
    assert cold and int(cold[2]) < int(cold[1]), output
    assert cold[4] == "left alone", cold[3]
    assert "conflict_merge: missing_files_to_delete -> re-run -> success" in prose
    assert re.search(r"conflict_merge_unsafe: \w+ -> write verified not landed -> re-run -> success; "
                     r"(\d+) rows, \1 distinct event_ids; snapshot log: no data-changing snapshot", prose)
    assert "(no duplicates)" in prose
    assert "conflict_sql_error: not_iceberg_conflict -> not re-run: " in prose
    assert "info merge_without_partition_predicate: incremental merge into Iceberg table" in prose  # lint step
    assert "lint exit code: 0" in prose
    # The health test fails before maintenance naming the threshold, passes after; history rows.
    assert re.search(r"events_healthy: FAIL analytics\.events has \d+ snapshots, more than 4", prose), prose
    assert prose.index("events_healthy: FAIL") < prose.index("events_healthy: PASS")
    history = health_rows(output, "iceberg_maint_history: the executed steps of the nightly run")
    assert set(history) == {"events", "event_log"}, history  # the last row of each table
    assert history["event_log"][1:3] == ["rewrite_manifests", "success"], history
    assert re.search(r"1\. analytics\.\w+: score \d+", prose) and "(self-contained: open it in a browser)" in prose


@pytest.mark.timeout(2400)
def test_the_built_wheel_runs_the_whole_demo_from_any_directory(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", dist, source_tree(tmp_path),
        cwd=tmp_path)
    (wheel,) = dist.glob("dbt_iceberg_maint-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    # The dbt package and the demo's project ship as package data; build output and local state do not.
    for shipped in ("dbt_project.yml", "macros/operations/maintain.sql", "models/iceberg_maint_runs.sql",
                    "integration_tests/dbt_project.yml",
                    "integration_tests/packages.yml", "integration_tests/profiles.yml"):
        assert f"dbt_iceberg_maint/_project/{shipped}" in names
    assert "dbt_iceberg_maint/runtime/log4j2.properties" in names  # the embedded runtime's driver log settings
    assert not [n for n in names if "/target/" in n or "/dbt_packages/" in n or n.endswith(".user.yml")]
    assert not [n for n in names if n.startswith("tests/")] and "python_udfs/conflict_gate.py" not in names

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    # --no-compile: the demo compiles the modules it imports; byte-compiling all of pyspark and dbt
    # up front is work this test does not need.
    run(python, "-m", "pip", "install", "--quiet", "--no-compile", f"{wheel}[embedded]", cwd=tmp_path)
    # PyHive belongs to the `thrift` extra only.
    assert subprocess.run([str(python), "-m", "pip", "show", "PyHive"], capture_output=True).returncode != 0

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"}
           and not k.startswith("DBT_")}
    out = run(venv / "bin" / "dbt-iceberg-maint", "demo", "--workdir", "work", cwd=elsewhere, env=env, timeout=2000)
    assert_the_demo_built_maintained_and_recovered(out)
    assert "conflict_merge_unsafe: missing_files_to_delete -> write verified not landed -> re-run -> success" in out
    # dbt ran a copy under the work directory, never inside site-packages.
    assert (elsewhere / "work" / "project" / "integration_tests" / "target").is_dir()
    # The report the demo ends with: one page naming both maintained tables, its JSON and charts.
    page = (elsewhere / "work" / "report" / "report.html").read_text()
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)  # base64 may spell anything
    assert "analytics.events" in text and "analytics.event_log" in text and "http" not in text
    assert (elsewhere / "work" / "report" / "report.json").is_file()
    assert list((elsewhere / "work" / "report").glob("*.png"))
    (installed,) = venv.glob("lib/python*/site-packages/dbt_iceberg_maint/_project/integration_tests")
    assert not (installed / "target").exists() and not (installed / "dbt_packages").exists()
