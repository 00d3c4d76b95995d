"""Fuzzed bad input for the macros (issues 14 and 22): hypothesis draws procedure arguments, every
`get_*_sql` twin's arguments (the twins are found in the package's macro files), every policy key
(from the policy defaults the macros merge over), the dbt vars the macros read, `where` filters
(argument and policy `compaction.where`, with `cold_partitions_hours`), orphan locations,
relation names and the replayed steps of `execute_maintenance_steps` (checked only), with wrong
types, negative/zero/huge numbers, SQL injection, quote-breaking string contents, unicode and empty
strings. The integration project's `torture_fuzz_cases` runs
hundreds of them in one dbt invocation and `torture_fuzz_one` runs single cases through the public
macro (or the twin) alone.

A case is refused (a message naming an argument it set), accepted, or a DEFECT, decided by the
oracle (lab/fuzz_oracle.py) on the SQL it rendered, and by the tables' current snapshots and
properties, read before and after every dbt invocation.

`run_fuzz(run, spark, table, relation, examples)` works on any dbt runner (the suite passes its
in-process one); `python -m lab.fuzz --examples N --out FILE` starts its own embedded Spark (for
./scripts/torture, and for a fuzz run alone).

Over 300 lines: the strategies, the judgement of an outcome and the runner belong together (a
judgement reads the case's shape the strategies define).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbt_iceberg_maint.protocol import OPERATIONS as PROTOCOL_OPERATIONS
from dbt_iceberg_maint.protocol import STEP_STATUSES, marker_payloads
from lab import fuzz_oracle as oracle

REPO = Path(__file__).resolve().parent.parent
MACROS = REPO / "macros"
MARKER = "TORTURE_FUZZ "
DEFAULTS_MARKER = "TORTURE_FUZZ_DEFAULTS "
INJECTIONS = ("1=1; drop table fuzz.target", "x' or '1'='1", "id > 0 -- comment", "/* hidden */ id > 0",
              "'); drop table fuzz.target; --", "id > 0) or (1=1", "\\'; select 1", "`target`", "${jndi:x}")
# String contents that try to leave their quotes: each quoting and escaping form Spark knows.
QUOTES = ("'", "\\'", "''", "`", '"', "\\", "a\\", "x'||'y", "\\\\'", "' or true or '", "\\' or true or \\'",
          "''); drop table fuzz.target; --", '" or "1"="1', "`) or (`1`=`1", "id > 0\\", "\\'); --")
# (dbt reads --args as YAML, which has no way to carry NUL, other control characters or lone
# surrogates: those never reach a macro, so they are not drawn.)
UNICODE = ("名前 = 'é'", "id > 0 or payload = '💥'", "\u202e id > 0", "ß", "\u00a0")
NUMBERS = st.one_of(st.integers(-10**12, 10**12), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0, -1, 1, 2**63, -(2**63), 0.5, 1e308]))
TEXTS = st.one_of(st.sampled_from(INJECTIONS + QUOTES + UNICODE + ("", " ", "id > 0", "binpack", "sort", "zorder(id)")),
                  st.text(st.characters(blacklist_categories=("Cs", "Cc", "Co", "Cn")), max_size=20),
                  st.tuples(st.sampled_from(("id > 0", "payload = 'a", "x")), st.sampled_from(QUOTES)).map("".join))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXTS)
ANY = st.one_of(SCALARS, st.lists(SCALARS, max_size=3), st.dictionaries(TEXTS, SCALARS, max_size=3))

PROCEDURE_ARGS: dict[str, tuple[str, ...]] = {
    "rewrite_data_files": ("where", "strategy", "sort_order", "options", "dry_run"),
    "expire_snapshots": ("older_than_hours", "retain_last", "max_concurrent_deletes", "stream_results",
                         "snapshot_ids", "clean_expired_metadata", "older_than", "dry_run"),
    "remove_orphan_files": ("older_than_hours", "dry_run", "location", "max_concurrent_deletes", "file_list_view",
                            "equal_schemes", "equal_authorities", "prefix_mismatch_mode", "prefix_listing"),
    "rewrite_manifests": ("use_caching", "spec_id", "dry_run"),
    "rewrite_position_delete_files": ("where", "options", "dry_run"),
}
# Top-level policy keys that are not sections of the defaults (declared table properties).
TOP_POLICY_KEYS = ("isolation_level", "commit_retry", "properties", "idempotent", "enabled")
IDENTIFIERS = st.one_of(st.sampled_from(["target", "t'; drop table x; --", "a b", "`x`", "名", "", "x.y", "t--",
                                         "target\n", "t`", "t'"]),
                        st.text(st.characters(blacklist_categories=("Cs", "Cc", "Co", "Cn")), max_size=12))

# Placeholders the runner replaces with the run's own table locations (hypothesis draws before
# the table exists).
LOCATION, PARENT, NEIGHBOUR = "<<table_location>>", "<<schema_location>>", "<<neighbour_location>>"
VIEW_OUTSIDE, VIEW_INSIDE = "fuzz_files_outside", "fuzz_files_inside"
LOCATIONS = (LOCATION, LOCATION + "/data", LOCATION + "/", "file:" + LOCATION + "/data", "file://" + LOCATION,
             LOCATION + "/..", LOCATION + "/../neighbour", LOCATION + "/data/../..", LOCATION + "/data/../../neighbour",
             LOCATION + "x", LOCATION + "/./data", LOCATION + "/data/..", " " + LOCATION + "/data ",
             LOCATION + "/data\n", PARENT, NEIGHBOUR, "/", "/tmp", "file:/", LOCATION + "'); --", "", ".")
WHERES = ("1=1) or (1=1", "id > 0) or true or (1=1", "true) or (true", "id > 0 or true", "(id > 0", "id > 0)",
          ")(", "id > 0) or (id < 0", "payload = ')' or true", "payload = '(' or (true", "id in (1, 2)",
          "(id > 0) and (id < 10)", "not (id > 0) or id > 0", "id > 0 union select 1", "id > 0\\", "true",
          "payload = 'a\\') or (\\'1\\'=\\'1'", "(id > 0) or (id <= 0)")
COLD_HOURS = (0.0001, 0.001, 0.01, 1000.0)
VAR_VALUES: dict[str, tuple[Any, ...]] = {
    "dbt_iceberg_maint_catalog": ("local", "local; drop table fuzz.target", "local.system", "x`y", "a b", "",
                                  "local --", "spark_catalog", "名", "local\n", "`local`", "local)", "local/*",
                                  "local'", "local.fuzz", "1local", None, 3, True),
    "dbt_iceberg_maint_enabled": (True, False, "false", "no", 0, 1, None, "x'; drop", [], {}),
}
PROCEDURE_TWINS = tuple(f"get_{p}_sql" for p in PROCEDURE_ARGS)


# ---- what the package offers (read from its macro files) ------------------------------------
def _parameters(text: str) -> list[tuple[str, bool]]:
    """(name, has a default) per parameter of a macro signature; commas inside brackets skipped."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char in "([{" and 1 or (-1 if char in ")]}" else 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [(part.split("=")[0].strip(), "=" in part) for part in parts if part.strip()]


def twin_signatures(macros: Path = MACROS) -> dict[str, tuple[tuple[str, bool], ...]]:
    """Every public `get_*_sql` macro of the package and its parameters (name, optional)."""
    pattern = re.compile(r"\{%-?\s*macro\s+(get_\w+_sql)\s*\((.*?)\)\s*-?%\}", re.S)
    return {match.group(1): tuple(_parameters(match.group(2)))
            for path in sorted(macros.rglob("*.sql")) for match in pattern.finditer(path.read_text())}


def macro_vars(macros: Path = MACROS) -> tuple[str, ...]:
    """The dbt vars the package's macros read."""
    return tuple(sorted({name for path in macros.rglob("*.sql")
                         for name in re.findall(r"\bvar\(\s*['\"](\w+)['\"]", path.read_text())}))


# ---- strategies ---------------------------------------------------------------------------------
def _value(name: str) -> st.SearchStrategy[Any]:
    """Values for an argument or policy key: its own plausible and hostile values, then anything."""
    timestamps = st.sampled_from(["2020-01-01 00:00:00", "2999-01-01 00:00:00", "2020-01-01 00:00:00'); --",
                                  "2020-01-01", "now", "2020-01-01 00:00:00\\"])
    own: dict[str, st.SearchStrategy[Any]] = {
        "where": st.sampled_from(WHERES), "sort_order": st.sampled_from(["id", "id desc", "zorder(id)", "id`; --"]),
        "strategy": st.sampled_from(["binpack", "sort", "zorder", "BINPACK"]),
        "older_than_hours": st.sampled_from([24, 23.99, 24.0001, 72, 0.0001, 1e9]), "older_than": timestamps,
        "as_of": timestamps, "location": st.sampled_from(LOCATIONS),
        "file_list_view": st.sampled_from([VIEW_OUTSIDE, VIEW_INSIDE, "no_such_view", "x; drop", "a.b"]),
        "cold_partitions_hours": st.sampled_from(COLD_HOURS),
        "transform": st.sampled_from(["identity", "days", "hours", "months", "years", "bucket[4]", "void"]),
        "column_type": st.sampled_from(["string", "int", "bigint", "date", "timestamp", "timestamp_ntz", "boolean"]),
        "column": IDENTIFIERS, "after_snapshot_id": st.one_of(st.integers(-2, 10**19), st.just(-1)),
        "partitioned": st.booleans(), "target_file_size_bytes": st.integers(-5, 10**12),
    }
    strings = st.dictionaries(TEXTS, st.one_of(TEXTS, SCALARS), max_size=3)
    for mapping in ("options", "equal_schemes", "equal_authorities", "declared", "current", "properties"):
        own[mapping] = strings
    drawn = [own[name]] if name in own else []
    return st.one_of(*drawn, TEXTS, ANY) if drawn else ANY


def _procedure_case() -> st.SearchStrategy[dict[str, Any]]:
    return st.sampled_from(sorted(PROCEDURE_ARGS)).flatmap(lambda procedure: st.fixed_dictionaries({
        "kind": st.just("procedure"), "procedure": st.just(procedure),
        "kwargs": st.lists(st.sampled_from(PROCEDURE_ARGS[procedure]), min_size=1, max_size=3, unique=True).flatmap(
            lambda names: st.fixed_dictionaries({n: _value(n) for n in names}))}))


RELATION_STRINGS = st.one_of(st.just("fuzz.target"), IDENTIFIERS,
                             st.tuples(st.just("fuzz."), IDENTIFIERS).map("".join),
                             st.sampled_from(["fuzz.target; drop table fuzz.target", "fuzz.target\n",
                                              "local.fuzz.target", "fuzz.target where 1=1", "fuzz.`target`"]))


def _twin_case(twins: Mapping[str, Sequence[tuple[str, bool]]]) -> st.SearchStrategy[dict[str, Any]]:
    """A twin called with its required parameters and a few optional ones; `relation` is the
    target most of the time and a fuzzed name otherwise."""
    def case(name: str) -> st.SearchStrategy[dict[str, Any]]:
        parameters = twins[name]
        required = [p for p, optional in parameters if not optional and p != "relation"]
        optional = [p for p, has_default in parameters if has_default and p != "relation"]
        relation = {"relation": st.one_of(st.just("fuzz.target"), st.just("fuzz.target"), RELATION_STRINGS)} if any(
            p == "relation" for p, _ in parameters) else {}
        extra = st.lists(st.sampled_from(optional), max_size=3, unique=True) if optional else st.just([])
        kwargs = extra.flatmap(lambda names: st.fixed_dictionaries(
            {**relation, **{n: _value(n) for n in [*required, *names]}}))
        if name == "get_partitions_where_sql":
            kwargs = _partitions_where_kwargs()
        return st.fixed_dictionaries({"kind": st.just("twin"), "twin": st.just(name), "kwargs": kwargs})

    return st.sampled_from(sorted(twins)).flatmap(case)


def _partitions_where_kwargs() -> st.SearchStrategy[dict[str, Any]]:
    """get_partitions_where_sql's structured input: fields, their column types, partition values."""
    field = st.fixed_dictionaries({"transform": _value("transform"), "column": _value("column")})
    return st.lists(field, min_size=1, max_size=2).flatmap(lambda fields: st.fixed_dictionaries({
        "partition_fields": st.just(fields),
        "columns": st.fixed_dictionaries({str(f["column"]): _value("column_type") for f in fields}),
        "partitions": st.lists(st.fixed_dictionaries({f"f{i}": st.one_of(SCALARS, st.sampled_from(QUOTES))
                                                      for i in range(len(fields))}), max_size=3)}))


def _policy_case(defaults: Mapping[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Policies over every key of the defaults (sections and their keys), plus unknown keys."""
    sections = {name: tuple(value) for name, value in defaults.items() if isinstance(value, Mapping)}
    section = st.sampled_from(sorted(sections)).flatmap(lambda name: st.tuples(st.just(name), st.lists(
        st.sampled_from([*sections[name], "no_such_key"]), max_size=3, unique=True).flatmap(
            lambda keys: st.fixed_dictionaries({k: _value(k) for k in keys}))))
    top_keys = sorted({*TOP_POLICY_KEYS, *(k for k, v in defaults.items() if not isinstance(v, Mapping))})
    top = st.tuples(st.sampled_from(top_keys), st.one_of(ANY, st.dictionaries(
        st.sampled_from(["num_retries", "min_wait_ms", "max_wait_ms", "total_timeout_ms", "delete", "merge",
                         "write.target-file-size-bytes", "x'; drop", "k", "k'", "k\\"]), ANY, max_size=3)))
    return st.lists(st.one_of(section, top), min_size=1, max_size=3).map(
        lambda items: {"kind": "policy", "policy": dict(items)})


def _key_sweep(defaults: Mapping[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """One policy key of the defaults at a time with its own hostile values: every key is set by
    some case however hypothesis samples the mixed policies above."""
    keys = [(s, k) for s, section in defaults.items() if isinstance(section, Mapping) for k in section]
    keys += [(k, None) for k, v in defaults.items() if not isinstance(v, Mapping)]
    return st.sampled_from(keys).flatmap(lambda key: _value(key[1] or key[0]).map(
        lambda value: {"kind": "policy", "policy": {key[0]: {key[1]: value}} if key[1] else {key[0]: value}}))


def _where_case() -> st.SearchStrategy[dict[str, Any]]:
    """`where` as rewrite_data_files' argument, and as the compaction policy's `where` scoped to
    the cold partitions (the cold target has identity partitions, all cold after a moment)."""
    where = st.one_of(st.sampled_from(WHERES), TEXTS)
    argument = st.fixed_dictionaries({"kind": st.just("procedure"), "procedure": st.just("rewrite_data_files"),
                                      "kwargs": st.fixed_dictionaries({"where": where})})
    policy = st.fixed_dictionaries({
        "kind": st.just("policy"), "target": st.just("cold"), "operations": st.just(["rewrite_data_files"]),
        "policy": st.fixed_dictionaries({"compaction": st.fixed_dictionaries({
            "where": st.one_of(where, st.none()),
            "cold_partitions_hours": st.one_of(st.sampled_from(COLD_HOURS), _value("cold_partitions_hours"))})})})
    return st.one_of(argument, policy, policy)


def _orphan_case() -> st.SearchStrategy[dict[str, Any]]:
    """remove_orphan_files by the public macro and by its twin: locations in, at and outside the
    table, windows around 24 h, file-list views listing files outside the table."""
    kwargs = st.fixed_dictionaries({"location": st.sampled_from(LOCATIONS)}, optional={
        "older_than_hours": _value("older_than_hours"), "file_list_view": _value("file_list_view")})
    public = st.fixed_dictionaries({"kind": st.just("procedure"), "procedure": st.just("remove_orphan_files"),
                                    "kwargs": kwargs})
    twin = st.fixed_dictionaries({"kind": st.just("twin"), "twin": st.just("get_remove_orphan_files_sql"),
                                  "kwargs": kwargs.map(lambda k: {"relation": "fuzz.target", **k})})
    return st.one_of(public, twin)


def _relation_case() -> st.SearchStrategy[dict[str, Any]]:
    """A relation given as a string or as a dbt Relation (database, schema, identifier), through a
    procedure (dry run) or through maintain(), whose health queries name the table in SQL."""
    # No `database`: dbt-spark refuses to build such a Relation ("Cannot set database in spark!")
    # before any macro sees it (the first full run counted 3 of those as defects of the macros);
    # the explicit cases below carry one, which the harness passes as 'catalog.schema.table'.
    as_object = st.fixed_dictionaries({"schema": IDENTIFIERS, "identifier": IDENTIFIERS})
    relation = st.one_of(IDENTIFIERS, as_object, RELATION_STRINGS)
    procedure = st.fixed_dictionaries({"kind": st.just("procedure"), "procedure": st.just("rewrite_data_files"),
                                       "kwargs": st.just({"dry_run": True}), "relation": relation})
    policy = st.fixed_dictionaries({"kind": st.just("policy"), "policy": st.just({}), "relation": relation})
    return st.one_of(procedure, policy)


# A replayed step's CALL: the right head with fuzzed arguments, or a head that is not its own.
STEP_TAILS = (")", ", where => 'id > 0')", ", where => 'id > 0') or (1=1')", ", where => id > 0)",
              ", where => 'x'); drop table fuzz.target", ", where => '1=1) or (1=1')",
              ", older_than => TIMESTAMP '2000-01-01 00:00:00')", ", older_than => TIMESTAMP '2999-01-01 00:00:00')",
              ", older_than => now())", f", location => '{LOCATION}')", f", location => '{PARENT}')",
              f", location => '{NEIGHBOUR}')", f", location => '{LOCATION}/data\n')",
              f", location => '{LOCATION}/data/../..')", ", retain_last => 1)", ", dry_run => true)",
              ", options => map('min-input-files', '2'))", ", options => map('k', (select 1)))", ") -- x",
              "); select 1")
STEP_HEADS = ("local.system", "system", "spark_catalog.system", "local.fuzz", "local.system.x")


def _step(operation: str) -> st.SearchStrategy[dict[str, Any]]:
    """One step of a replayed plan: well-formed (its own CALL head, as the plan writes it for its
    table) with fuzzed CALL arguments, and at most one other key fuzzed, so that the checks of
    what a CALL carries are reached."""
    def step(table: str, tail: str, mutation: tuple[str, Any]) -> dict[str, Any]:
        head = "local.system" if table.startswith("local.") else "system"
        drawn = {"table": table, "operation": operation, "status": "planned", "reason": "due",
                 "sql": f"CALL {head}.{operation}(table => 'fuzz.target'{tail}"}
        key, value = mutation
        if key != "none":
            drawn[key] = value
        return drawn

    where = st.tuples(st.just(", where => '"), st.one_of(st.sampled_from(WHERES), TEXTS), st.just("')")).map("".join)
    tail = st.one_of(st.just(")"), st.sampled_from(STEP_TAILS), where)
    other_call = st.tuples(st.sampled_from(STEP_HEADS), st.sampled_from(PROTOCOL_OPERATIONS),
                           st.sampled_from(["fuzz.neighbour", "local.fuzz.target"]), st.sampled_from(STEP_TAILS)).map(
        lambda p: f"CALL {p[0]}.{p[1]}(table => '{p[2]}'{p[3]}")
    mutation = st.one_of(
        st.just(("none", None)), st.just(("none", None)), st.just(("none", None)),
        st.tuples(st.just("table"), RELATION_STRINGS), st.tuples(st.just("operation"), TEXTS),
        st.tuples(st.just("status"), st.one_of(st.sampled_from((*STEP_STATUSES, "success")), SCALARS)),
        st.tuples(st.just("reason"), st.one_of(TEXTS, SCALARS)),
        st.tuples(st.just("sql"), st.one_of(other_call, TEXTS, SCALARS)), st.tuples(st.just("unknown"), SCALARS))
    table = st.sampled_from(["fuzz.target", "local.fuzz.target"])
    return st.builds(step, table, tail, mutation)


# A planned step and a lease of it as an ICEBERG_MAINT_KEPT line would hand it over, held by a run
# that is not the fuzz invocation's (the corpus below).
HANDED_STEP = {"table": "fuzz.target", "operation": "expire_snapshots", "status": "planned", "reason": "due",
               "sql": "CALL system.expire_snapshots(table => 'fuzz.target')"}
HANDED_LEASE = {"table": "fuzz.target", "log": "fuzz.iceberg_maint_leases", "key": "target", "claim_id": "c1",
                "holder": "another-run", "path": "execute_maintenance_steps", "ttl_ms": 60000,
                "renewed_ms": 1, "expires_ms": 4102444800000}


def _steps_case() -> st.SearchStrategy[dict[str, Any]]:
    """execute_maintenance_steps, the macro that runs a logged plan's SQL as given: steps whose CALLs
    carry fuzzed arguments, and its other arguments. Checked, never executed (torture_fuzz.sql)."""
    listed = st.lists(st.sampled_from(PROTOCOL_OPERATIONS).flatmap(_step), min_size=1, max_size=2)
    steps = st.one_of(listed, listed, listed, st.just([]), ANY)
    record = st.one_of(st.none(), st.fixed_dictionaries({"policy": st.one_of(st.just({}), ANY),
                                                         "snapshot_id": st.one_of(st.none(), NUMBERS, TEXTS)}), ANY)
    nodes = st.one_of(st.none(), st.just({"fuzz.target": "model.p.target"}),
                      st.dictionaries(TEXTS, SCALARS, max_size=2))
    names = st.lists(st.one_of(st.sampled_from(["", "local", "fuzz.iceberg_maint_leases"]), TEXTS), max_size=2)
    checked = st.one_of(st.none(), st.fixed_dictionaries({}, optional={
        "lease_logs": st.one_of(names, SCALARS), "catalogs": st.one_of(names, SCALARS)}),
        st.dictionaries(TEXTS, SCALARS, max_size=2), SCALARS)
    # A handed-over lease: the shape an ICEBERG_MAINT_KEPT line gives, with fuzzed values and keys.
    lease = st.fixed_dictionaries({
        "table": st.one_of(st.sampled_from(["fuzz.target", "local.fuzz.target"]), TEXTS, SCALARS),
        "log": st.one_of(st.just("fuzz.iceberg_maint_leases"), TEXTS, SCALARS),
        "key": st.one_of(st.just("target"), TEXTS, SCALARS), "claim_id": st.one_of(TEXTS, SCALARS),
        "holder": st.one_of(st.just("fuzz-run"), TEXTS, SCALARS), "path": st.one_of(TEXTS, SCALARS),
        "ttl_ms": st.one_of(NUMBERS, SCALARS), "renewed_ms": st.one_of(NUMBERS, SCALARS),
        "expires_ms": st.one_of(NUMBERS, SCALARS)}, optional={"unknown": SCALARS})
    leases = st.one_of(st.none(), st.lists(lease, max_size=2), st.lists(ANY, max_size=2), SCALARS)
    kwargs = st.fixed_dictionaries({"steps": steps}, optional={
        "settled": st.one_of(st.booleans(), SCALARS), "record": record, "nodes": nodes,
        "history_checked": st.one_of(st.booleans(), SCALARS), "checked": checked, "leases": leases,
        "keep_leases": st.one_of(st.booleans(), SCALARS), "defer_history": st.one_of(st.booleans(), SCALARS)})
    return st.fixed_dictionaries({"kind": st.just("steps"), "kwargs": kwargs})


def _var_case(names: Sequence[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.sampled_from(sorted(names)).flatmap(lambda name: st.fixed_dictionaries({
        "kind": st.just("var"), "vars": st.fixed_dictionaries({name: st.one_of(
            st.sampled_from(VAR_VALUES.get(name, (None,))), IDENTIFIERS, SCALARS)})}))


# What every var case runs under its vars: the twins and the plan that read them.
VAR_PROBES: tuple[dict[str, Any], ...] = (
    {"kind": "twin", "twin": "get_rewrite_data_files_sql", "kwargs": {"relation": "fuzz.target", "where": "id > 0"}},
    {"kind": "twin", "twin": "get_remove_orphan_files_sql", "kwargs": {"relation": "fuzz.target"}},
    {"kind": "twin", "twin": "get_table_health_sql", "kwargs": {"relation": "fuzz.target",
                                                                "target_file_size_bytes": 1000}},
    {"kind": "procedure", "procedure": "expire_snapshots", "kwargs": {"retain_last": 1}},
    {"kind": "policy", "policy": {"compaction": {"cold_partitions_hours": 0.0001}}, "target": "cold",
     "operations": ["rewrite_data_files"]},
    {"kind": "policy", "policy": {}},
)

# Always tried, whatever hypothesis draws (like hypothesis' @example): the inputs most likely to
# slip through if a check were missing.
EXPLICIT: tuple[dict[str, Any], ...] = (
    {"kind": "procedure", "procedure": "rewrite_data_files", "kwargs": {"where": "id > 0') or ('1'='1"}},
    {"kind": "procedure", "procedure": "rewrite_data_files", "kwargs": {"where": "id > 0; drop table fuzz.target"}},
    {"kind": "procedure", "procedure": "rewrite_data_files", "kwargs": {"options": {"k') , ('x": "v'); --"}}},
    {"kind": "procedure", "procedure": "expire_snapshots", "kwargs": {"older_than": "2020-01-01 00:00:00'); --"}},
    {"kind": "procedure", "procedure": "remove_orphan_files", "kwargs": {"location": "/tmp'); drop table x; --"}},
    {"kind": "procedure", "procedure": "remove_orphan_files", "kwargs": {"older_than_hours": 23.99}},
    {"kind": "procedure", "procedure": "remove_orphan_files", "kwargs": {"location": PARENT}},
    {"kind": "twin", "twin": "get_remove_orphan_files_sql", "kwargs": {"relation": "fuzz.target", "location": PARENT}},
    {"kind": "twin", "twin": "get_remove_orphan_files_sql", "kwargs": {"relation": "fuzz.target",
                                                                        "file_list_view": VIEW_OUTSIDE}},
    {"kind": "procedure", "procedure": "remove_orphan_files", "kwargs": {"file_list_view": VIEW_OUTSIDE}},
    {"kind": "procedure", "procedure": "expire_snapshots", "kwargs": {"retain_last": 10**30}},
    {"kind": "twin", "twin": "get_rewrite_data_files_sql", "kwargs": {"relation": "fuzz.target", "where": "a\\"}},
    {"kind": "twin", "twin": "get_table_snapshots_sql", "kwargs": {"relation": "fuzz.target; drop table fuzz.target"}},
    {"kind": "twin", "twin": "get_table_health_sql", "kwargs": {"relation": "fuzz.target; drop table fuzz.target",
                                                                "target_file_size_bytes": 1000}},
    {"kind": "policy", "policy": {"remove_orphan_files": {"older_than_hours": 2**63}}},
    # Past a Java int, previous-versions-max would fail the ALTER after the expiry ran.
    {"kind": "policy", "operations": ["expire_snapshots"],
     "policy": {"expire_snapshots": {"older_than_hours": 0, "retain_last": 1, "retain_metadata_files": 2**31}}},
    # ... and commit.retry.num-retries past it would fail every commit after apply_table_properties.
    {"kind": "policy", "policy": {"commit_retry": {"num_retries": 2**31}}},
    {"kind": "policy", "policy": {"properties": {"write.target-file-size-bytes": "1'); drop table fuzz.target; --"}}},
    {"kind": "policy", "policy": {"properties": {"k') , ('gc.enabled": "false"}}},
    {"kind": "policy", "policy": {"compaction": {"where": "1=1) or (1=1"}, "isolation_level": "snapshot"}},
    {"kind": "policy", "target": "cold", "operations": ["rewrite_data_files"],
     "policy": {"compaction": {"where": "1=1) or (1=1", "cold_partitions_hours": 0.0001}}},
    {"kind": "policy", "target": "cold", "operations": ["rewrite_data_files"],
     "policy": {"compaction": {"where": "id > 0", "cold_partitions_hours": 0.0001}}},
    {"kind": "var", "vars": {"dbt_iceberg_maint_catalog": "local; drop table fuzz.target"}},
    {"kind": "var", "vars": {"dbt_iceberg_maint_catalog": "local"}},
    {"kind": "policy", "relation": {"schema": "fuzz", "identifier": "target where 1=1 or"}, "policy": {}},
    {"kind": "policy", "relation": {"schema": "fu zz", "identifier": "target"}, "policy": {}},
    {"kind": "procedure", "procedure": "rewrite_data_files", "relation": {"schema": "fuzz", "identifier": "t`; --"},
     "kwargs": {"dry_run": True}},
    {"kind": "procedure", "procedure": "rewrite_data_files", "relation": "fuzz.target; drop", "kwargs": {}},
    {"kind": "policy", "relation": {"database": "x'; drop table fuzz.target; --", "schema": "fuzz",
                                    "identifier": "target"}, "policy": {}},
    {"kind": "procedure", "procedure": "rewrite_data_files", "kwargs": {"dry_run": True},
     "relation": {"database": "local", "schema": "fuzz", "identifier": "target"}},
    # The inputs that got around a guard before issue 22's fixes (docs/torture.md), tried every run.
    {"kind": "procedure", "procedure": "remove_orphan_files", "kwargs": {"location": LOCATION + "/data\n"}},
    {"kind": "procedure", "procedure": "remove_orphan_files", "kwargs": {"file_list_view": "a.b"}},
    {"kind": "procedure", "procedure": "remove_orphan_files", "kwargs": {"file_list_view": VIEW_OUTSIDE + "\n"}},
    {"kind": "procedure", "procedure": "expire_snapshots", "kwargs": {"older_than_hours": 876001}},
    {"kind": "policy", "target": "cold", "operations": ["rewrite_data_files"],
     "policy": {"compaction": {"where": "x = r'\\' or true) or (true or x = 'z\\''", "cold_partitions_hours": 0.0001}}},
    {"kind": "var", "vars": {"dbt_iceberg_maint_catalog": "local\n"}},
    {"kind": "procedure", "procedure": "rewrite_data_files", "relation": "fuzz.target\n", "kwargs": {}},
    # This session's guards: the v3 delete-ratio option's value, and steps that are no list when settled.
    {"kind": "policy", "policy": {"compaction": {"options": {"delete-ratio-threshold": "0.3') or ('1'='1"}}}},
    {"kind": "policy", "policy": {"compaction": {"options": {"delete-ratio-threshold": 5}}}},
    {"kind": "steps", "kwargs": {"steps": 1298, "settled": True}},
    # Handed-over leases (issue 57): another run's, and one naming another log, either of which
    # accepted would let the steps skip the claim.
    *({"kind": "steps", "kwargs": {"steps": [HANDED_STEP], "leases": [{**HANDED_LEASE, **change}],
                                   "keep_leases": True}}
      for change in ({}, {"log": "other.iceberg_maint_leases"})),
    # partial_progress: a near miss of `auto` and thresholds that are no positive number.
    {"kind": "policy", "policy": {"compaction": {"partial_progress": "AUTO", "partial_progress_above_mb": True}}},
    {"kind": "policy", "policy": {"compaction": {"partial_progress": "auto", "partial_progress_above_mb": "10 GB"}}},
    {"kind": "policy", "policy": {"compaction": {"partial_progress_above_mb": -1}}},
)


def draw_cases(strategy: st.SearchStrategy[dict[str, Any]], examples: int, seed: int) -> list[dict[str, Any]]:
    """`examples` cases drawn by hypothesis (collected, then run in one batch)."""
    cases: list[dict[str, Any]] = []

    @settings(max_examples=examples, database=None, derandomize=False, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(case: dict[str, Any]) -> None:
        cases.append(case)

    collect._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
    collect()
    return cases


def plan_cases(examples: int, seed: int, defaults: Mapping[str, Any],
               twins: Mapping[str, Sequence[tuple[str, bool]]] | None = None,
               variables: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every case of a run with `examples` draws per strategy (fewer for the costly var cases),
    numbered; the explicit ones included."""
    twins = twin_signatures() if twins is None else twins
    variables = macro_vars() if variables is None else variables
    cases = [*draw_cases(_procedure_case(), examples, seed), *draw_cases(_policy_case(defaults), examples, seed + 1),
             *draw_cases(_twin_case(twins), examples * 2, seed + 3), *draw_cases(_where_case(), examples, seed + 4),
             *draw_cases(_orphan_case(), max(5, examples // 2), seed + 5),
             *draw_cases(_relation_case(), max(5, examples // 5), seed + 2),
             *draw_cases(_var_case(variables), max(2, examples // 10), seed + 6),
             *draw_cases(_steps_case(), examples, seed + 10), *map(dict, EXPLICIT)]
    # Each policy key of the defaults at least once (a new key is fuzzed the day it lands); the
    # quick sample (fewer than 20 examples) leaves the sweep to the full run.
    sweep = _key_sweep(defaults) if examples >= 20 else None
    set_keys = {k for c in cases for k in policy_keys(c)}
    for section, value in defaults.items():
        for key in value if isinstance(value, Mapping) else [None]:
            name = f"{section}.{key}" if key is not None else section
            if sweep is not None and name not in set_keys:
                only = _only_key(name)
                cases.extend(c for c in draw_cases(sweep.filter(only), 2, seed + 8))
    # Each twin at least once, whatever hypothesis drew (a new twin is fuzzed the day it lands).
    for name in sorted(set(twins) - {c.get("twin") for c in cases}):
        cases.extend(draw_cases(_twin_case({name: twins[name]}), 3, seed + 7))
    for name in sorted(set(variables) - {v for c in cases for v in c.get("vars", {})}):
        cases.extend(draw_cases(_var_case([name]), 1, seed + 9))
    for number, case in enumerate(cases):
        case["id"] = number
    return cases


def target_of(case: Mapping[str, Any]) -> str:
    """What a case exercises, for `by_target`."""
    if case["kind"] == "var":
        return "var:" + ",".join(sorted(case["vars"]))
    if case.get("relation") is not None:
        return "relation"
    if case["kind"] == "twin":
        return str(case["twin"])
    if case["kind"] == "procedure":
        return str(case["procedure"])
    if case["kind"] == "steps":
        return "execute_maintenance_steps"
    if case.get("target") == "cold":
        return "policy:compaction.where+cold_partitions_hours"
    return "policy"


def policy_keys(case: Mapping[str, Any]) -> list[str]:
    """The policy keys a case sets ('section.key' or 'key')."""
    keys = []
    for key, value in (case.get("policy") or {}).items():
        keys.extend([f"{key}.{k}" for k in value] if isinstance(value, Mapping) and value else [str(key)])
    return keys


def _only_key(name: str) -> Callable[[dict[str, Any]], bool]:
    """A filter keeping the cases whose policy sets exactly `name`."""
    return lambda case: policy_keys(case) == [name]


def _substitute(value: Any, places: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for token, path in places.items():
            value = value.replace(token, path)
        return value
    if isinstance(value, list):
        return [_substitute(v, places) for v in value]
    if isinstance(value, dict):
        return {_substitute(k, places): _substitute(v, places) for k, v in value.items()}
    return value


# ---- judging outcomes (pure) --------------------------------------------------------------
def call_is_intact(sql: str) -> bool:
    """The CALL is `CALL [catalog.]system.proc(name => constant, ...)` and nothing else."""
    return not oracle.call_problems(sql)


def properties_sql_is_intact(sql: str, table: str | None = None) -> bool:
    return not oracle.alter_problems(sql, table)


def names_an_argument(errors: Sequence[str], case: Mapping[str, Any]) -> bool:
    """Some message names an argument, policy key or var the case set (as a whole word)."""
    names: set[str] = set()
    if case.get("relation") is not None:
        names.add("relation")
    names.update(case.get("kwargs", {}))
    names.update(case.get("vars", {}))
    steps = (case.get("kwargs") or {}).get("steps") if case["kind"] == "steps" else None
    for step in steps if isinstance(steps, list) else []:
        if isinstance(step, Mapping):  # refused by its keys, or by an argument of its CALL (`where`, ...)
            names.update(str(key) for key in step)
            names.update(re.findall(r"(\w+)\s*=>", str(step.get("sql"))))
    for key, value in (case.get("policy") or {}).items():
        names.add(key)
        if isinstance(value, Mapping):
            names.update(str(k) for k in value)
    text = " ".join(errors)
    return any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) for name in names if name.strip())


def _rendered_at(outcome: Mapping[str, Any]) -> datetime:
    text = outcome.get("rendered_at")
    if not text:
        return datetime.now(timezone.utc)
    return datetime.strptime(str(text), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=timezone.utc)


def sql_problems(case: Mapping[str, Any], outcome: Mapping[str, Any], places: Mapping[str, str]) -> list[str]:
    """The oracle's findings on everything the case rendered."""
    table = places.get("qualified_cold" if case.get("target") == "cold" else "qualified", "")
    problems: list[str] = []
    colds = [c for c in outcome.get("cold") or [] if c]
    for sql in oracle.sql_texts(outcome.get("sql")):
        text = str(sql).strip()
        head = text.split(None, 1)[0].lower() if text else ""
        twin = case.get("twin") if case["kind"] == "twin" else None
        location = places.get("table_location")
        if twin == "get_remove_left_behind_locations_sql" and location:
            location = location.rstrip("/").rsplit("/", 1)[0]  # a directory beside the tables, in their schema
        if twin == "get_find_left_behind_locations_sql":
            problems.extend(oracle.listing_problems(text))
        elif head == "call":
            problems.extend(oracle.call_problems(text, table_location=location, rendered_at=_rendered_at(outcome)))
            call = oracle.parse_call(text)
            if colds and isinstance(call, oracle.Call) and call.procedure == "rewrite_data_files":
                # The cold predicate read just before and just after the plan: either may be the one used.
                attempts = [oracle.cold_conjunct_problems(call.text("where"), cold) for cold in colds]
                if all(attempts):
                    problems.extend(attempts[0])
        elif twin in ("get_partition_range_sql", "get_partitions_where_sql"):
            kwargs = case.get("kwargs", {})
            columns = [str(kwargs.get("column"))] if twin == "get_partition_range_sql" else [
                str(f.get("column")) for f in kwargs.get("partition_fields", []) if isinstance(f, Mapping)]
            problems.extend(oracle.predicate_problems(text, columns))
        elif head in ("select", "with"):
            relation = (case.get("kwargs") or {}).get("relation", "fuzz.target")
            problems.extend(oracle.query_problems(text, str(relation) if relation != "fuzz.target" else table))
        elif head == "alter":
            problems.extend(oracle.alter_problems(text, table))
        elif text:
            problems.append(f"rendered text that is none of CALL, SELECT, ALTER or a predicate: {text[:200]}")
    properties = outcome.get("properties_sql")
    if properties:
        problems.extend(oracle.alter_problems(str(properties), table))
    return problems


def step_problems(case: Mapping[str, Any]) -> list[str]:
    """An accepted replay: each planned step's CALL runs the step's own procedure on its own table,
    and no lease was handed over (none can be this invocation's own: its run id is its invocation
    id, which no case knows, so an accepted lease would skip the claim on another run's word)."""
    problems = []
    leases = (case.get("kwargs") or {}).get("leases")
    if isinstance(leases, list) and leases:
        problems.append(f"steps took up {len(leases)} handed-over lease(s) this run never kept")
    for step in (case.get("kwargs") or {}).get("steps") or []:
        if step.get("status") != "planned":
            continue
        call = oracle.parse_call(str(step.get("sql")))
        if not isinstance(call, oracle.Call):
            continue  # sql_problems reports it
        if call.procedure != step.get("operation"):
            problems.append(f"a {step.get('operation')} step runs {call.procedure}")
        named = call.text("table")
        if named is None or not oracle.same_table(named, str(step.get("table"))):
            problems.append(f"a step on {step.get('table')!r} calls its procedure on {named!r}")
    return problems


def judge(case: Mapping[str, Any], outcome: Mapping[str, Any], places: Mapping[str, str] | None = None) -> str:
    """refused | unclear (a twin or var refused without naming what it was given: not a safety
    defect) | accepted | a defect description."""
    places = places or {}
    errors = outcome.get("errors") or []
    if errors:
        if names_an_argument(errors, case):
            return "refused"
        if case["kind"] in ("twin", "var"):
            return "unclear"
        return f"refused without naming the argument: {errors}"
    problems = sql_problems(case, outcome, places) + (step_problems(case) if case["kind"] == "steps" else [])
    if problems:
        return "DEFECT: " + "; ".join(dict.fromkeys(problems))
    if case["kind"] == "procedure" and outcome.get("status") != "dry_run":
        return f"accepted but its dry run reported {outcome.get('status')!r}"
    return "accepted"


def judge_var(case: Mapping[str, Any], probes: Sequence[Mapping[str, Any]], outcomes: Mapping[int, Mapping[str, Any]],
              error: str | None, places: Mapping[str, str]) -> str:
    """A var case: every probe it rendered must pass the oracle; a failed invocation is a refusal
    when its message names the var."""
    for probe in probes:
        outcome = outcomes.get(probe["id"])
        if outcome is not None:
            verdict = judge({**probe, "vars": case["vars"]}, outcome, places)
            if verdict.startswith("DEFECT"):
                return f"{verdict} (probe {probe.get('twin') or probe.get('procedure') or probe['kind']})"
    if error is not None:
        return judge(case, {"errors": [error]}, places)
    return "accepted"


def summarise(cases: Sequence[Mapping[str, Any]], verdicts: Mapping[int, str], table_changed: int) -> dict[str, Any]:
    """torture.json's `bad_inputs`: the counts, per target, per policy key, and every defect."""
    by_target: dict[str, dict[str, int]] = {}
    keys: dict[str, int] = {}
    for case in cases:
        verdict = verdicts[case["id"]]
        bucket = verdict if verdict in ("refused", "accepted", "unclear") else "defects"
        slot = by_target.setdefault(target_of(case), {"tried": 0, "refused": 0, "accepted": 0, "unclear": 0,
                                                      "defects": 0})
        slot["tried"] += 1
        slot[bucket] += 1
        for key in policy_keys(case):
            keys[key] = keys.get(key, 0) + 1
    defects = [{"case": {k: v for k, v in case.items() if k != "id"}, "id": case["id"],
                "verdict": verdicts[case["id"]]} for case in cases
               if verdicts[case["id"]] not in ("refused", "accepted", "unclear")]
    return {"tried": len(cases), "refused": sum(s["refused"] for s in by_target.values()),
            "accepted": sum(s["accepted"] for s in by_target.values()),
            "unclear": sum(s["unclear"] for s in by_target.values()),
            "defect_count": len(defects), "defects": defects, "table_changed": table_changed,
            "by_target": dict(sorted(by_target.items())), "policy_keys": dict(sorted(keys.items()))}


# ---- running (I/O) -----------------------------------------------------------------------------
def table_state(spark: Any, table: str) -> tuple[Any, ...]:
    snapshot = spark.sql(f"select snapshot_id from {table}.snapshots order by committed_at desc limit 1").collect()
    properties = sorted((r[0], r[1]) for r in spark.sql(f"show tblproperties {table}").collect())
    return (snapshot[0][0] if snapshot else None, tuple(properties))


def _outcomes(messages: Sequence[str], marker: str = MARKER) -> dict[Any, dict[str, Any]]:
    found = {}
    for payload in marker_payloads(messages, marker.strip()):
        outcome = json.loads(payload)
        found[outcome.get("id")] = outcome
    return found


def operation_error(messages: Sequence[str]) -> str | None:
    """The compiler error a failed run-operation logged."""
    for message in messages:
        if message.startswith("Encountered an error while running operation"):
            return message
    return None


def table_location(spark: Any, table: str) -> str:
    rows = spark.sql(f"describe table extended {table}").collect()
    return str(next(r[1] for r in rows if str(r[0]).strip() == "Location"))


def view_escapes(spark: Any, view: str, location: str) -> bool:
    """Whether a file-list view names a file outside `location` (False when it cannot be read)."""
    try:
        paths = [r[0] for r in spark.sql(f"select file_path from {view}").collect()]
    except Exception:  # noqa: BLE001 - no such view: Iceberg would fail, nothing is deleted
        return False
    return any(not oracle.inside(str(p), location) for p in paths)


class _Session:
    """One fuzz run's dbt invocations, each bracketed by the tables' states. Only the invocations
    write to the tables, so the state read after one is the state before the next: read once."""

    def __init__(self, run: Callable[..., Any], spark: Any, tables: Sequence[str], relation: str,
                 cold_relation: str) -> None:
        self.run, self.spark, self.tables = run, spark, tables
        self.relation, self.cold_relation = relation, cold_relation
        self.changed: list[list[int]] = []
        self.invocations = 0
        self._last: list[tuple[Any, ...]] | None = None

    def states(self) -> list[tuple[Any, ...]]:
        return [table_state(self.spark, t) for t in self.tables]

    def invoke(self, macro: str, involved: Sequence[Mapping[str, Any]], extra: Sequence[str] = (), **args: Any) -> Any:
        before = self._last if self._last is not None else self.states()
        arguments = json.dumps({**args, "relation": self.relation, "cold_relation": self.cold_relation},
                               ensure_ascii=False)
        invocation = self.run("run-operation", macro, "--args", arguments, *extra, expect_success=False)
        self.invocations += 1
        self._last = self.states()
        if self._last != before:
            self.changed.append([c["id"] for c in involved])
        return invocation


def run_fuzz(run: Callable[..., Any], spark: Any, table: str, relation: str, examples: int, seed: int = 14,
             cold_table: str | None = None, replay: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Every case through the macros; returns torture.json's `bad_inputs` (defects listed, each
    with its `template`: the case before this run's paths were filled in). `replay`: run those
    templates (a previous run's defects) instead of drawing.

    The phases, in order: the session and the paths cases are filled with; the case templates
    (drawn with the policy defaults the macros log, or replayed); the cases batched through the
    checks; single and sampled refused cases alone through the public macro; the var cases; every
    case judged; the invocations that changed a table; the summary."""
    session, location, places = _fuzz_session(run, spark, table, relation, cold_table)
    templates = _templates(session, examples, seed, replay)
    cases = [_substitute(dict(c), places) for c in templates.values()]
    verdicts: dict[int, str] = {}
    outcomes: dict[int, dict[str, Any]] = {}
    single = [c for c in cases if c.get("relation") is not None]
    batched = [c for c in cases if c.get("relation") is None and c["kind"] != "var"]
    _run_batched(session, batched, single, outcomes)
    _run_alone(session, batched, single, outcomes, verdicts)
    _run_vars(session, cases, verdicts, places)
    _judge_cases(spark, cases, outcomes, verdicts, places, location)
    _judge_changes(session, verdicts)
    result = summarise(cases, verdicts, int(bool(session.changed)))
    for defect in result["defects"]:
        defect["template"] = templates[defect["id"]]
    result["invocations"] = session.invocations
    result["seed"], result["examples"] = seed, examples
    return result


def _fuzz_session(run: Callable[..., Any], spark: Any, table: str, relation: str, cold_table: str | None
                  ) -> tuple[_Session, str, dict[str, str]]:
    """The session over the target, the cold target and the neighbour; the target's location; the
    places a case's paths are filled with."""
    catalog = table.rsplit(".", 2)[0] if table.count(".") == 2 else "local"
    cold_table = cold_table or f"{catalog}.fuzz.cold_target"
    session = _Session(run, spark, [table, cold_table, f"{catalog}.fuzz.neighbour"], relation,
                       cold_table.split(".", 1)[1] if cold_table.count(".") == 2 else cold_table)
    location = table_location(spark, table)
    places = {LOCATION: location, PARENT: location.rsplit("/", 1)[0],
              NEIGHBOUR: table_location(spark, f"{catalog}.fuzz.neighbour"), "table_location": location,
              "qualified": table, "qualified_cold": cold_table}
    return session, location, places


def _templates(session: _Session, examples: int, seed: int, replay: Sequence[Mapping[str, Any]] | None
               ) -> dict[Any, Any]:
    """The cases by id before their paths are filled in: `replay`, or drawn with the policy
    defaults the macros log."""
    defaults_run = session.invoke("torture_fuzz_policy_defaults", [])
    defaults = _outcomes(defaults_run.log_messages, DEFAULTS_MARKER)
    if not defaults:
        raise RuntimeError(f"torture_fuzz_policy_defaults logged nothing: {defaults_run.exception}")
    return {c["id"]: c for c in (replay or plan_cases(examples, seed, next(iter(defaults.values()))))}


def _run_batched(session: _Session, batched: list[dict[str, Any]], single: list[dict[str, Any]],
                 outcomes: dict[int, dict[str, Any]]) -> None:
    """`batched` through the checks, 200 a batch, into `outcomes`; a case that broke its batch
    goes to `single`."""
    queue = [batched[start:start + 200] for start in range(0, len(batched), 200)]
    while queue:
        chunk = queue.pop(0)
        invocation = session.invoke("torture_fuzz_cases", chunk, cases=chunk)
        found = _outcomes(invocation.log_messages)
        outcomes.update(found)
        if not invocation.success:
            # The first case without an outcome broke the batch: alone through the macro, and
            # the rest of the chunk batched again.
            missing = [c for c in chunk if c["id"] not in found]
            single.append(missing[0])
            if missing[1:]:
                queue.insert(0, missing[1:])


def _run_alone(session: _Session, batched: list[dict[str, Any]], single: list[dict[str, Any]],
               outcomes: dict[int, dict[str, Any]], verdicts: dict[int, str]) -> None:
    """`single` and a sample of the refused batched cases alone through the public macro; a case
    the checks accepted and the macro refused is a defect."""
    # Refused cases once more through the public macro alone (its own compiler error): one per
    # target, enough to see every macro's own refusal.
    sampled: dict[str, dict[str, Any]] = {}
    for case in batched:
        outcome = outcomes.get(case["id"])
        if outcome and outcome["errors"] and case not in single:
            sampled.setdefault(target_of(case) + ":" + ",".join(sorted(map(str, case.get("policy") or {}))), case)
    for case in [*single, *sampled.values()]:
        invocation = session.invoke("torture_fuzz_one", [case], case=case)
        found = _outcomes(invocation.log_messages)
        if invocation.success:
            outcomes[case["id"]] = found.get(case["id"], {"errors": [], "status": None})
        else:
            error = operation_error(invocation.log_messages) or str(invocation.exception or "dbt failed silently")
            previous = outcomes.get(case["id"])
            if previous is not None and not previous.get("errors") and case["kind"] != "twin":
                verdicts[case["id"]] = f"accepted by the checks but refused by the macro: {error[:300]}"
            outcomes[case["id"]] = {"errors": [error]}


def _run_vars(session: _Session, cases: list[dict[str, Any]], verdicts: dict[int, str],
              places: Mapping[str, str]) -> None:
    """Each var case: the probes under its --vars, judged."""
    for case in [c for c in cases if c["kind"] == "var"]:
        probes = [{**p, "id": f"{case['id']}.{n}"} for n, p in enumerate(VAR_PROBES)]
        invocation = session.invoke("torture_fuzz_cases", [case], ["--vars", json.dumps(case["vars"])], cases=probes)
        failure = None if invocation.success else (
            operation_error(invocation.log_messages) or str(invocation.exception or "dbt failed silently"))
        verdicts[case["id"]] = judge_var(case, probes, _outcomes(invocation.log_messages), failure, places)


def _judge_cases(spark: Any, cases: list[dict[str, Any]], outcomes: Mapping[int, dict[str, Any]],
                 verdicts: dict[int, str], places: Mapping[str, str], location: str) -> None:
    """A verdict for every case that has none yet, from its outcome (and whether a file-list view
    it was accepted with lists files outside the table)."""
    for case in cases:
        if case["id"] in verdicts:
            continue
        verdict = judge(case, outcomes.get(case["id"], {"errors": ["no outcome logged"]}), places)
        view = (case.get("kwargs") or {}).get("file_list_view")
        if verdict == "accepted" and isinstance(view, str) and view_escapes(spark, view, location):
            verdict = (f"DEFECT: remove_orphan_files accepted file_list_view {view!r}, which lists files outside "
                       "the table")
        verdicts[case["id"]] = verdict


def _judge_changes(session: _Session, verdicts: dict[int, str]) -> None:
    """Every case of an invocation that changed a table's snapshot or properties is a defect."""
    for ids in session.changed:
        for number in ids:
            verdicts[number] = f"DEFECT: a table's snapshot or properties changed in the invocation of cases {ids}"


def build_target(spark: Any, catalog: str = "local") -> None:
    """fuzz.target (bucketed), fuzz.cold_target (identity partitions: cold after a moment),
    fuzz.neighbour (beside them: what an escaping location would delete) and two file-list
    views, one naming the neighbour's files."""
    spark.sql(f"create namespace if not exists {catalog}.fuzz")
    spark.sql(f"create table if not exists {catalog}.fuzz.target (id bigint, payload string) using iceberg "
              "partitioned by (bucket(2, id))")
    spark.sql(f"create table if not exists {catalog}.fuzz.cold_target (id bigint, part int, payload string) "
              "using iceberg partitioned by (part)")
    spark.sql(f"create table if not exists {catalog}.fuzz.neighbour (id bigint) using iceberg")
    for i in range(3):
        spark.sql(f"insert into {catalog}.fuzz.target values ({i}, 'p{i}')")
        spark.sql(f"insert into {catalog}.fuzz.cold_target values ({i}, {i}, 'p{i}')")
    spark.sql(f"insert into {catalog}.fuzz.neighbour values (1)")
    for view, table in ((VIEW_OUTSIDE, "neighbour"), (VIEW_INSIDE, "target")):
        spark.sql(f"create or replace temporary view {view} as select file_path, "
                  f"timestamp '2000-01-01 00:00:00' as last_modified from {catalog}.fuzz.{table}.files")
    time.sleep(1)  # every partition older than the smallest cold_partitions_hours drawn (0.36 s)


def main(argv: Sequence[str] | None = None) -> None:
    """Own embedded Spark + the integration project on the embedded catalog (./scripts/torture, or
    a fuzz run alone: `python -m lab.fuzz --examples 500 --out fuzz.json`)."""
    parser = argparse.ArgumentParser(prog="lab.fuzz")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary folder")
    parser.add_argument("--examples", type=int, default=100, help="hypothesis draws per strategy")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--out", "--output", dest="output", type=Path, required=True)
    parser.add_argument("--replay", type=Path, default=None,
                        help="a previous --out file (or torture.json): run only its defects' cases again")
    args = parser.parse_args(argv)
    replay = None
    if args.replay:
        document = json.loads(args.replay.read_text())
        replay = [d.get("template") or {**d["case"], "id": d["id"]}
                  for d in document.get("bad_inputs", document)["defects"]]
    with tempfile.TemporaryDirectory(prefix="fuzz-") as scratch:
        result = _standalone(args.workdir or Path(scratch), args.examples, args.seed, replay)
    args.output.write_text(json.dumps(result, indent=2, default=str, ensure_ascii=False) + "\n")
    print(f"tried {result['tried']}, refused {result['refused']}, accepted {result['accepted']}, "
          f"unclear {result['unclear']}, defects {result['defect_count']}, table changed {result['table_changed']}")


def _standalone(workdir: Path, examples: int, seed: int, replay: Sequence[Mapping[str, Any]] | None = None
                ) -> dict[str, Any]:
    from dbt_iceberg_maint.runtime.invoke import invoke_dbt
    from dbt_iceberg_maint.runtime.spark import WAREHOUSE_ENV, start_session

    warehouse = (workdir / "warehouse").resolve()
    warehouse.mkdir(parents=True, exist_ok=True)
    spark = start_session(warehouse)
    spark.sparkContext.setLogLevel("ERROR")
    env = {"DBT_ICEBERG_MAINT_SCHEMA": "fuzz", WAREHOUSE_ENV: str(warehouse),
           "DBT_TARGET_PATH": str(workdir / "target"), "DBT_LOG_PATH": str(workdir / "logs")}
    try:
        build_target(spark)

        def run(*dbt_args: str, expect_success: bool = True) -> Any:
            return invoke_dbt(list(dbt_args), env=env)

        deps = run("deps", "--quiet")
        if not deps.success:
            raise SystemExit(f"dbt deps failed: {deps.exception}")
        began = time.monotonic()
        result = run_fuzz(run, spark, "local.fuzz.target", "fuzz.target", examples, seed, replay=replay)
        result["seconds"] = round(time.monotonic() - began, 1)
        return result
    finally:
        spark.stop()


def run_fuzz_process(workdir: Path, examples: int) -> dict[str, Any]:
    """`python -m lab.fuzz` in its own process (its own JVM), for ./scripts/torture."""
    import subprocess

    workdir.mkdir(parents=True, exist_ok=True)
    output = workdir / "fuzz.json"
    with tempfile.TemporaryFile() as log:
        code = subprocess.run([sys.executable, "-m", "lab.fuzz", "--workdir", str(workdir), "--examples", str(examples),
                               "--out", str(output)], stdout=log, stderr=subprocess.STDOUT, cwd=REPO).returncode
        if code != 0:
            log.seek(0)
            raise RuntimeError(f"lab.fuzz failed ({code}): {log.read().decode(errors='replace')[-3000:]}")
    return dict(json.loads(output.read_text()))


def covered(result: Mapping[str, Any], names: Iterable[str]) -> list[str]:
    """The twins / targets among `names` a result did not try (empty when all were)."""
    return [name for name in names if not result.get("by_target", {}).get(name, {}).get("tried")]


if __name__ == "__main__":
    main()
