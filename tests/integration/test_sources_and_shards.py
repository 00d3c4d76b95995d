"""Tables ingestion writes, declared as dbt sources with `meta.iceberg_maint`, are maintained by the
macros (iceberg_maintenance, maintain) and by the Python commands (plan, maintain) like models; and
`shard: 'K/N'` splits a selection into disjoint shares, the same in the macros and in Python. A
project written for this test, on the embedded default catalog, dbt in-process."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from dbt_iceberg_maint.cli import main
from dbt_iceberg_maint.maintenance.results import MaintenanceResult, parse_result_lines
from dbt_iceberg_maint.policy.selection import shard_of
from dbt_iceberg_maint.runtime.invoke import DbtInvocation, invoke_dbt

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

SCHEMA = "shards_models"
LANDING = "shards_landing"
DECLARED = [f"feed_{i}" for i in range(8)]  # sources with a policy, never built: planned and skipped
PROJECT = """\
name: sources_and_shards
version: "1.0"
config-version: 2
profile: sources_and_shards
models:
  sources_and_shards:
    +file_format: iceberg
"""
PROFILE = f"""\
sources_and_shards:
  target: session
  outputs:
    session: {{type: spark, method: session, host: NA, schema: {SCHEMA}, threads: 1}}
"""
SOURCES = f"""\
sources:
  - name: raw
    schema: {LANDING}
    tables:
      - name: events
        meta: {{iceberg_maint: {{compaction: {{min_input_files: 2}}}}}}
      - name: users  # no policy: maintained only when named
""" + "".join(f"      - name: {name}\n        meta: {{iceberg_maint: {{}}}}\n" for name in DECLARED)


def dbt(project: Path, *args: str, expect_success: bool = True) -> DbtInvocation:
    invocation = invoke_dbt(list(args), project_dir=project, profiles_dir=project)
    assert invocation.success is expect_success, (args, invocation.exception, invocation.log_messages[-40:])
    return invocation


def said(invocation: DbtInvocation) -> str:
    """What dbt reported of a failed invocation: its log and its exception."""
    return " ".join(invocation.log_messages) + (invocation.exception or "")


def maintenance(project: Path, expect_success: bool = True, **args: object) -> list[MaintenanceResult]:
    invocation = dbt(project, "run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args", json.dumps(args),
                     expect_success=expect_success)
    return parse_result_lines(invocation.log_messages)


@pytest.fixture(scope="module")
def project(spark: SparkSession, warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sources_and_shards")
    (root / "models").mkdir()
    (root / "dbt_project.yml").write_text(PROJECT)
    (root / "profiles.yml").write_text(PROFILE)
    (root / "packages.yml").write_text(f"packages:\n  - local: {Path(__file__).resolve().parents[2]}\n")
    (root / "models" / "sources.yml").write_text(SOURCES)
    (root / "models" / "daily.sql").write_text(textwrap.dedent("""\
        {{ config(materialized='table') }}
        select * from {{ source('raw', 'events') }}
        """))
    dbt(root, "deps", "--quiet")
    spark.sql(f"create namespace if not exists {LANDING}")
    spark.sql(f"create table {LANDING}.events (id bigint, kind string) using iceberg")
    spark.sql(f"create table {LANDING}.users (id bigint) using iceberg")
    for batch in range(3):  # an ingestion job's small appends
        spark.sql(f"insert into {LANDING}.events values ({batch}, 'click')")
    return root


def test_a_source_with_a_policy_is_maintained_by_the_macros_and_by_python(
        spark: SparkSession, warehouse: Path, project: Path) -> None:
    def data_files() -> int:
        return int(spark.sql(f"select count(*) from {LANDING}.events.data_files").collect()[0][0])

    # By default: the Iceberg model (not built yet: skipped) and every source that declares a
    # policy; `users`, which declares none, is not taken.
    default = {r.table: r for r in maintenance(project, operations=["compaction"], dry_run=True)}
    assert set(default) == {f"{SCHEMA}.daily", f"{LANDING}.events", *(f"{LANDING}.{n}" for n in DECLARED)}, default
    assert default[f"{SCHEMA}.daily"].reason == "table does not exist (model not built yet?)"

    # The source's own policy (min_input_files 2) decides and shapes the CALL.
    [compacted] = maintenance(project, select=["source:raw.events"], operations=["compaction"])
    assert (compacted.status, compacted.reason) == ("success", "a partition has 3 small files, >= min_input_files 2")
    assert "'min-input-files', '2'" in (compacted.sql or "") and data_files() == 1

    # maintain() on the source's relation reads the same policy.
    for batch in range(3, 5):
        spark.sql(f"insert into {LANDING}.events values ({batch}, 'view')")
    planned = dbt(project, "run-operation", "dbt_iceberg_maint.maintain", "--args",
                  json.dumps({"relation": f"{LANDING}.events", "operations": ["compaction"], "dry_run": True}))
    [dry] = parse_result_lines(planned.log_messages)
    assert dry.status == "dry_run" and "'min-input-files', '2'" in (dry.sql or ""), dry

    # A source named without a policy gets the defaults; a source naming nothing is refused.
    [users] = maintenance(project, select=["source:raw.users"], operations=["compaction"], dry_run=True)
    assert users.reason == "the table has 0 data files, fewer than min_input_files 5: nothing to compact", users
    refused = dbt(project, "run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args",
                  json.dumps({"select": ["source:raw.nope"]}), expect_success=False)
    assert "argument `select` contains 'source:raw.nope', which names no enabled source table" in said(refused)

    # The Python planner and maintain take sources the same way.
    runner = CliRunner()
    plan = runner.invoke(main, ["plan", "--warehouse", str(warehouse), "--project-dir", str(project),
                                "--profiles-dir", str(project), "--select", "source:raw.events",
                                "--operation", "compaction", "--output", "json"])
    assert plan.exit_code == 0, plan.output
    [row] = json.loads(plan.output)
    assert (row["model"], row["table"], row["status"]) == ("source:raw.events", f"{LANDING}.events", "dry_run"), row
    assert row["reason"] == "a partition has 3 small files, >= min_input_files 2"  # the compacted one is small too
    report = warehouse.parent / "sources_maintain.json"  # in-process, dbt's log shares the command's stdout
    done = runner.invoke(main, ["maintain", "--select", "source:raw.events", "--operation", "compaction",
                                "--project-dir", str(project), "--profiles-dir", str(project), "--report", str(report)])
    assert done.exit_code == 0, done.output
    assert [(r["table"], r["status"]) for r in json.loads(report.read_text())["results"]] == [
        (f"{LANDING}.events", "success")]
    assert data_files() == 1
    assert sorted(r[0] for r in spark.sql(f"select id from {LANDING}.events").collect()) == [0, 1, 2, 3, 4]


def test_shards_split_the_selection_into_disjoint_shares_as_python_computes_them(project: Path) -> None:
    everything = {r.table for r in maintenance(project, operations=["compaction"], dry_run=True)}
    shares = [{r.table for r in maintenance(project, operations=["compaction"], dry_run=True, shard=f"{k}/3")}
              for k in (1, 2, 3)]
    assert sum(len(share) for share in shares) == len(everything) and set().union(*shares) == everything
    for k, share in enumerate(shares, start=1):
        assert share == {t for t in everything if shard_of(*t.split("."), 3) == k}, (k, share)
    assert all(shares), shares  # 10 tables reach all three shares here

    for bad in ("4/3", "0/3", "two/3"):
        refused = dbt(project, "run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args",
                      json.dumps({"shard": bad}), expect_success=False)
        assert f"argument `shard` is \"{bad}\"; expected 'K/N' with whole numbers 1 <= K <= N" in said(refused)
    bad_cli = CliRunner().invoke(main, ["maintain", "--shard", "4/3", "--project-dir", str(project)])
    assert bad_cli.exit_code == 2 and "--shard '4/3': expected 'K/N'" in bad_cli.output
