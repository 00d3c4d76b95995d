"""--include-catalog's selection (policy/selection.py catalog_nodes): pure, no catalog."""

from __future__ import annotations

import pytest

from dbt_iceberg_maint.errors import UsageError
from dbt_iceberg_maint.policy.selection import Shard, catalog_nodes, declared_relations

TABLES = ["raw.clicks", "raw.Orders", "raw.iceberg_maint_leases", "lake.events", "lake.events_2024", "lake.misc",
          "other.x"]


def test_patterns_take_undeclared_tables_and_report_the_rest() -> None:
    found = catalog_nodes(TABLES, ["raw.*", "LAKE.events*", "nowhere.*"], {"lake.events"}, {"enabled": True})
    assert [n.label for n in found.nodes] == ["catalog:lake.events_2024", "catalog:raw.Orders", "catalog:raw.clicks"]
    assert {(n.schema, n.identifier, n.named) for n in found.nodes} >= {("raw", "Orders", False)}
    assert all(n.raw_policy == {"enabled": True} for n in found.nodes)
    assert found.declared_elsewhere == ("lake.events",)
    assert found.unmatched_patterns == ("nowhere.*",)
    # Only the patterns' namespaces are reported; the lease log is the package's own: never taken.
    assert found.uncovered == ("lake.misc",)


def test_a_pattern_that_matches_no_table_is_a_usage_error_naming_it() -> None:
    found = catalog_nodes(TABLES, ["raw.*", "bench.nope", "nowhere.*"], set(), {})
    with pytest.raises(UsageError) as refused:
        found.check_matched("local")
    assert str(refused.value) == ("--include-catalog 'bench.nope' matches no table of catalog local; "
                                  "--include-catalog 'nowhere.*' matches no table of catalog local")
    # A pattern whose tables all belong to dbt nodes matched: they are left to their node, no error.
    matched = catalog_nodes(TABLES, ["lake.events"], {"lake.events"}, {})
    assert matched.check_matched("local") is matched


def test_shard_narrows_and_agrees_with_model_shards() -> None:
    tables = [f"raw.t{i}" for i in range(40)]
    shards = [catalog_nodes(tables, ["raw.*"], set(), {}, Shard(k, 3)).nodes for k in (1, 2, 3)]
    labels = [n.label for shard in shards for n in shard]
    assert sorted(labels) == sorted(f"catalog:{t}" for t in tables) and all(shards)


@pytest.mark.parametrize("pattern", ["raw", "raw.", ".x", "raw.t;drop", "", "a b.c"])
def test_malformed_patterns_are_refused_naming_them(pattern: str) -> None:
    with pytest.raises(UsageError, match=r"--include-catalog .*expected 'namespace.table'"):
        catalog_nodes(TABLES, [pattern], set(), {})


def test_declared_relations_cover_every_node_kind() -> None:
    manifest = {
        "nodes": {"model.p.a": {"schema": "S", "alias": "A", "name": "a"},
                  "seed.p.b": {"schema": "s", "name": "b"}},
        "sources": {"source.p.r.c": {"schema": "raw", "identifier": "C_tbl", "name": "c"}},
        "disabled": {"model.p.d": [{"schema": "s", "name": "d"}]},
    }
    assert declared_relations(manifest) == {"s.a", "s.b", "raw.c_tbl", "s.d"}
