"""apply_table_properties on real Spark: the events model's declared policy (integration
project: isolation_level {delete: serializable, update: snapshot, merge: snapshot},
commit_retry {num_retries: 10, min_wait_ms: 100}, properties {write.metadata.previous-versions-max: 50})
is reconciled by its post-hook and by run-operation, altering only what differs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.maintenance.results import MaintenanceResult, parse_result_lines
from dbt_iceberg_maint.runtime.invoke import DbtInvocation

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration
CATALOGS = ("embedded", "hive_metastore")

DECLARED = {
    "write.delete.isolation-level": "serializable",
    "write.update.isolation-level": "snapshot",
    "write.merge.isolation-level": "snapshot",
    "commit.retry.num-retries": "10",
    "commit.retry.min-wait-ms": "100",
    "write.metadata.previous-versions-max": "50",
}


def tblproperties(spark: SparkSession, table: str) -> dict[str, str]:
    return {row["key"]: row["value"] for row in spark.sql(f"show tblproperties {table}").collect()}


def metadata_versions(spark: SparkSession, table: str) -> int:
    """Each ALTER TABLE writes a new metadata.json: this counts them."""
    return int(spark.sql(f"select count(*) from {table}.metadata_log_entries").collect()[0][0])


def property_results(messages: tuple[str, ...]) -> list[MaintenanceResult]:
    return [r for r in parse_result_lines(messages) if r.operation == "apply_table_properties"]


def test_post_hook_applies_policy_then_alters_nothing(spark: SparkSession, dbt_project: DbtProject) -> None:
    first = dbt_project("build", "--select", "+events", "--exclude", "test_type:data", batch=1)
    events = dbt_project.table("events")
    [created] = property_results(first.log_messages)
    assert created.status == "success"
    assert created.table.endswith(f"{dbt_project.schema}.events")
    assert set(created.metrics["changed"]) == set(DECLARED)
    assert {k: v for k, v in tblproperties(spark, events).items() if k in DECLARED} == DECLARED

    versions = metadata_versions(spark, events)
    second = dbt_project("run", "--select", "events", batch=2)
    [unchanged] = property_results(second.log_messages)
    assert unchanged.status == "skipped"
    assert unchanged.metrics["changed"] == {}
    # The MERGE commit adds one metadata version; the post-hook adds none.
    assert metadata_versions(spark, events) == versions + 1


def test_run_operation_reconciles_only_drifted_keys(spark: SparkSession, dbt_project: DbtProject) -> None:
    events = dbt_project.table("events")
    spark.sql(f"alter table {events} set tblproperties ('write.merge.isolation-level' = 'serializable', "
              f"'commit.retry.num-retries' = '4', 'write.target-file-size-bytes' = '1048576')")
    spark.sql(f"alter table {events} unset tblproperties ('commit.retry.min-wait-ms')")
    relation = f"{dbt_project.schema}.events"

    fixed = dbt_project("run-operation", "dbt_iceberg_maint.apply_table_properties",
                        "--args", json.dumps({"relation": relation}))
    [result] = property_results(fixed.log_messages)
    assert result.status == "success"
    assert result.metrics["changed"] == {
        "write.merge.isolation-level": {"from": "serializable", "to": "snapshot"},
        "commit.retry.num-retries": {"from": "4", "to": "10"},
        "commit.retry.min-wait-ms": {"from": None, "to": "100"},
    }
    assert result.sql == (f"alter table {relation} set tblproperties ('commit.retry.min-wait-ms' = '100', "
                          "'commit.retry.num-retries' = '10', 'write.merge.isolation-level' = 'snapshot')")
    properties = tblproperties(spark, events)
    assert {k: v for k, v in properties.items() if k in DECLARED} == DECLARED
    assert properties["write.target-file-size-bytes"] == "1048576"  # undeclared keys are left alone

    versions = metadata_versions(spark, events)
    again = dbt_project("run-operation", "dbt_iceberg_maint.apply_table_properties",
                        "--args", json.dumps({"relation": f"local.{relation}"}))
    [noop] = property_results(again.log_messages)
    assert (noop.status, noop.metrics["changed"], noop.sql) == ("skipped", {}, None)
    assert metadata_versions(spark, events) == versions


def test_var_switch_leaves_properties_alone(spark: SparkSession, dbt_project: DbtProject) -> None:
    """`dbt_iceberg_maint_enabled: false` switches everything off, apply_table_properties too: a
    drifted property stays drifted and the result says why."""
    events = dbt_project.table("events")
    spark.sql(f"alter table {events} set tblproperties ('commit.retry.num-retries' = '3')")
    versions = metadata_versions(spark, events)
    off = dbt_project("run-operation", "dbt_iceberg_maint.apply_table_properties",
                      "--args", json.dumps({"relation": f"{dbt_project.schema}.events"}),
                      "--vars", "{dbt_iceberg_maint_enabled: false}")
    [result] = property_results(off.log_messages)
    assert (result.status, result.reason, result.sql) == (
        "skipped", "maintenance disabled by var dbt_iceberg_maint_enabled: false", None)
    assert tblproperties(spark, events)["commit.retry.num-retries"] == "3"
    assert metadata_versions(spark, events) == versions


def test_invalid_policy_fails_and_changes_nothing(spark: SparkSession, dbt_project: DbtProject) -> None:
    events = dbt_project.table("events")
    before = (tblproperties(spark, events), metadata_versions(spark, events))
    failed = dbt_project(
        "run-operation", "dbt_iceberg_maint.apply_table_properties", "--args",
        json.dumps({"relation": f"{dbt_project.schema}.events",
                    "policy": {"isolation_level": "snapshot", "commit_retry": {"num_retries": -1}}}),
        expect_success=False,
    )
    assert not failed.success
    text = " ".join([str(failed.exception), *failed.log_messages])
    assert "commit_retry.num_retries = -1 is not allowed; expected a positive integer" in text
    assert (tblproperties(spark, events), metadata_versions(spark, events)) == before
    assert property_results(failed.log_messages) == []
    # Past a Java int, which Iceberg parses both properties as at every commit (set, every later
    # commit of the table would fail): refused before any statement.
    for policy, said in (
            ({"commit_retry": {"num_retries": 2**31}},
             "commit_retry.num_retries = 2147483648 is not allowed; expected at most 2147483647"),
            ({"expire_snapshots": {"retain_metadata_files": 2**31}},
             "expire_snapshots: argument `retain_metadata_files` is 2147483648; it must be at most 2147483647")):
        refused = dbt_project(
            "run-operation", "dbt_iceberg_maint.apply_table_properties", "--args",
            json.dumps({"relation": f"{dbt_project.schema}.events", "policy": {"isolation_level": "snapshot",
                                                                                **policy}}),
            expect_success=False,
        )
        text = " ".join([str(refused.exception), *refused.log_messages])
        assert not refused.success and said in text, text
        assert (tblproperties(spark, events), metadata_versions(spark, events)) == before
        assert property_results(refused.log_messages) == []


def test_table_without_a_declared_policy_is_skipped(spark: SparkSession, dbt_project: DbtProject) -> None:
    dbt_project("seed", "--select", "raw_users")
    users = dbt_project.table("raw_users")
    versions = metadata_versions(spark, users)
    invocation = dbt_project("run-operation", "dbt_iceberg_maint.apply_table_properties",
                             "--args", json.dumps({"relation": f"{dbt_project.schema}.raw_users"}))
    [result] = property_results(invocation.log_messages)
    assert result.status == "skipped"
    assert result.reason == "no isolation_level, commit_retry or properties declared"
    assert metadata_versions(spark, users) == versions


def test_the_expirys_metadata_file_retention_is_reconciled_and_a_contradiction_refused(
        spark: SparkSession, dbt_project: DbtProject) -> None:
    """`expire_snapshots.retain_metadata_files` declares the two properties each expiry sets:
    apply_table_properties reconciles them (that ALTER deletes the metadata files beyond them), and
    a `properties` entry giving one another value fails naming both, changing nothing."""
    table = dbt_project.table("props_retention")
    spark.sql(f"create table {table} (id bigint) using iceberg")
    for i in range(5):
        spark.sql(f"insert into {table} values ({i})")
    relation = f"{dbt_project.schema}.props_retention"

    def apply(policy: dict[str, object], expect_success: bool = True) -> DbtInvocation:
        return dbt_project("run-operation", "dbt_iceberg_maint.apply_table_properties", "--args",
                           json.dumps({"relation": relation, "policy": policy}), expect_success=expect_success)

    before = (tblproperties(spark, table), metadata_versions(spark, table))
    refused = apply({"expire_snapshots": {"retain_metadata_files": 2},
                     "properties": {"write.metadata.previous-versions-max": 9}}, expect_success=False)
    text = " ".join([str(refused.exception), *refused.log_messages])
    assert ("properties.write.metadata.previous-versions-max = 9 contradicts '2' that "
            "expire_snapshots.retain_metadata_files sets; declare it once") in text
    assert (tblproperties(spark, table), metadata_versions(spark, table)) == before

    [result] = property_results(apply({"expire_snapshots": {"retain_metadata_files": 2}}).log_messages)
    assert result.status == "success"
    assert result.metrics["changed"] == {
        "write.metadata.delete-after-commit.enabled": {"from": None, "to": "true"},
        "write.metadata.previous-versions-max": {"from": None, "to": "2"},
    }
    # The log keeps the current metadata file and 2 previous ones; the older files are gone.
    assert metadata_versions(spark, table) == 3
    assert spark.sql(f"select count(*), sum(id) from {table}").collect()[0] == (5, 10)
