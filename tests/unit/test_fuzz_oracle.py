"""The fuzz's oracle and coverage (issue 22, lab/fuzz_oracle.py, lab/fuzz.py): what makes rendered
SQL a defect, and that every `get_*_sql` twin, policy key and var the macros read is drawn."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

from lab import fuzz
from lab.fuzz_oracle import (
    alter_problems,
    call_problems,
    cold_conjunct_problems,
    inside,
    lexical_problems,
    predicate_problems,
    query_problems,
)

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=timezone.utc)
ROOT = "/w/fuzz/target"
MACROS = Path(__file__).resolve().parents[2] / "macros"


def _orphans(location: str | None = None, hours_before: float = 72) -> str:
    stamp = (NOW - timedelta(hours=hours_before)).strftime("%Y-%m-%d %H:%M:%S")
    text = f"CALL local.system.remove_orphan_files(table => 'fuzz.target', older_than => TIMESTAMP '{stamp}Z'"
    return text + (f", location => '{location}')" if location is not None else ")")


def test_a_call_with_every_value_a_constant_passes() -> None:
    assert call_problems("CALL local.system.rewrite_data_files(table => 'fuzz.target', options => map('a', 'b'), "
                         "where => 'id > 0\\') or (\\'1\\'=\\'1', strategy => 'sort')") == []
    assert call_problems("CALL system.expire_snapshots(table => 's.t', retain_last => 5, snapshot_ids => array(1, -2),"
                         " stream_results => true)") == []


def test_sql_outside_the_literals_is_a_defect() -> None:
    assert "a statement separator outside the literals" in call_problems(
        "CALL system.rewrite_data_files(table => 's.t', where => 'a'); drop table x")
    assert "a comment outside the literals" in call_problems("CALL system.rewrite_data_files(table => 's.t') -- ')")
    assert any(p.startswith("an argument that is not") for p in call_problems(
        "CALL system.rewrite_data_files(table => 's.t', where => 'a' or 1=1)"))
    assert call_problems("CALL local; drop table fuzz.target.system.rewrite_data_files(table => 's.t')")
    assert any("namespace" in p for p in call_problems("CALL a.b.system.rewrite_data_files(table => 's.t')"))
    assert call_problems("select 1") == ["not a CALL"]
    # A trailing backslash escapes the closing quote: the literal runs on into the next argument.
    assert call_problems("CALL system.rewrite_data_files(table => 's.t', where => 'a\\', strategy => 'sort')")


def test_orphan_location_must_lie_inside_the_table_and_the_window_be_a_day() -> None:
    ok = call_problems(_orphans(ROOT + "/data"), table_location=ROOT, rendered_at=NOW)
    assert ok == [] and call_problems(_orphans(), table_location=ROOT, rendered_at=NOW) == []
    for outside in ("/w/fuzz", "/", ROOT + "x", ROOT + "/../neighbour", ROOT + "/data/../..", "file:/w/fuzz"):
        found = call_problems(_orphans(outside), table_location=ROOT, rendered_at=NOW)
        assert any("is not inside the table's" in p for p in found), outside
    young = call_problems(_orphans(hours_before=23.99), table_location=ROOT, rendered_at=NOW)
    assert any("< 24 h" in p for p in young)
    assert call_problems(_orphans(hours_before=24), table_location=ROOT, rendered_at=NOW) == []
    assert inside("file://" + ROOT + "/data/", ROOT) and not inside("", ROOT)


def test_the_cold_predicate_must_stay_a_top_level_conjunct() -> None:
    cold = "part = 0 or part = 1"
    assert cold_conjunct_problems(cold, cold) == []
    assert cold_conjunct_problems(f"(id > 0) and ({cold})", cold) == []
    assert cold_conjunct_problems(f"((id > 0) and (x < 1)) and ({cold})", cold) == []
    assert cold_conjunct_problems(f"(1=1) or (1=1) and ({cold})", cold)
    assert cold_conjunct_problems(f"(id > 0 or true) and ({cold}) or (true)", cold)
    assert cold_conjunct_problems(None, cold)
    assert cold_conjunct_problems(f"(payload = 'a) and ({cold})", cold)  # unparseable: not shown to hold
    call = ("CALL system.rewrite_data_files(table => 'fuzz.cold_target', where => '(1=1) or (1=1) and "
            f"({cold})')")
    assert call_problems(call, cold=cold)


def test_predicates_queries_and_alters() -> None:
    assert predicate_problems("(ts >= timestamp '2020-01-01 00:00:00+00:00' and ts < timestamp '2020-01-02')",
                              ["ts"]) == []
    assert predicate_problems("`a``b` = 'x\\'y'", ["a`b"]) == []
    assert predicate_problems("part = 1 or other = 2", ["part"])
    assert predicate_problems("part = (select 1)", ["part"])
    assert predicate_problems("part = 1; drop table x", ["part"])
    assert query_problems("with f as (select * from local.fuzz.target.data_files) select (select count(*) from f) "
                          "as n, (select count(*) from fuzz.target.snapshots) as s", "local.fuzz.target") == []
    assert query_problems("select * from fuzz.target.snapshots where 1 = 1 union select * from fuzz.other.snapshots",
                          "fuzz.target")
    assert query_problems("select * from fuzz.target; drop table x.snapshots", "fuzz.target")
    assert alter_problems("alter table fuzz.target set tblproperties ('k' = 'v\\'); --')", "local.fuzz.target") == []
    assert alter_problems("alter table fuzz.target set tblproperties ('k' = 'v'); drop table x", "fuzz.target")
    assert alter_problems("alter table fuzz.other set tblproperties ('k' = 'v')", "fuzz.target")
    # Properties Iceberg parses as a Java int at commit: within its range, and a whole number.
    assert alter_problems("alter table fuzz.target set tblproperties ('write.metadata.previous-versions-max' = "
                          "'2147483647', 'commit.retry.num-retries' = '10')", "fuzz.target") == []
    assert alter_problems("alter table fuzz.target set tblproperties ('commit.retry.num-retries' = '2147483648')",
                          "fuzz.target") == ["commit.retry.num-retries = '2147483648' is not a Java int, which "
                                             "Iceberg parses it as when it commits"]
    assert alter_problems("alter table fuzz.target set tblproperties ('write.metadata.previous-versions-max' = "
                          "'2.5')", "fuzz.target")
    assert lexical_problems("a /* b */") == ["a comment outside the literals"]


def test_judge_reads_the_oracle() -> None:
    places = {"table_location": ROOT, "qualified": "local.fuzz.target"}
    case = {"kind": "twin", "twin": "get_remove_orphan_files_sql", "kwargs": {"location": "/w/fuzz"}}
    rendered = {"errors": [], "sql": _orphans("/w/fuzz"), "rendered_at": NOW.strftime("%Y-%m-%d %H:%M:%S.%f")}
    assert fuzz.judge(case, rendered, places).startswith("DEFECT: remove_orphan_files location '/w/fuzz'")
    assert fuzz.judge(case, {**rendered, "sql": _orphans(ROOT)}, places) == "accepted"
    assert fuzz.judge(case, {"errors": ["bad `location`"]}, places) == "refused"
    assert fuzz.judge(case, {"errors": ["'str' object has no attribute"]}, places) == "unclear"
    policy = {"kind": "policy", "target": "cold", "policy": {"compaction": {"where": "1=1) or (1=1",
                                                                            "cold_partitions_hours": 1}}}
    plan = {"errors": [], "cold": ["part = 0", "part = 0"], "sql": [
        "CALL system.rewrite_data_files(table => 'fuzz.cold_target', where => '(1=1) or (1=1) and (part = 0)')"]}
    assert "not a top-level AND conjunct" in fuzz.judge(policy, plan, places)
    safe = {**plan, "sql": ["CALL system.rewrite_data_files(table => 'fuzz.cold_target', where => "
                            "'(1=1) and (part = 0)')"]}
    assert fuzz.judge(policy, safe, places) == "accepted"
    # The cold predicate read after the plan may have grown by a partition that turned cold meanwhile.
    assert fuzz.judge(policy, {**safe, "cold": ["part = 0", "part = 0 or part = 1"]}, places) == "accepted"


def test_the_left_behind_twins_are_judged_by_their_own_rules() -> None:
    """The listing twin may create its binaryFile view and read only it; the removal twin's CALL
    may name a directory beside the table, inside its schema's location, never above it."""
    places = {"table_location": ROOT, "qualified": "local.fuzz.target"}
    listing = {"kind": "twin", "twin": "get_find_left_behind_locations_sql", "kwargs": {}}
    view = ("create or replace temporary view iceberg_maint_left_behind_listing using binaryFile options "
            "(path '/w/fuzz', recursiveFileLookup 'true')")
    select = "select path from iceberg_maint_left_behind_listing where startswith(path, '/w/fuzz/')"
    assert fuzz.judge(listing, {"errors": [], "sql": [view, select]}, places) == "accepted"
    assert fuzz.judge(listing, {"errors": [], "sql": [view + "; drop table t", select]}, places).startswith("DEFECT")
    assert fuzz.judge(listing, {"errors": [], "sql": [view, "select * from fuzz.other"]}, places).startswith("DEFECT")
    removal = {"kind": "twin", "twin": "get_remove_left_behind_locations_sql", "kwargs": {}}
    rendered_at = NOW.strftime("%Y-%m-%d %H:%M:%S.%f")
    assert fuzz.judge(removal, {"errors": [], "sql": _orphans("/w/fuzz/dropped"), "rendered_at": rendered_at},
                      places) == "accepted"
    assert fuzz.judge(removal, {"errors": [], "sql": _orphans("/w"), "rendered_at": rendered_at},
                      places).startswith("DEFECT: remove_orphan_files location '/w'")


def test_a_var_case_is_a_defect_when_a_probe_renders_one() -> None:
    case = {"kind": "var", "vars": {"dbt_iceberg_maint_catalog": "x; drop table t"}, "id": 1}
    probes = [{"kind": "twin", "twin": "get_rewrite_manifests_sql", "kwargs": {}, "id": "1.0"}]
    bad = {"1.0": {"errors": [], "sql": "CALL x; drop table t.system.rewrite_manifests(table => 'fuzz.target')"}}
    assert fuzz.judge_var(case, probes, bad, None, {}).startswith("DEFECT")
    refused = "dbt_iceberg_maint: var `dbt_iceberg_maint_catalog` is 'x; drop table t'; expected an identifier"
    assert fuzz.judge_var(case, probes, {}, refused, {}) == "refused"
    assert fuzz.judge_var(case, probes, {}, "Catalog 'x' not found", {}) == "unclear"


def test_every_twin_var_and_policy_key_is_drawn() -> None:
    """A new `get_*_sql` macro, var or policy key is fuzzed the day it lands: the lists are read
    from the macro files (and, for policy keys, from the defaults the run asks the macros for)."""
    twins = fuzz.twin_signatures()
    declared = set(re.findall(r"macro\s+(get_\w+_sql)\s*\(", "\n".join(p.read_text() for p in MACROS.rglob("*.sql"))))
    assert set(twins) == declared and len(twins) >= 10
    assert set(fuzz.macro_vars()) >= {"dbt_iceberg_maint_catalog", "dbt_iceberg_maint_enabled"}
    defaults = {"enabled": True, "compaction": {"where": None, "cold_partitions_hours": None, "strategy": None},
                "expire_snapshots": {"older_than_hours": 1, "retain_last": 1}, "new_section": {"new_key": 1}}
    cases = fuzz.plan_cases(40, 14, defaults)
    assert set(twins) <= {c.get("twin") for c in cases}
    assert set(fuzz.macro_vars()) <= {v for c in cases for v in c.get("vars", {})}
    keys = {k for c in cases for k in fuzz.policy_keys(c)}
    assert {f"{s}.{k}" for s, section in defaults.items() if isinstance(section, dict) for k in section} <= keys
    assert any(c.get("target") == "cold" and "where" in c["policy"]["compaction"] for c in cases)
    assert len({c["id"] for c in cases}) == len(cases)


def test_summary_counts_per_target_and_lists_defects() -> None:
    cases = [{"id": 0, "kind": "procedure", "procedure": "rewrite_data_files", "kwargs": {}},
             {"id": 1, "kind": "twin", "twin": "get_rewrite_data_files_sql", "kwargs": {}},
             {"id": 2, "kind": "var", "vars": {"dbt_iceberg_maint_catalog": "x"}}]
    summary = fuzz.summarise(cases, {0: "refused", 1: "DEFECT: x", 2: "accepted"}, 0)
    assert (summary["tried"], summary["refused"], summary["accepted"], summary["defect_count"]) == (3, 1, 1, 1)
    assert summary["defects"][0]["id"] == 1 and summary["by_target"]["get_rewrite_data_files_sql"]["defects"] == 1
    assert summary["table_changed"] == 0 and fuzz.covered(summary, ["rewrite_data_files", "nope"]) == ["nope"]


def test_a_new_twin_is_found_with_its_parameters(tmp_path: Path) -> None:
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "new.sql").write_text(
        "{% macro get_new_thing_sql(relation, options={'a': 1, 'b': [1, 2]},\n      where=none) %}{% endmacro %}\n"
        "{% macro spark__get_new_thing_sql(relation) %}{% endmacro %}\n{{ var('new_var', none) }}")
    twins = fuzz.twin_signatures(tmp_path)
    assert twins == {"get_new_thing_sql": (("relation", False), ("options", True), ("where", True))}
    assert fuzz.macro_vars(tmp_path) == ("new_var",)
    cases = fuzz.plan_cases(3, 1, {"compaction": {"where": None}}, twins=twins, variables=["new_var"])
    assert {c.get("twin") for c in cases if c["kind"] == "twin"} >= {"get_new_thing_sql"}
    assert any("new_var" in c["vars"] for c in cases if c["kind"] == "var")


def test_an_accepted_handed_over_lease_is_a_defect() -> None:
    """No fuzzed lease can be the fuzz invocation's own: accepting one would skip the claim."""
    step = fuzz.HANDED_STEP
    case = {"kind": "steps", "kwargs": {"steps": [step], "leases": [fuzz.HANDED_LEASE]}}
    accepted = {"errors": [], "sql": [step["sql"]]}
    assert fuzz.judge(case, accepted).startswith("DEFECT: steps took up 1 handed-over lease(s)")
    assert fuzz.judge(case, {"errors": ["execute_maintenance_steps: argument `leases` contains ..."]}) == "refused"
    assert fuzz.judge({"kind": "steps", "kwargs": {"steps": [step], "leases": []}}, accepted) == "accepted"
