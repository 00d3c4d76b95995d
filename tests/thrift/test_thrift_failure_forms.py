"""Every form in which a Thrift client reports a server error classifies alike, from real errors.

The suite's Spark Thrift Server raises real Iceberg errors (a procedure's invalid argument, the
24 h orphan guard, a ValidationException); each is read back as

- `pyhive`: the raw PyHive exception (`TExecuteStatementResp(status=TStatus(..., infoMessages=
  ['*org.apache.hive.service.cli.HiveSQLException:Error running query: <class>: <message>:NN:NN',
  ...]))`, records packed as `*class:message:line:col` strings, frames as `class:method:file:line`);
- `dbt_spark`: the response's `errorMessage`, which dbt-spark's thrift connection raises as the
  node's message;
- `beeline`: pyspark's own `bin/beeline` (JDBC) output.

Each text is compared with the committed fixture `tests/unit/failures/thrift__<case>__<form>`:
both must classify as the fixture's JSON says, and keep the form's shape. Set
DBT_ICEBERG_MAINT_RECORD=1 to rewrite the fixtures from this run.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.conflicts import classify
from dbt_iceberg_maint.runtime.thrift_server import ThriftServer, pyspark_home

if TYPE_CHECKING:
    from tests.thrift.conftest import ThriftSql

pytestmark = pytest.mark.integration

FAILURES = Path(__file__).resolve().parents[1] / "unit" / "failures"
RECORD = os.environ.get("DBT_ICEBERG_MAINT_RECORD") == "1"
TABLE = "local.failure_forms.events"
VALIDATION = "org.apache.iceberg.exceptions.ValidationException"
ILLEGAL_ARGUMENT = "java.lang.IllegalArgumentException"


@dataclass(frozen=True)
class Case:
    name: str
    sql: str
    kind: str
    exception_class: str | None


CASES = (
    Case("invalid_argument", f"CALL local.system.expire_snapshots(table => '{TABLE}', retain_last => 0)",
         "invalid_request", ILLEGAL_ARGUMENT),
    Case("orphan_guard", f"CALL local.system.remove_orphan_files(table => '{TABLE}', "
         "older_than => TIMESTAMP '2999-01-01 00:00:00')", "invalid_request", ILLEGAL_ARGUMENT),
    # An Iceberg ValidationException whose message is no commit conflict: never retryable.
    Case("validation_exception", f"CALL local.system.cherrypick_snapshot('{TABLE}', 1)",
         "not_iceberg_conflict", VALIDATION),
)
# What marks each form, in the fresh text and in the committed one.
SHAPES: dict[str, Callable[[str], bool]] = {
    "pyhive": lambda text: "TExecuteStatementResp(status=TStatus(" in text
    and "infoMessages=['*org.apache.hive.service.cli.HiveSQLException:Error running query: " in text,
    "dbt_spark": lambda text: text.startswith("Error running query: "),
    "beeline": lambda text: "Error: org.apache.hive.service.cli.HiveSQLException: Error running query: " in text,
}


@pytest.fixture(scope="module")
def forms(thrift_server: ThriftServer, thrift_sql: ThriftSql) -> dict[str, dict[str, str]]:
    """Each case's failure text in each form, from the real server."""
    from pyhive.exc import OperationalError

    thrift_sql.execute("create namespace if not exists local.failure_forms")
    thrift_sql.execute(f"create table if not exists {TABLE} (id int) using iceberg")
    thrift_sql.execute(f"insert into {TABLE} values (1)")
    texts: dict[str, dict[str, str]] = {}
    for case in CASES:
        with pytest.raises(OperationalError) as raised:
            thrift_sql.execute(case.sql)
        response = raised.value.args[0]
        texts[case.name] = {
            "pyhive": str(raised.value),
            "dbt_spark": response.status.errorMessage,
            "beeline": beeline(thrift_server, case.sql),
        }
    return texts


def beeline(server: ThriftServer, sql: str) -> str:
    home = pyspark_home()
    env = {**os.environ, "SPARK_HOME": str(home)}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run(
        [str(home / "bin" / "beeline"), "-u", f"jdbc:hive2://{server.host}:{server.port}/default", "-n", "pytest",
         "--silent=true", "-e", sql],
        capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0, done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.mark.parametrize("form", list(SHAPES))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_thrift_client_form_classifies_alike(case: Case, form: str, forms: dict[str, dict[str, str]]) -> None:
    text = forms[case.name][form]
    fixture = FAILURES / f"thrift__{case.name}__{form}"
    result = classify(text)
    verdict = {"kind": result.kind, "retryable": result.retryable, "exception_class": result.exception_class,
               "files": list(result.files)}
    assert SHAPES[form](text), text
    assert (result.kind, result.exception_class) == (case.kind, case.exception_class), text
    if RECORD:
        fixture.with_suffix(".txt").write_bytes(text.encode())
        fixture.with_suffix(".json").write_text(json.dumps(verdict, indent=2) + "\n")
    committed = fixture.with_suffix(".txt").read_bytes().decode("utf-8")
    assert SHAPES[form](committed)
    assert json.loads(fixture.with_suffix(".json").read_text()) == verdict
