"""The left-behind-directory sweep on real Spark + Iceberg through dbt: a table dropped without
PURGE leaves its directory (Iceberg keeps every file); find_left_behind_locations reports it and
nothing a current table references; remove_left_behind_locations dry-runs by default, refuses
what its guards forbid with nothing changed, and deletes only that directory's files. On the
embedded catalog and on a real Hive Metastore."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dbt_iceberg_maint.maintenance.results import MaintenanceResult, parse_result_lines
from tests.expect import markers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = pytest.mark.integration
# On a Hive Metastore a schema's folder is `<warehouse>/<schema>.db` (Iceberg's Hive catalog).
CATALOGS = ("embedded", "hive_metastore")

FOUR_DAYS = 4 * 24 * 3600


def call(dbt_project: DbtProject, macro: str, expect_success: bool = True,
         **kwargs: Any) -> tuple[str, list[MaintenanceResult], Any]:
    """(log text, result lines, returned value) of one package macro run through the harness."""
    invocation = dbt_project("run-operation", "iceberg_maint_call", "--args",
                             json.dumps({"macro_name": macro, "kwargs": kwargs}), expect_success=expect_success)
    returned = [case["value"] for case in markers(invocation.log_messages, "ICEBERG_MAINT_CASE")]
    text = " ".join(invocation.log_messages) + str(invocation.exception or "")
    return text, parse_result_lines(invocation.log_messages), (returned[0] if returned else None)


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


def age(folder: Path, seconds: int = FOUR_DAYS) -> None:
    then = time.time() - seconds
    for path in files_under(folder):
        os.utime(path, (then, then))


def schema_folder(spark: SparkSession, namespace: str) -> Path:
    """Where the catalog put a schema (its DESCRIBE NAMESPACE location)."""
    rows = spark.sql(f"describe namespace extended {namespace}").collect()
    location = {r[0]: r[1] for r in rows}["Location"]
    return Path(location.removeprefix("file:"))


def state(spark: SparkSession, table: str) -> tuple[int, list[int]]:
    rows = spark.sql(f"select count(*) from {table}").collect()[0][0]
    snapshots = [r[0] for r in spark.sql(f"select snapshot_id from {table}.snapshots order by committed_at").collect()]
    return rows, snapshots


@pytest.fixture(scope="module")
def lake(spark: SparkSession, dbt_project: DbtProject, warehouse: Path) -> dict[str, Any]:
    """A schema with live tables (one with its data in a sibling folder, one renamed into another
    schema, a dbt incremental model fully refreshed) and two tables dropped without PURGE: one
    four days ago, one just now."""
    schema = dbt_project.schema
    ns = f"local.{schema}"
    spark.sql(f"create namespace if not exists {ns}")
    root = schema_folder(spark, ns)
    spark.sql("create namespace if not exists local.lb_elsewhere")
    spark.sql(f"create table {ns}.keep (id bigint) using iceberg")
    spark.sql(f"insert into {ns}.keep values (1), (2)")
    spark.sql(f"insert into {ns}.keep values (3)")
    spark.sql(f"create table {ns}.custom (id bigint) using iceberg "
              f"tblproperties ('write.data.path' = '{root}/custom_data')")
    spark.sql(f"insert into {ns}.custom values (4)")
    spark.sql(f"create table {ns}.moved (id bigint) using iceberg")
    spark.sql(f"insert into {ns}.moved values (5)")
    spark.sql(f"alter table {ns}.moved rename to lb_elsewhere.moved")  # keeps {root}/moved
    # A real dbt full refresh of an incremental Iceberg model: dbt-spark drops the table (no
    # PURGE) and creates it again, at the same location, so no directory is left behind.
    dbt_project("seed", "--select", "raw_events")
    dbt_project("run", "--select", "events")
    first_build = files_under(root / "events")
    dbt_project("run", "--select", "events", "--full-refresh")
    assert first_build < files_under(root / "events")  # the dropped table's files stay, inside the new one's
    # Another schema located inside this one's folder, its only table dropped: its folder is that
    # schema's, not left behind here.
    spark.sql(f"create namespace local.lb_located_inside location '{root}/inner_schema'")
    spark.sql("create table local.lb_located_inside.gone (id bigint) using iceberg")
    spark.sql("insert into local.lb_located_inside.gone values (0)")
    spark.sql("drop table local.lb_located_inside.gone")
    spark.sql(f"create table {ns}.dropped (id bigint) using iceberg")
    spark.sql(f"insert into {ns}.dropped values (8), (9)")
    spark.sql(f"drop table {ns}.dropped")  # no PURGE: Iceberg deletes nothing
    age(root)
    spark.sql(f"create table {ns}.fresh (id bigint) using iceberg")
    spark.sql(f"insert into {ns}.fresh values (10)")
    spark.sql(f"drop table {ns}.fresh")
    live = {name: f"{ns}.{name}" for name in ("keep", "custom", "events", "raw_events")} | {
        "moved": "local.lb_elsewhere.moved"}
    assert (root / "dropped" / "metadata").is_dir() and (root / "moved").is_dir()
    location = spark.sql(f"describe table extended {ns}.events").where("col_name = 'Location'").collect()[0][1]
    assert location.removeprefix("file:") == str(root / "events")
    return {"schema": schema, "root": root, "live": live}


def test_find_reports_only_the_directories_no_table_references(
        spark: SparkSession, dbt_project: DbtProject, lake: dict[str, Any]) -> None:
    root: Path = lake["root"]
    before = files_under(root)
    # Files longer than binaryFile's maxLength fail a read of their content: the listing reads none.
    spark.conf.set("spark.sql.sources.binaryFile.maxLength", "10")
    try:
        _, results, returned = call(dbt_project, "find_left_behind_locations", schema=lake["schema"])
    finally:
        spark.conf.unset("spark.sql.sources.binaryFile.maxLength")
    found = {Path(e["location"]).name: e for e in returned["left_behind"]}
    assert set(found) == {"dropped", "fresh"}
    assert found["dropped"]["removable"] and not found["fresh"]["removable"]
    assert found["dropped"]["files"] == len([p for p in files_under(root / "dropped") if not p.name.startswith(".")])
    assert found["dropped"]["bytes"] > 0 and found["dropped"]["newest_file_age_hours"] > 95
    assert found["fresh"]["newest_file_age_hours"] < 1
    assert [(r.operation, r.status, Path(r.metrics["location"]).name) for r in results] == [
        ("find_left_behind_locations", "success", "dropped"), ("find_left_behind_locations", "success", "fresh")]
    assert "binaryFile" in results[0].sql and "no table references it" in (results[0].reason or "")
    # As the catalog spells them (a metastore's with `file:`).
    assert returned["location"].removeprefix("file:") == str(root)
    assert returned["warehouse"].removeprefix("file:") == str(root.parent)
    assert files_under(root) == before


def test_guards_refuse_and_change_nothing(spark: SparkSession, dbt_project: DbtProject, lake: dict[str, Any],
                                          tmp_path: Path) -> None:
    root: Path = lake["root"]
    before = files_under(root)
    refused = [
        ({"older_than_hours": 23}, "argument `older_than_hours` is 23; it must be at least 24"),
        ({"dry_run": "no"}, "argument `dry_run` is no; expected true or false"),
        ({"locations": str(root / "dropped")}, "argument `locations` is"),
        ({"locations": [str(tmp_path)], "dry_run": False}, f"holds '{tmp_path}'; expected a directory directly under"),
        ({"locations": [str(root / "keep")], "dry_run": False},
         f"table local.{lake['schema']}.keep (its location) references it: never removed"),
        ({"locations": [str(root / "custom_data")], "dry_run": False}, "(write.data.path) references it"),
        ({"locations": [str(root / "moved")], "dry_run": False}, "table local.lb_elsewhere.moved (its location)"),
        ({"locations": [str(root / "inner_schema")], "dry_run": False},
         "namespace local.lb_located_inside (its location) references it"),
        ({"locations": [str(root / "fresh")], "dry_run": False}, "younger than older_than_hours 72"),
        ({"locations": [str(root / "dropped" / "data")], "dry_run": False}, "expected a directory directly under"),
        ({"locations": [str(root / "dropped"), str(root.parent)], "dry_run": False}, "expected a directory directly"),
        ({"schema": "no_such_schema", "dry_run": False}, "argument `schema` is 'no_such_schema'; no such schema"),
    ]
    for kwargs, message in refused:
        text, results, _ = call(dbt_project, "remove_left_behind_locations", expect_success=False,
                                **{"schema": lake["schema"], **kwargs})
        assert message in text, (kwargs, text[-1500:])
        assert not results, kwargs
    assert files_under(root) == before


def test_a_schema_outside_the_warehouse_is_refused(spark: SparkSession, dbt_project: DbtProject, warehouse: Path,
                                                   tmp_path: Path) -> None:
    outside = tmp_path / "outside_schema"
    spark.sql(f"create namespace local.lb_outside location '{outside}'")
    spark.sql("create table local.lb_outside.t (id bigint) using iceberg")
    spark.sql("insert into local.lb_outside.t values (1)")
    spark.sql(f"create table local.lb_outside.gone (id bigint) using iceberg location '{outside}/gone'")
    spark.sql("insert into local.lb_outside.gone values (1)")
    spark.sql("drop table local.lb_outside.gone")
    age(outside)
    before = files_under(outside)
    _, _, returned = call(dbt_project, "find_left_behind_locations", schema="lb_outside")
    assert [Path(e["location"]).name for e in returned["left_behind"]] == ["gone"]
    text, results, _ = call(dbt_project, "remove_left_behind_locations", expect_success=False, schema="lb_outside",
                            dry_run=False)
    assert f"the location of schema local.lb_outside is 'file:{outside}', not strictly inside the warehouse location " \
        f"'{warehouse.resolve()}'" in text, text
    assert not results and files_under(outside) == before


def test_the_sql_twin_renders_the_checked_call(dbt_project: DbtProject, lake: dict[str, Any]) -> None:
    root: Path = lake["root"]
    _, results, returned = call(dbt_project, "get_remove_left_behind_locations_sql", location=str(root / "dropped"),
                                schema=lake["schema"])
    assert returned.startswith(f"CALL local.system.remove_orphan_files(table => '{lake['schema']}.") and not results
    assert f"location => '{root}/dropped', older_than => TIMESTAMP '" in returned and returned.endswith(
        "dry_run => true)")
    text, _, _ = call(dbt_project, "get_remove_left_behind_locations_sql", expect_success=False,
                      location=str(root / "keep"), schema=lake["schema"])
    assert "references it: never removed" in text
    assert (root / "dropped" / "metadata").is_dir() and files_under(root / "dropped")


def test_dry_run_first_then_the_removal_deletes_only_the_left_behind_directory(
        spark: SparkSession, dbt_project: DbtProject, lake: dict[str, Any]) -> None:
    root: Path = lake["root"]
    live_before = {name: state(spark, table) for name, table in lake["live"].items()}
    dropped = files_under(root / "dropped")
    others = files_under(root) - dropped

    _, results, returned = call(dbt_project, "remove_left_behind_locations", schema=lake["schema"])
    by_name = {Path(r.metrics["location"]).name: r for r in results}
    assert {n: r.status for n, r in by_name.items()} == {"dropped": "dry_run", "fresh": "skipped"}
    listed = {Path(p).name for p in by_name["dropped"].metrics["orphan_file_location"]}
    assert listed == {p.name for p in dropped if not p.name.startswith(".")}
    assert "dry_run => true" in (by_name["dropped"].sql or "") and returned["dry_run"] is True
    assert files_under(root) == dropped | others  # a dry run deletes nothing

    _, results, _ = call(dbt_project, "remove_left_behind_locations", schema=lake["schema"], dry_run=False)
    by_name = {Path(r.metrics["location"]).name: r for r in results}
    assert {n: r.status for n, r in by_name.items()} == {"dropped": "success", "fresh": "skipped"}
    assert by_name["dropped"].metrics["orphan_file_count"] == len(listed)
    assert "dry_run => false" in (by_name["dropped"].sql or "")
    assert files_under(root / "dropped") == set()  # its checksum files went with them (empty folders stay)
    assert files_under(root) == others  # every other file, the young left-behind one's included
    assert {name: state(spark, table) for name, table in lake["live"].items()} == live_before

    _, _, returned = call(dbt_project, "find_left_behind_locations", schema=lake["schema"])
    assert [Path(e["location"]).name for e in returned["left_behind"]] == ["fresh"]


def test_a_schema_whose_tables_were_all_dropped_is_swept_through_another_schemas_table(
        spark: SparkSession, dbt_project: DbtProject, warehouse: Path, lake: dict[str, Any]) -> None:
    spark.sql("create namespace local.lb_emptied")
    spark.sql("create table local.lb_emptied.only (id bigint) using iceberg")
    spark.sql("insert into local.lb_emptied.only values (1)")
    spark.sql("drop table local.lb_emptied.only")
    root = schema_folder(spark, "local.lb_emptied")
    age(root)
    live_before = {name: state(spark, table) for name, table in lake["live"].items()}
    _, results, _ = call(dbt_project, "remove_left_behind_locations", schema="lb_emptied", dry_run=False)
    (result,) = results
    assert result.status == "success" and Path(result.metrics["location"]).name == "only"
    assert result.metrics["through_table"].startswith("local.") and ".lb_emptied." not in result.metrics[
        "through_table"]
    assert files_under(root) == set()
    assert {name: state(spark, table) for name, table in lake["live"].items()} == live_before
