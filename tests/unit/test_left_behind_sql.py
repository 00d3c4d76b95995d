"""The left-behind sweep's pure parts (macros/operations/left_behind_locations.sql), rendered by
dbt without Spark: the listing statements, the CALL, argument validation, which directories the
tables' paths rule out, and which requested directories are removed, skipped or refused."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from dbt_iceberg_maint.runtime.invoke import DbtInvocation, invoke_dbt
from tests.expect import markers

ENV = {"DBT_ICEBERG_MAINT_SCHEMA": "analytics"}
OWNER = "remove_left_behind_locations"


def entry(name: str, removable: bool = True) -> dict[str, Any]:
    return {"name": name, "location": f"/w/s1/{name}", "files": 3, "bytes": 30, "newest_file_age_hours": 80.5,
            "removable": removable}


SCAN = {"namespace": "local.s1", "location": "file:/w/s1", "root": "/w/s1", "warehouse": "/w",
        "carrier": "local.s1.a", "covered_by": None, "excluded": {"a": "table local.s1.a (its location)"},
        "found": [entry("old"), entry("young", removable=False)], "statements": []}

CASES: list[dict[str, Any]] = [
    {"id": "find", "kind": "find_sql", "kwargs": {"schema_location": "file:/w/s1", "excluded": ["b", "a"]}},
    {"id": "find_plain", "kind": "find_sql", "kwargs": {"schema_location": "/w/s'1/", "older_than_hours": 24}},
    {"id": "call", "kind": "call_sql", "kwargs": {"carrier": "local.s1.a", "location": "/w/s1/it's",
                                                  "older_than_hours": 72, "dry_run": True}},
    {"id": "call_real", "kind": "call_sql", "kwargs": {"carrier": "s1.a", "location": "/w/s1/b",
                                                       "older_than_hours": 96, "dry_run": False}},
    {"id": "defaults", "kind": "errors", "kwargs": {"owner": OWNER}},
    {"id": "bad", "kind": "errors", "kwargs": {
        "owner": OWNER, "schema": "a.b.c", "older_than_hours": 23, "dry_run": "yes", "locations": "/w/s1/b",
        "warehouse": "/w\n"}},
    {"id": "bad_2", "kind": "errors", "kwargs": {
        "owner": OWNER, "schema": "s1; drop", "older_than_hours": -1, "locations": ["/w/s1/*", " /w/s1/b", 7]}},
    {"id": "bad_3", "kind": "errors", "kwargs": {"owner": OWNER, "older_than_hours": "72", "locations": []}},
    {"id": "excluded", "kind": "excluded", "kwargs": {"root": "/w/s1", "referenced": {
        "/w/s1/a": "A", "file:/w/s1/c/data": "C", "/w/s1x/d": "D", "/w/other": "E", "file:///w/s1/a/metadata": "A2"}}},
    {"id": "excluded_parent", "kind": "excluded", "kwargs": {"root": "/w/s1", "referenced": {"/w/s1/a": "A",
                                                                                            "/w": "W"}}},
    {"id": "excluded_same", "kind": "excluded", "kwargs": {"root": "file:/w/s1/", "referenced": {"/w/s1": "S"}}},
    {"id": "excluded_schemes", "kind": "excluded", "kwargs": {"root": "s3://lake/w/s1", "referenced": {
        "s3a://lake/w/s1/t": "T", "s3n://other/w/s1/u/data": "U", "s3://lake/w/s2/v": "V"}}},
    {"id": "excluded_bucket", "kind": "excluded", "kwargs": {"root": "s3://lake/w/s1", "referenced": {
        "s3a://lake": "B"}}},
    {"id": "select_all", "kind": "selection", "kwargs": {"scan": SCAN}},
    {"id": "select_one", "kind": "selection", "kwargs": {"scan": SCAN, "locations": ["file:/w/s1/old/"]}},
    {"id": "select_refused", "kind": "selection", "kwargs": {"scan": SCAN, "locations": [
        "/w/s1/young", "/w/s1/a", "/w/other", "/w/s1", "/w/s1/old/data", "/w/s1/../s2", "/w/s1/zzz", "/w/s1/old"]}},
    {"id": "no_warehouse", "kind": "selection", "kwargs": {"scan": {**SCAN, "warehouse": None}}},
    {"id": "warehouse_is_schema", "kind": "selection", "kwargs": {"scan": {**SCAN, "warehouse": "/w/s1"}}},
    {"id": "outside_warehouse", "kind": "selection", "kwargs": {"scan": {**SCAN, "warehouse": "/elsewhere"}}},
    {"id": "no_carrier", "kind": "selection", "kwargs": {"scan": {**SCAN, "carrier": None}}},
    {"id": "covered", "kind": "selection", "kwargs": {"scan": {**SCAN, "found": [], "covered_by": "table x.t"},
                                                      "locations": ["/w/s1/old"]}},
]


def run(target: Path, macro: str, args: dict[str, Any]) -> DbtInvocation:
    return invoke_dbt(["run-operation", macro, "--args", json.dumps(args), "--target-path", str(target)], env=ENV)


@pytest.fixture(scope="module")
def rendered(render_target: Path) -> dict[str, dict[str, Any]]:
    invocation = run(render_target, "iceberg_maint_left_behind_cases", {"cases": CASES})
    assert invocation.success, invocation.exception
    lines = markers(invocation.log_messages, "ICEBERG_MAINT_CASE")
    return {line["id"]: line for line in lines}


CUTOFF = r"TIMESTAMP '\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ'"


def test_the_listing_reads_no_content_and_groups_by_the_directory_under_the_schema(
        rendered: dict[str, dict[str, Any]]) -> None:
    create, select = rendered["find"]["value"]
    assert create == ("create or replace temporary view iceberg_maint_left_behind_listing using binaryFile "
                      "options (path 'file:/w/s1', recursiveFileLookup 'true')")
    assert "content" not in select  # only path, modificationTime, length: Spark prunes the content column
    expected = (
        "select parts[0] as name, '/w/s1/' || parts[0] as location, count(*) as files, sum(length) as bytes, "
        "round((unix_timestamp(current_timestamp()) - unix_timestamp(max(modificationTime))) / 3600.0, 2) as "
        "newest_file_age_hours, max(modificationTime) < CUTOFF as removable from (select "
        "split(substr(regexp_replace(path, '^file:(//)?', ''), 7), '/') as parts, length, modificationTime from "
        "iceberg_maint_left_behind_listing where startswith(regexp_replace(path, '^file:(//)?', ''), '/w/s1/')) "
        "where size(parts) > 1 and parts[0] not in ('a', 'b') group by parts[0] order by name")
    assert re.fullmatch(re.escape(expected).replace("CUTOFF", CUTOFF), select), select
    create, select = rendered["find_plain"]["value"]
    assert "path '/w/s\\'1/'" in create
    assert "startswith(regexp_replace(path, '^file:(//)?', ''), '/w/s\\'1/'))" in select
    assert "not in" not in select


def test_the_call_is_icebergs_remove_orphan_files_through_the_carrier(rendered: dict[str, dict[str, Any]]) -> None:
    assert re.fullmatch(
        r"CALL local\.system\.remove_orphan_files\(table => 's1\.a', location => '/w/s1/it\\'s', "
        rf"older_than => {CUTOFF}, dry_run => true\)", rendered["call"]["value"]), rendered["call"]["value"]
    assert re.fullmatch(
        rf"CALL system\.remove_orphan_files\(table => 's1\.a', location => '/w/s1/b', older_than => {CUTOFF}, "
        r"dry_run => false\)", rendered["call_real"]["value"])


def test_arguments_are_refused_naming_argument_value_and_what_is_allowed(rendered: dict[str, dict[str, Any]]) -> None:
    assert rendered["defaults"]["errors"] == []
    assert rendered["bad"]["errors"] == [
        f"{OWNER}: argument `older_than_hours` is 23; it must be at least 24: a directory holding a file younger "
        "than a day may belong to a table being created right now",
        f"{OWNER}: argument `dry_run` is yes; expected true or false",
        f"{OWNER}: argument `schema` is \"a.b.c\"; expected 'schema' or 'catalog.schema' made of letters, digits "
        "and underscores",
        f"{OWNER}: argument `locations` is \"/w/s1/b\"; expected a non-empty list of directories (as "
        "find_left_behind_locations reports them), or none for every left-behind directory",
        f"{OWNER}: argument `warehouse` is \"/w\\n\"; expected a path or URI without surrounding whitespace, line "
        "breaks or glob characters (* ? [ ] { } \\)",
    ]
    errors = rendered["bad_2"]["errors"]
    assert errors[0] == f"{OWNER}: argument `older_than_hours` is -1; it must be greater than 0"
    assert "argument `schema` is \"s1; drop\"" in errors[1]
    assert [e.split(";")[0] for e in errors[2:]] == [
        f"{OWNER}: argument `locations` is \"/w/s1/*\"", f"{OWNER}: argument `locations` is \" /w/s1/b\"",
        f"{OWNER}: argument `locations` is \"7\""]
    assert rendered["bad_3"]["errors"] == [
        f"{OWNER}: argument `older_than_hours` is 72; expected a number greater than 0",
        f"{OWNER}: argument `locations` is \"[]\"; expected a non-empty list of directories (as "
        "find_left_behind_locations reports them), or none for every left-behind directory"]


def test_a_path_a_table_references_rules_out_its_directory_or_all_of_them(
        rendered: dict[str, dict[str, Any]]) -> None:
    # A data path inside `c`, the schema's neighbour `s1x` and a path elsewhere rule out nothing else.
    assert rendered["excluded"]["value"] == {"all": None, "names": {"a": "A", "c": "C"}}
    # A table at or above the schema's location covers every directory under it.
    assert rendered["excluded_parent"]["value"] == {"all": "W", "names": {"a": "A"}}
    assert rendered["excluded_same"]["value"] == {"all": "S", "names": {}}
    # Compared without scheme and authority: s3a:// and s3:// name one directory (a wider match
    # only rules out more); a table at a bucket's root covers everything in it.
    assert rendered["excluded_schemes"]["value"] == {"all": None, "names": {"t": "T", "u": "U"}}
    assert rendered["excluded_bucket"]["value"] == {"all": "B", "names": {}}


def test_only_found_old_enough_directories_inside_the_warehouse_are_removed(
        rendered: dict[str, dict[str, Any]]) -> None:
    assert rendered["select_all"] == {"id": "select_all", "value": {"remove": ["/w/s1/old"],
                                                                     "skip": ["/w/s1/young"]}, "errors": []}
    assert rendered["select_one"]["value"] == {"remove": ["/w/s1/old"], "skip": []}
    errors = rendered["select_refused"]["errors"]
    assert errors == [
        f"{OWNER}: argument `locations` holds '/w/s1/young'; its newest file is 80.5 h old, younger than "
        "older_than_hours 72: it may belong to a table being created",
        f"{OWNER}: argument `locations` holds '/w/s1/a'; table local.s1.a (its location) references it: never removed",
        *(f"{OWNER}: argument `locations` holds '{p}'; expected a directory directly under the schema's location "
          "'/w/s1' that no table references" for p in ("/w/other", "/w/s1", "/w/s1/old/data", "/w/s1/../s2")),
        f"{OWNER}: argument `locations` holds '/w/s1/zzz'; no file was found under it: not a left-behind directory "
        "of local.s1",
    ]
    assert rendered["select_refused"]["value"]["remove"] == ["/w/s1/old"]  # refused as a whole: errors raise
    assert rendered["no_warehouse"]["errors"] == [
        f"{OWNER}: the warehouse location of local is not in Spark's configuration "
        "(spark.sql.catalog.<catalog>.warehouse); pass argument `warehouse` so the schema's location can be checked "
        "to lie inside it"]
    for case in ("warehouse_is_schema", "outside_warehouse"):
        (error,) = rendered[case]["errors"]
        assert error.startswith(f"{OWNER}: the location of schema local.s1 is 'file:/w/s1', not strictly inside the "
                                "warehouse location"), error
    assert rendered["no_carrier"]["errors"] == [
        f"{OWNER}: catalog local holds no Iceberg table (with gc enabled) to run Iceberg's remove_orphan_files "
        "through; nothing was removed"]
    assert rendered["covered"]["errors"] == [
        f"{OWNER}: argument `locations` holds '/w/s1/old'; table x.t references it: never removed"]


def test_the_listing_twin_refuses_a_glob_and_a_young_floor(render_target: Path) -> None:
    for kwargs, message in (
        ({"schema_location": "/w/s*"}, "argument `schema_location` is \"/w/s*\"; expected a path or URI without"),
        ({"schema_location": "/w/s1", "older_than_hours": 1}, "argument `older_than_hours` is 1; it must be at least"),
        ({"schema_location": "/w/s1", "excluded": "a"}, "argument `excluded` is \"a\"; expected a list"),
        ({"schema_location": "/w/s1", "excluded": ["a/b"]}, "argument `excluded` holds \"a/b\"; expected directory"),
    ):
        invocation = run(render_target, "dbt_iceberg_maint.get_find_left_behind_locations_sql", kwargs)
        assert not invocation.success
        text = " ".join(invocation.log_messages) + str(invocation.exception or "")
        assert f"find_left_behind_locations: {message}" in text, text[-2000:]
