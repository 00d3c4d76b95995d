"""Each procedure macro on a real Iceberg table in a real bad state, through dbt."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dbt_iceberg_maint.maintenance.results import parse_result_lines
from dbt_iceberg_maint.runtime.spark import CatalogSpec, prepare_warehouse
from lab.lake import create_v3
from tests.expect import markers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration
CATALOGS = ("embedded", "hive_metastore")

HOUR = 3600


def call(dbt_project: DbtProject, macro: str, expect_success: bool = True, vars: str | None = None, **kwargs: Any):
    """Run one package macro through the harness; return (invocation, result lines, returned)."""
    args = ["run-operation", "iceberg_maint_call", "--args", json.dumps({"macro_name": macro, "kwargs": kwargs})]
    if vars:
        args += ["--vars", vars]
    invocation = dbt_project(*args, expect_success=expect_success)
    returned = [case["value"] for case in markers(invocation.log_messages, "ICEBERG_MAINT_CASE")]
    return invocation, parse_result_lines(invocation.log_messages), (returned[0] if returned else None)


def scalar(spark: SparkSession, sql: str) -> Any:
    return spark.sql(sql).collect()[0][0]


def current_snapshot(spark: SparkSession, table: str) -> int:
    return scalar(spark, f"select snapshot_id from {table}.snapshots order by committed_at desc limit 1")


def data_files(spark: SparkSession, table: str) -> int:
    return scalar(spark, f"select count(*) from {table}.data_files")


def fingerprint(spark: SparkSession, table: str) -> tuple[int, int]:
    row = spark.sql(f"select count(*) as n, sum(hash(id, part)) as h from {table}").collect()[0]
    return row["n"], row["h"]


@pytest.fixture(scope="module")
def schema(spark: SparkSession, dbt_project: DbtProject) -> str:
    spark.sql(f"create namespace if not exists local.{dbt_project.schema}")
    return dbt_project.schema


def small_files_table(spark: SparkSession, name: str, inserts_per_part: int, parts: tuple[str, ...] = ("a",)) -> str:
    spark.sql(f"create or replace table {name} (id bigint, part string) using iceberg partitioned by (part)")
    for i in range(inserts_per_part):
        values = ", ".join(f"({i * 10 + j}, '{part}')" for j, part in enumerate(parts))
        spark.sql(f"insert into {name} values {values}")
    return name


def test_rewrite_data_files_merges_small_files_and_keeps_the_data(
    spark: SparkSession, dbt_project: DbtProject, schema: str
) -> None:
    table = small_files_table(spark, f"local.{schema}.compact", 6, parts=("a", "b"))
    before = fingerprint(spark, table)
    assert data_files(spark, table) == 12

    # Only partition a (the where literal needs quotes escaped inside the CALL's string).
    _, results, returned = call(
        dbt_project,
        "rewrite_data_files",
        relation=f"{schema}.compact",
        where="part = 'a'",
        options={"min-input-files": 2},
    )

    (result,) = results
    assert result.status == "success" and result.operation == "rewrite_data_files"
    assert result.table == f"{schema}.compact"
    assert result.metrics["rewritten_data_files_count"] == 6
    assert result.metrics["added_data_files_count"] == 1
    assert "where => 'part = \\'a\\''" in result.sql
    assert returned["rewritten_data_files_count"] == 6 and returned["status"] == "success"
    assert returned["sql"] == result.sql and returned["duration_ms"] >= 0
    assert set(returned) >= {
        "added_data_files_count",
        "rewritten_bytes_count",
        "failed_data_files_count",
        "removed_delete_files_count",
    }
    files_by_part = dict(spark.sql(f"select partition.part, count(*) from {table}.data_files group by 1").collect())
    assert files_by_part == {"a": 1, "b": 6}
    assert fingerprint(spark, table) == before


def test_rewrite_data_files_sort_strategy_and_dry_run(
    spark: SparkSession, dbt_project: DbtProject, schema: str
) -> None:
    table = small_files_table(spark, f"local.{schema}.sorted", 3)
    snapshot = current_snapshot(spark, table)

    _, results, returned = call(
        dbt_project, "rewrite_data_files", relation=f"{schema}.sorted", sort_order="id DESC NULLS LAST", dry_run=True
    )
    assert [(r.status, r.operation) for r in results] == [("dry_run", "rewrite_data_files")]
    assert "strategy => 'sort', sort_order => 'id DESC NULLS LAST'" in results[0].sql
    assert returned["status"] == "dry_run"
    assert current_snapshot(spark, table) == snapshot  # nothing ran

    _, results, _ = call(
        dbt_project,
        "rewrite_data_files",
        relation=f"{schema}.sorted",
        strategy="sort",
        sort_order="zorder(id, part)",
        options={"rewrite-all": True},
    )
    assert results[0].status == "success" and results[0].metrics["rewritten_data_files_count"] == 3
    assert data_files(spark, table) == 1


def commit_micros(spark: SparkSession, table: str) -> list[int]:
    return [r[0] for r in spark.sql(f"select unix_micros(committed_at) from {table}.snapshots order by 1").collect()]


def utc_text(micros: int) -> str:
    return datetime.fromtimestamp(micros / 1e6, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_expire_snapshots_honours_age_and_retain_last(
    spark: SparkSession, dbt_project: DbtProject, schema: str
) -> None:
    by_age = small_files_table(spark, f"local.{schema}.history_age", 4)
    by_count = small_files_table(spark, f"local.{schema}.history_count", 4)
    for table in (by_age, by_count):
        spark.sql(f"insert into {table} values (100, 'a')")
        spark.sql(f"insert into {table} values (101, 'a')")
    # A fixed cut-off between the fourth and the fifth commit (absolute `older_than`): no sleep,
    # no dependence on how long dbt takes to start.
    commits = commit_micros(spark, by_age)
    assert len(commits) == 6 and commits[3] < commits[4]
    cutoff = utc_text((commits[3] + commits[4]) // 2 | 1)  # odd: the SQL shows its microseconds
    young = {
        r[0]
        for r in spark.sql(f"select snapshot_id from {by_age}.snapshots order by committed_at desc limit 2").collect()
    }

    # retain_last 1, but the two young snapshots are not older than the cut-off: both stay.
    _, results, returned = call(
        dbt_project, "expire_snapshots", relation=f"{schema}.history_age", older_than=cutoff, retain_last=1
    )

    assert results[0].status == "success"
    assert f"older_than => TIMESTAMP '{cutoff[:10]} {cutoff[11:26]}Z', retain_last => 1" in results[0].sql
    assert set(returned) >= {"deleted_manifest_lists_count", "deleted_data_files_count", "sql", "status", "duration_ms"}
    assert returned["deleted_manifest_lists_count"] == 4
    assert {r[0] for r in spark.sql(f"select snapshot_id from {by_age}.snapshots").collect()} == young

    # older_than_hours 0 means now: retain_last 3 keeps the newest three, whatever their age,
    # even those committed moments ago.
    newest_three = {
        r[0]
        for r in spark.sql(f"select snapshot_id from {by_count}.snapshots order by committed_at desc limit 3").collect()
    }
    _, results, _ = call(
        dbt_project, "expire_snapshots", relation=f"{schema}.history_count", older_than_hours=0, retain_last=3
    )
    assert "older_than => TIMESTAMP '9999-12-31 23:59:59Z', retain_last => 3" in results[0].sql
    assert {r[0] for r in spark.sql(f"select snapshot_id from {by_count}.snapshots").collect()} == newest_three
    assert scalar(spark, f"select count(*) from {by_count}") == 6


def test_remove_orphan_files_deletes_only_orphans_older_than_the_window(
    spark: SparkSession, dbt_project: DbtProject, schema: str
) -> None:
    table = small_files_table(spark, f"local.{schema}.orphans", 2)
    data_dir = Path(scalar(spark, f"select file_path from {table}.data_files limit 1").removeprefix("file:")).parent
    old_orphan = data_dir / "old-orphan.parquet"
    fresh_orphan = data_dir / "fresh-orphan.parquet"
    for orphan in (old_orphan, fresh_orphan):
        orphan.write_bytes(b"not referenced by any snapshot")
    four_days_ago = time.time() - 96 * HOUR
    os.utime(old_orphan, (four_days_ago, four_days_ago))
    # The table's own files must look old too, or nothing distinguishes them from orphans.
    for path in data_dir.parent.rglob("*"):
        if path.is_file() and path != fresh_orphan:
            os.utime(path, (four_days_ago, four_days_ago))

    _, results, returned = call(dbt_project, "remove_orphan_files", relation=f"{schema}.orphans", dry_run=True)
    assert results[0].status == "dry_run"
    assert "dry_run => true" in results[0].sql
    assert [Path(p).name for p in returned["orphan_file_location"]] == ["old-orphan.parquet"]
    assert old_orphan.exists() and fresh_orphan.exists()

    _, results, returned = call(dbt_project, "remove_orphan_files", relation=f"{schema}.orphans", older_than_hours=72)
    assert results[0].status == "success" and results[0].metrics["orphan_file_count"] == 1
    assert not old_orphan.exists()
    assert fresh_orphan.exists()
    assert scalar(spark, f"select count(*) from {table}") == 2


def test_rewrite_manifests_consolidates_manifests(spark: SparkSession, dbt_project: DbtProject, schema: str) -> None:
    table = small_files_table(spark, f"local.{schema}.manifests", 5)
    assert scalar(spark, f"select count(*) from {table}.manifests") == 5

    _, results, returned = call(dbt_project, "rewrite_manifests", relation=f"{schema}.manifests", use_caching=False)

    assert results[0].status == "success" and "use_caching => false" in results[0].sql
    assert returned["rewritten_manifests_count"] == 5 and returned["added_manifests_count"] == 1
    assert scalar(spark, f"select count(*) from {table}.manifests") == 1


def test_rewrite_position_delete_files_compacts_deletes(
    spark: SparkSession, dbt_project: DbtProject, schema: str
) -> None:
    table = f"local.{schema}.deletes"
    spark.sql(
        f"create or replace table {table} (id bigint, part string) using iceberg partitioned by (part) "
        "tblproperties ('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    # Three data files, one row deleted from each: three position delete files (Iceberg merges
    # deletes aimed at the same data file, so each targets its own file).
    for start in (0, 10, 20):
        spark.sql(f"insert into {table} select id, 'a' from range({start}, {start + 10})")
    for i in (0, 10, 20):
        spark.sql(f"delete from {table} where id = {i}")
    assert scalar(spark, f"select count(*) from {table}.delete_files") == 3

    _, results, returned = call(
        dbt_project,
        "rewrite_position_delete_files",
        relation=f"{schema}.deletes",
        where="part = 'a'",
        options={"min-input-files": 2},
    )

    assert results[0].status == "success"
    assert returned["rewritten_delete_files_count"] == 3
    assert returned["added_delete_files_count"] >= 1
    assert scalar(spark, f"select count(*) from {table}") == 27
    assert {r[0] for r in spark.sql(f"select id from {table} where id in (0, 10, 20, 1)").collect()} == {1}


def test_the_less_common_arguments_reach_iceberg_as_it_expects_them(
    spark: SparkSession, dbt_project: DbtProject, schema: str
) -> None:
    """Every argument group Iceberg 1.10 accepts, run for real (not only rendered)."""
    table = small_files_table(spark, f"local.{schema}.arguments", 4)
    relation = f"{schema}.arguments"
    history = [r[0] for r in spark.sql(f"select snapshot_id from {table}.snapshots order by committed_at").collect()]

    # snapshot_ids (array<bigint>), clean_expired_metadata, stream_results, max_concurrent_deletes.
    _, results, returned = call(
        dbt_project,
        "expire_snapshots",
        relation=relation,
        snapshot_ids=[history[0]],
        clean_expired_metadata=True,
        stream_results=True,
        max_concurrent_deletes=2,
    )
    assert results[0].status == "success", results[0].reason
    assert returned["deleted_manifest_lists_count"] == 1
    assert [
        r[0] for r in spark.sql(f"select snapshot_id from {table}.snapshots order by committed_at").collect()
    ] == history[1:]

    # location, prefix_mismatch_mode, equal_schemes/equal_authorities, prefix_listing (dry run).
    data_dir = Path(scalar(spark, f"select file_path from {table}.data_files limit 1").removeprefix("file:")).parent
    orphan = data_dir / "listed-orphan.parquet"
    orphan.write_bytes(b"not referenced by any snapshot")
    four_days_ago = time.time() - 96 * HOUR
    for path in data_dir.parent.rglob("*"):
        if path.is_file():
            os.utime(path, (four_days_ago, four_days_ago))
    _, results, returned = call(
        dbt_project,
        "remove_orphan_files",
        relation=relation,
        dry_run=True,
        location=f"file:{data_dir}",
        prefix_mismatch_mode="ERROR",
        max_concurrent_deletes=2,
        equal_schemes={"file": "file"},
        equal_authorities={"localhost": "localhost"},
        prefix_listing=True,
    )
    assert results[0].status == "dry_run", results[0].reason
    assert [Path(p).name for p in returned["orphan_file_location"]] == ["listed-orphan.parquet"]

    # file_list_view: the caller's own listing instead of Iceberg's (Iceberg keeps the entries
    # under the table location, written as the table writes it).
    location = next(r[1] for r in spark.sql(f"describe table extended {table}").collect() if r[0] == "Location")
    spark.createDataFrame(
        [(f"{location}/data/part=a/{orphan.name}", datetime.fromtimestamp(four_days_ago))],
        "file_path string, last_modified timestamp",
    ).createOrReplaceTempView("arguments_listing")
    _, results, returned = call(
        dbt_project, "remove_orphan_files", relation=relation, dry_run=True, file_list_view="arguments_listing"
    )
    assert results[0].status == "dry_run", results[0].reason
    assert [Path(p).name for p in returned["orphan_file_location"]] == ["listed-orphan.parquet"]
    assert orphan.exists()

    # spec_id and use_caching.
    _, results, returned = call(dbt_project, "rewrite_manifests", relation=relation, spec_id=0, use_caching=True)
    assert results[0].status == "success", results[0].reason
    assert "spec_id => 0" in results[0].sql and returned["added_manifests_count"] == 1
    assert scalar(spark, f"select count(*) from {table}.manifests") == 1
    assert scalar(spark, f"select count(*) from {table}") == 4


def test_catalog_var_targets_the_named_catalog(spark: SparkSession, dbt_project: DbtProject, schema: str) -> None:
    table = small_files_table(spark, f"local.{schema}.catalogued", 3)
    _, results, _ = call(
        dbt_project, "rewrite_manifests", vars="{dbt_iceberg_maint_catalog: local}", relation=f"{schema}.catalogued"
    )
    assert results[0].sql.startswith("CALL local.system.rewrite_manifests(table => ")
    assert results[0].table == f"local.{schema}.catalogued" and results[0].status == "success"
    # A three-part name picks its catalog too.
    _, results, _ = call(
        dbt_project, "rewrite_data_files", relation=f"local.{schema}.catalogued", options={"min-input-files": 2}
    )
    assert results[0].sql.startswith("CALL local.system.rewrite_data_files(") and results[0].status == "success"
    assert data_files(spark, table) == 1


def test_catalog_var_sends_the_call_to_another_catalog(
    spark: SparkSession, dbt_project: DbtProject, tmp_path: Path
) -> None:
    """A second Iceberg catalog beside the default one: the var, not the current catalog, decides."""
    other = CatalogSpec(warehouse=str(tmp_path / "other_warehouse"), name="other")
    prepare_warehouse(other)
    for key, value in other.spark_conf().items():
        if key != "spark.sql.defaultCatalog":  # `local` stays the current catalog
            spark.conf.set(key, value)
    spark.sql("create namespace if not exists other.lake")
    table = small_files_table(spark, "other.lake.elsewhere", 3)
    assert not spark.catalog.tableExists("local.lake.elsewhere")

    _, results, returned = call(
        dbt_project, "rewrite_manifests", vars="{dbt_iceberg_maint_catalog: other}", relation="lake.elsewhere"
    )
    assert results[0].sql == "CALL other.system.rewrite_manifests(table => 'lake.elsewhere')"
    assert (results[0].table, results[0].status) == ("other.lake.elsewhere", "success")
    assert returned["rewritten_manifests_count"] == 3
    assert scalar(spark, f"select count(*) from {table}.manifests") == 1

    # maintain() too: existence checked in that catalog, the policy's due operations run there.
    invocation = dbt_project(
        "run-operation",
        "dbt_iceberg_maint.maintain",
        "--vars",
        "{dbt_iceberg_maint_catalog: other}",
        "--args",
        json.dumps(
            {
                "relation": "lake.elsewhere",
                "operations": ["compaction"],
                "policy": {"compaction": {"min_input_files": 2}},
            }
        ),
    )
    [result] = parse_result_lines(invocation.log_messages)
    assert (result.table, result.operation, result.status) == ("other.lake.elsewhere", "rewrite_data_files", "success")
    assert result.sql.startswith("CALL other.system.rewrite_data_files(table => 'lake.elsewhere'")
    assert data_files(spark, table) == 1


@pytest.mark.parametrize(
    ("macro", "kwargs", "message"),
    [
        (
            "rewrite_data_files",
            {"where": "part = 'a'; drop table x"},
            "argument `where` is \"part = 'a'; drop table x\"",
        ),
        ("rewrite_data_files", {"where": "part = 'a' -- everything"}, "must not contain a SQL comment"),
        (
            "rewrite_data_files",
            {"strategy": "zorder"},
            "argument `strategy` is 'zorder'; allowed values: binpack, sort",
        ),
        (
            "expire_snapshots",
            {"retain_last": 0},
            "argument `retain_last` is 0; it must be a whole number of at least 1",
        ),
        ("remove_orphan_files", {"older_than_hours": 23}, "argument `older_than_hours` is 23; it must be at least 24"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(
    spark: SparkSession, dbt_project: DbtProject, schema: str, macro: str, kwargs: dict[str, Any], message: str
) -> None:
    table = f"local.{schema}.guarded"
    if not spark.catalog.tableExists(table):
        small_files_table(spark, table, 6)
    snapshot = current_snapshot(spark, table)
    files = data_files(spark, table)

    invocation, results, _ = call(dbt_project, macro, expect_success=False, relation=f"{schema}.guarded", **kwargs)

    assert not invocation.success
    assert message in " ".join(invocation.log_messages) + (invocation.exception or "")
    assert results == ()
    assert current_snapshot(spark, table) == snapshot
    assert data_files(spark, table) == files


def swept_tables(spark: SparkSession, schema: str, name: str) -> tuple[str, str, str]:
    """A table, a neighbour whose folder name starts with the table's (a bare prefix test takes
    it for inside), every file old; returns (table, its location, a data file of the neighbour)."""
    table = small_files_table(spark, f"local.{schema}.{name}", 2)
    neighbour = small_files_table(spark, f"local.{schema}.{name}2", 1)
    location = next(r[1] for r in spark.sql(f"describe table extended {table}").collect() if r[0] == "Location")
    old = time.time() - 96 * HOUR
    for path in Path(location.removeprefix("file:")).parent.rglob("*"):
        if path.is_file():
            os.utime(path, (old, old))
    return table, location, scalar(spark, f"select file_path from {neighbour}.data_files limit 1")


def refused(invocation: Any, *needles: str) -> None:
    text = " ".join(invocation.log_messages) + (invocation.exception or "")
    assert not invocation.success and all(n in text for n in needles), text


def test_the_sql_only_orphan_twin_checks_the_location(spark: SparkSession, dbt_project: DbtProject,
                                                      schema: str) -> None:
    """get_remove_orphan_files_sql (the twin that only returns SQL) holds `location` to the table
    like remove_orphan_files does (issue 22), and escapes a quote of a folder inside it."""
    _, location, _ = swept_tables(spark, schema, "twin")
    twin = dbt_project("run-operation", "dbt_iceberg_maint.get_remove_orphan_files_sql", "--args",
                       json.dumps({"relation": f"{schema}.twin", "location": str(Path(location).parent)}),
                       expect_success=False)
    refused(twin, "argument `location`", "must be the table's location")

    quoted = f"{location}/data/it's"
    rendered = dbt_project("run-operation", "iceberg_maint_render_cases", "--args", json.dumps({"cases": [
        {"id": "quoted", "procedure": "remove_orphan_files", "kwargs": {"relation": f"{schema}.twin",
                                                                          "location": quoted}}]}))
    [line] = markers(rendered.log_messages, "ICEBERG_MAINT_CASE")
    assert line["sql"].endswith("location => '" + quoted.replace("'", "\\'") + "')")


def test_a_file_list_view_is_held_to_the_location_and_age_rules(spark: SparkSession, dbt_project: DbtProject,
                                                                schema: str) -> None:
    """A caller's listing replaces Iceberg's: an entry outside the table (a neighbour sharing the
    name prefix, which Iceberg's own prefix filter lets through), younger than the window or of
    unknown age is refused before anything runs (issue 22)."""
    table, location, neighbour_file = swept_tables(spark, schema, "listed")
    snapshot = current_snapshot(spark, table)
    listings = {
        "outside_listing": [(neighbour_file, datetime.fromtimestamp(time.time() - 96 * HOUR))],
        "young_listing": [(f"{location}/data/part=a/young.parquet", datetime.now())],
        "unaged_listing": [(f"{location}/data/part=a/unaged.parquet", None)],
    }
    for name, rows in listings.items():
        spark.createDataFrame(rows, "file_path string, last_modified timestamp").createOrReplaceTempView(name)
        invocation, results, _ = call(dbt_project, "remove_orphan_files", expect_success=False,
                                      relation=f"{schema}.listed", dry_run=True, file_list_view=name)
        refused(invocation, "argument `file_list_view`", name)
        assert results == ()
    # A listing that does not exist is refused by name too (found by the fuzzer: Spark's own
    # TABLE_OR_VIEW_NOT_FOUND came out of the check's query).
    for missing in ("no_such_listing", "global_temp.no_such_listing", f"{schema}.no_such_listing", "nowhere.listing"):
        invocation, results, _ = call(dbt_project, "remove_orphan_files", expect_success=False,
                                      relation=f"{schema}.listed", dry_run=True, file_list_view=missing)
        refused(invocation, f"argument `file_list_view` is '{missing}'; no such view or table")
        assert results == ()
    assert Path(neighbour_file.removeprefix("file:")).exists()
    assert current_snapshot(spark, table) == snapshot


def test_a_replayed_orphan_step_is_held_to_the_location_rule(spark: SparkSession, dbt_project: DbtProject,
                                                            schema: str) -> None:
    """execute_maintenance_steps (what `dbt-iceberg-maint maintain` resumes a plan with) checks a
    remove_orphan_files step's location against the table like a planned one (issue 22)."""
    table, location, neighbour_file = swept_tables(spark, schema, "replayed")
    snapshot = current_snapshot(spark, table)
    cutoff = datetime.fromtimestamp(time.time() - 72 * HOUR, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    step = {"table": f"{schema}.replayed", "operation": "remove_orphan_files", "status": "planned", "reason": "due",
            "sql": f"CALL system.remove_orphan_files(table => '{schema}.replayed', older_than => TIMESTAMP "
                   f"'{cutoff}Z', location => '{Path(location.removeprefix('file:')).parent}')"}
    replayed = dbt_project("run-operation", "dbt_iceberg_maint.execute_maintenance_steps", "--args",
                           json.dumps({"steps": [step]}), expect_success=False)
    refused(replayed, "step 1", "argument `location`", "must be the table's location")
    assert parse_result_lines(replayed.log_messages) == ()
    # The fleet engine's `record` is checked with the steps, before anything runs.
    plain = dict(step, sql=step["sql"].rsplit(", location", 1)[0] + ")")
    for record, said in (({"policy": {"compaction": 3}}, "argument `record` policy.compaction is 3"),
                         ({"policy": {}, "snapshot_id": "x"}, 'argument `record` snapshot_id is "x"'),
                         ({"when": 1}, "expected none or a mapping with keys policy, snapshot_id")):
        bad = dbt_project("run-operation", "dbt_iceberg_maint.execute_maintenance_steps", "--args",
                          json.dumps({"steps": [plain], "record": record}), expect_success=False)
        refused(bad, said)
        assert parse_result_lines(bad.log_messages) == ()
    assert Path(neighbour_file.removeprefix("file:")).exists()
    assert current_snapshot(spark, table) == snapshot


def test_a_nessie_catalog_never_gets_a_garbage_collecting_call(
    spark: SparkSession, dbt_project: DbtProject, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nessie's other branches may still read the files expire_snapshots and remove_orphan_files
    delete: with the catalog's Spark setting `type` naming Nessie, the procedure macros refuse
    before their CALL and maintain() skips both with that reason. The profile's
    `spark.sql.catalog.local.type` (DBT_ICEBERG_MAINT_CATALOG_TYPE, applied to the session by
    every dbt statement) says nessie while the catalog Spark already loaded keeps answering: the
    refusal reads the setting, as it would on a real Nessie catalog. (A compaction cannot run in
    this staging: its rewrite clones the session, which would load a Nessie catalog for real.)"""
    table = small_files_table(spark, f"local.{schema}.on_nessie", 6)
    snapshots = scalar(spark, f"select count(*) from {table}.snapshots")
    ids = {r[0] for r in spark.sql(f"select snapshot_id from {table}.snapshots").collect()}
    key = "spark.sql.catalog.local.type"
    original = spark.conf.get(key)
    monkeypatch.setenv("DBT_ICEBERG_MAINT_CATALOG_TYPE", "nessie")
    try:
        invocation, results, _ = call(dbt_project, "expire_snapshots", expect_success=False,
                                      relation=f"{schema}.on_nessie", older_than_hours=0, retain_last=1)
        refused(invocation, "expire_snapshots refused: catalog local is a Nessie catalog",
                "run Nessie's garbage collector (nessie-gc) instead")
        assert results == () and scalar(spark, f"select count(*) from {table}.snapshots") == snapshots
        _, results, _ = call(dbt_project, "maintain", relation=f"{schema}.on_nessie", force=True,
                             operations=["expire_snapshots", "remove_orphan_files"])
        by_operation = {r.operation: r for r in results}
        for operation in ("expire_snapshots", "remove_orphan_files"):
            assert by_operation[operation].status == "skipped", results
            assert (by_operation[operation].reason or "").startswith(
                f"{operation} refused: catalog local is a Nessie catalog"), results
        assert set(by_operation) == {"expire_snapshots", "remove_orphan_files"}
        # Nothing expired.
        assert ids == {r[0] for r in spark.sql(f"select snapshot_id from {table}.snapshots").collect()}
    finally:
        monkeypatch.undo()
        spark.conf.set(key, original)


def test_a_compaction_applies_the_deletion_vectors_of_a_format_v3_table(
    spark: SparkSession, dbt_project: DbtProject, schema: str
) -> None:
    """Merge-on-read deletes on format v3 write deletion vectors (Puffin files, one vector per
    data file); rewrite_data_files applies them and removes them in its own commit."""
    table = f"local.{schema}.v3_deletes"
    create_v3(spark, table, "part")
    for i in range(4):
        spark.sql(f"insert into {table} select id, 'a' from range({i * 10}, {i * 10 + 10})")
    spark.sql(f"delete from {table} where id % 10 = 3")
    vectors = spark.sql(f"select file_format, referenced_data_file, record_count from {table}.delete_files").collect()
    assert [(v[0], v[2]) for v in vectors] == [("PUFFIN", 1)] * 4 and len({v[1] for v in vectors}) == 4
    before = fingerprint(spark, table)

    _, results, returned = call(dbt_project, "rewrite_data_files", relation=f"{schema}.v3_deletes",
                                options={"min-input-files": 2})

    assert results[0].status == "success", results
    assert (returned["rewritten_data_files_count"], returned["removed_delete_files_count"]) == (4, 4), returned
    assert scalar(spark, f"select count(*) from {table}.delete_files") == 0
    assert fingerprint(spark, table) == before and before[0] == 36
