"""Packaging: the core (classify, --help) needs no Spark, PyHive or dbt adapter; extras as documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Runs the CLI in a fresh interpreter where importing the heavy packages fails.
BLOCKED_RUN = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('pyspark', 'pyhive', 'snowpark_connect_deps_iceberg', 'py4j'):
            raise ImportError('blocked for this test: ' + name)
sys.meta_path.insert(0, Block())
from dbt_iceberg_maint.cli import main
main(sys.argv[1:], prog_name='dbt-iceberg-maint')
"""


def run_blocked(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCKED_RUN, *args], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_help_and_classify_work_without_pyspark_or_pyhive() -> None:
    helped = run_blocked("--help")
    assert helped.returncode == 0, helped.stderr
    assert "classify" in helped.stdout and "run" in helped.stdout
    classified = run_blocked("classify", "--output", "json", "-",
                             stdin="org.apache.iceberg.exceptions.CommitFailedException: Commit failed")
    assert classified.returncode == 0, classified.stderr
    assert '"kind": "commit_failed"' in classified.stdout


def test_core_dependencies_leave_spark_and_thrift_to_extras() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"]).lower()
    extras = project["optional-dependencies"]
    assert "pyspark" not in core and "pyhive" not in core and "snowpark" not in core and "dbt-spark" not in core
    assert "pyiceberg[pyarrow,sql-postgres]" in core
    assert any(d.startswith("pyspark") for d in extras["embedded"])
    assert "snowpark-connect-deps-iceberg==1.0.2" in extras["embedded"]
    assert any("dbt-spark[session]" in d for d in extras["embedded"])
    assert any("PyHive" in d for d in extras["thrift"]) and not any("PyHive" in d for d in extras["embedded"])
    assert "dbt_iceberg_maint[embedded,thrift,report]" in extras["dev"]
    assert "matplotlib" not in core and any(d.startswith("matplotlib") for d in extras["report"])
