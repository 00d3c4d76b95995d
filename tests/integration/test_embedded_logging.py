"""Plain `dbt` on the embedded runtime, as a user runs it (`eval "$(dbt-iceberg-maint env)"`, then
dbt with the integration project's `session` profile), in its own process and JVM: building a
new table prints no Java stack trace on stderr.

Iceberg's Hadoop catalog logged ~130 lines of `FileNotFoundException` per new table ("Error
reading version hint file", a warning it recovers from); the driver's log settings
(dbt_iceberg_maint/runtime/log4j2.properties, added to Spark's defaults) drop that one message.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dbt_iceberg_maint.runtime.invoke import INTEGRATION_PROJECT

pytestmark = pytest.mark.integration

STACK_FRAME = re.compile(r"^\s+at [\w$.<>/]+\(", re.MULTILINE)


def test_building_new_tables_with_plain_dbt_prints_no_java_stack_trace(installed_package: Path,
                                                                         tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYSPARK_GATEWAY")}
    env.update({"DBT_ICEBERG_MAINT_SCHEMA": "it_plain_dbt", "DBT_TARGET_PATH": str(tmp_path / "target"),
                "DBT_LOG_PATH": str(tmp_path / "logs"), "DBT_ICEBERG_MAINT_TARGET": "session"})
    project = shlex.quote(str(INTEGRATION_PROJECT))
    script = (f'eval "$({shlex.quote(str(bin_dir / "dbt-iceberg-maint"))} env --warehouse '
              f'{shlex.quote(str(tmp_path / "warehouse"))})" && '
              f"{shlex.quote(str(bin_dir / 'dbt'))} build --select raw_events event_log "
              f"--project-dir {project} --profiles-dir {project}")
    # Its own process group: the JVM goes with it whatever happens here.
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=600,
                          start_new_session=True)

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "OK created sql incremental model it_plain_dbt.event_log" in done.stdout  # a new table
    assert "Setting default log level" in done.stderr  # Spark's logging is on, only that message is off
    assert not STACK_FRAME.search(done.stderr), done.stderr[:4000]
    assert "HadoopTableOperations" not in done.stderr, done.stderr[:4000]
    assert "[Stage " not in done.stderr  # no progress bars either
