"""Pure planner logic: cold predicates from partition metadata, the cost gate, catalog settings,
model selection. The policy itself (resolution, checks, due rules, CALL text) is in the shared
case table (tests/policy_cases.yml); planner and macros are compared on real tables by
tests/integration/test_metadata_equality.py."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from dbt_iceberg_maint.errors import CatalogError, UsageError
from dbt_iceberg_maint.metadata import cold as d
from dbt_iceberg_maint.metadata.catalog import (
    CatalogConfig,
    config_from_options,
    config_from_spark_settings,
    open_catalog,
    parse_properties,
)
from dbt_iceberg_maint.metadata.jdbc_uri import sqlalchemy_uri
from dbt_iceberg_maint.metadata.planner import PlannedOperation, emit_args, plan_table
from dbt_iceberg_maint.metadata.project import ModelTarget, iceberg_models
from dbt_iceberg_maint.policy.gate import GateSnapshot, gate_reason
from dbt_iceberg_maint.policy.operation_types import ColdScope
from dbt_iceberg_maint.policy.selection import Shard, shard_of
from dbt_iceberg_maint.policy.sql import TableRef

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
HOUR = 3600000


def test_a_policy_with_lint_ignore_is_planned_not_failed() -> None:
    """The planner once refused `lint_ignore` (which maintain() accepts) and failed every operation."""
    target = ModelTarget("shop.orders", TableRef("analytics", "orders"),
                         {"lint_ignore": {"merge_without_unique_key": "append-only"}, "idempotent": True})
    rows, tiers = plan_table(target, None, ["rewrite_manifests", "expire_snapshots"])
    assert [(r.operation, r.status, r.reason) for r in rows] == [
        ("expire_snapshots", "skipped", "table does not exist (model not built yet?)"),
        ("rewrite_manifests", "skipped", "table does not exist (model not built yet?)")]
    assert tiers == set()
    named = ModelTarget("shop.orders", TableRef("analytics", "orders"), {}, named=True)
    missing, _ = plan_table(named, None, ["rewrite_manifests"])
    assert [(r.status, r.due, r.reason) for r in missing] == [
        ("failed", False, "table analytics.orders does not exist (a typo, or its model not built yet?)")]
    typo = ModelTarget("shop.orders", TableRef("analytics", "orders"), {"lint_ignor": {}})
    failed, _ = plan_table(typo, None, ["rewrite_manifests"])
    assert failed[0].status == "failed" and "unknown key `lint_ignor`" in failed[0].reason


@pytest.mark.parametrize(("transform", "column_type", "value", "expected"), [
    ("days", "timestamp", "2024-01-31", "(ts >= timestamp '2024-01-31 00:00:00+00:00' and "
                                        "ts < timestamp '2024-02-01 00:00:00+00:00')"),
    ("months", "date", 12 * 54 + 11, "(ts >= date '2024-12-01' and ts < date '2025-01-01')"),
    ("hours", "timestamp_ntz", 24, "(ts >= timestamp_ntz '1970-01-02 00:00:00' and ts < timestamp_ntz "
                                   "'1970-01-02 01:00:00')"),
    ("identity", "string", "it's", "ts = 'it\\'s'"),
    ("identity", "string", "a;b", None),
    ("identity", "double", 1.5, None),
    ("bucket", "bigint", 3, None),
    ("identity", "bigint", None, "ts is null"),
])
def test_partition_range_sql(transform: str, column_type: str, value: object, expected: str | None) -> None:
    assert d.partition_range_sql(transform, "ts", column_type, value) == expected


def test_cold_scope_from_partition_metadata() -> None:
    fields = [d.PartitionField("days", "ts")]
    now = 1000 * HOUR
    partitions = [
        d.PartitionState(("2024-01-02",), True, now - 10 * HOUR, 4),
        d.PartitionState(("2024-01-01",), True, now - 20 * HOUR, 2),
        d.PartitionState(("2024-01-03",), True, now - 1 * HOUR, 9),  # still warm
        d.PartitionState(("2023-12-31",), False, now - 30 * HOUR, 7),  # older spec: left out
    ]
    scope = d.cold_scope(fields, {"ts": "timestamp"}, partitions, 6, now, None, 22)
    assert scope.max_small_files == 4
    assert scope.where is not None and scope.where.split(" or ") == sorted(scope.where.split(" or "))
    assert "2024-01-01 00:00:00" in scope.where and "ts >= timestamp '2024-01-03" not in scope.where
    unpartitioned = d.cold_scope([], {}, [d.PartitionState((), True, None, 5)], 6, now, now - 7 * HOUR, 5)
    # expired snapshot: the oldest retained one stands in
    assert unpartitioned == ColdScope("true", 5, partitioned=False)
    warm = d.cold_scope([], {}, [d.PartitionState((), True, now - HOUR, 5)], 6, now, None, 5)
    assert (warm.where, warm.partitioned, scope.partitioned) == (None, False, True)


Snap = GateSnapshot


def test_cost_gate_rules() -> None:
    now = 100 * HOUR
    history = [Snap(1, 10 * HOUR, "append", {"added-records": "50"}), Snap(2, 90 * HOUR, "replace")]
    off = {"enabled": True, "skip_unchanged": False, "min_interval_hours": None, "min_new_records": None,
           "min_new_bytes": None}
    assert gate_reason("rewrite_manifests", off, history, now) is None
    unchanged = {**off, "skip_unchanged": True}
    assert gate_reason("rewrite_manifests", unchanged, history, now) == (
        "cost gate: no new snapshot since the last maintenance 10.0 h ago (skip_unchanged)")
    assert gate_reason("expire_snapshots", unchanged, history, now) is None  # due by age alone
    # A write that went cold after the last maintenance lets cold-scoped compaction through.
    late = [Snap(3, 89 * HOUR, "append"), Snap(2, 90 * HOUR, "replace")]
    assert gate_reason("rewrite_data_files", unchanged, late, now, cold_partitions_hours=6) is None
    assert gate_reason("rewrite_data_files", unchanged, late, now) is not None
    assert gate_reason("remove_orphan_files", {**off, "min_interval_hours": 24}, history, now) == (
        "cost gate: last maintained 10.0 h ago, less than min_interval_hours 24")
    written = [*history, Snap(4, 95 * HOUR, "append", {"added-records": "7", "added-files-size": "900"})]
    assert gate_reason("rewrite_manifests", {**off, "min_new_records": 10}, written, now) == (
        "cost gate: 7 records added since the last maintenance, below min_new_records 10")
    assert gate_reason("rewrite_manifests", {**off, "min_new_bytes": 100}, written, now) is None
    assert gate_reason("rewrite_manifests", unchanged, history[:1], now) is None  # never maintained


def test_catalog_settings_in_spark_vocabulary() -> None:
    assert parse_properties(["spark.sql.catalog.pg.uri=jdbc:postgresql://h:5/db", "type=jdbc"]) == {
        "uri": "jdbc:postgresql://h:5/db", "type": "jdbc"}
    with pytest.raises(UsageError, match="--catalog-property 'type' is not KEY=VALUE"):
        parse_properties(["type"])
    with pytest.raises(UsageError, match="catalog property type=nessie is not supported; allowed: hadoop, jdbc"):
        config_from_options(None, ["type=nessie"])
    with pytest.raises(UsageError, match="catalog property s3.endpoint is not supported for type=hadoop"):
        config_from_options("/w", ["s3.endpoint=x"])
    with pytest.raises(UsageError, match="no catalog given"):
        config_from_options(None, [])
    assert config_from_options("/w", []).properties == {"type": "hadoop", "warehouse": "/w"}
    with pytest.raises(UsageError, match="--warehouse is the embedded catalog's directory; it cannot be combined "
                                         "with --catalog-property type=rest"):
        config_from_options("/w", ["type=rest"])
    assert sqlalchemy_uri("jdbc:postgresql://127.0.0.1:5432/ice", "u s", "p@w") == (
        "postgresql+psycopg2://u%20s:p%40w@127.0.0.1:5432/ice")
    with pytest.raises(UsageError, match="uri=jdbc:mysql://h/db is not supported for type=jdbc"):
        sqlalchemy_uri("jdbc:mysql://h/db", None, None)
    settings = {"spark.sql.catalog.local": "org.apache.iceberg.spark.SparkCatalog",
                "spark.sql.catalog.local.type": "hadoop", "spark.sql.catalog.local.warehouse": "wh",
                "spark.sql.catalog.local.cache-enabled": "false", "spark.sql.defaultCatalog": "local"}
    assert config_from_spark_settings(settings) == CatalogConfig("local", {"type": "hadoop", "warehouse": "wh",
                                                                           "cache-enabled": "false"})
    with pytest.raises(UsageError, match="name 0 Iceberg catalogs"):
        config_from_spark_settings({"spark.sql.catalog.x": "other.Catalog"})


def test_the_embedded_catalog_of_a_warehouse(tmp_path: Path) -> None:
    """`--warehouse DIR`: the SQLite catalog file in DIR when there is one (the embedded default),
    else the Hadoop catalog's tables; `type=hadoop` forces the Hadoop catalog."""
    from dbt_iceberg_maint.runtime.spark import CatalogSpec, prepare_warehouse

    warehouse = str(tmp_path / "wh")
    assert config_from_options(warehouse, []).properties == {"type": "hadoop", "warehouse": warehouse}
    prepare_warehouse(CatalogSpec(warehouse=warehouse))
    assert config_from_options(warehouse, []).properties == {
        "type": "jdbc", "uri": f"jdbc:sqlite:{warehouse}/iceberg_catalog.db", "warehouse": warehouse}
    assert config_from_options(warehouse, ["type=hadoop"]).properties == {"type": "hadoop", "warehouse": warehouse}
    assert sqlalchemy_uri(f"jdbc:sqlite:{warehouse}/iceberg_catalog.db", None, None) == (
        f"sqlite:///{warehouse}/iceberg_catalog.db")
    # The embedded profile's settings (integration_tests/profiles.yml) read back as that catalog; with its
    # type switched to hadoop, the keys Spark's Hadoop catalog ignores are ignored here too.
    settings = {"spark.sql.catalog.local": "org.apache.iceberg.spark.SparkCatalog", "spark.sql.defaultCatalog": "local",
                "spark.sql.catalog.local.type": "jdbc", "spark.sql.catalog.local.uri": "jdbc:sqlite:/wh/c.db",
                "spark.sql.catalog.local.jdbc.schema-version": "V1",
                "spark.sql.catalog.local.jdbc.init-catalog-tables": "false",
                "spark.sql.catalog.local.jdbc.busy_timeout": "60000", "spark.sql.catalog.local.warehouse": "/wh"}
    assert config_from_spark_settings(settings).properties["uri"] == "jdbc:sqlite:/wh/c.db"
    hadoop = config_from_spark_settings({**settings, "spark.sql.catalog.local.type": "hadoop"})
    assert hadoop.properties == {"type": "hadoop", "warehouse": "/wh"}
    with pytest.raises(CatalogError, match="the SQLite catalog file /nowhere/c.db does not exist"):
        open_catalog(CatalogConfig("local", {"type": "jdbc", "uri": "jdbc:sqlite:/nowhere/c.db"}))


def test_models_and_emitted_args() -> None:
    def node(name: str, **config: object) -> dict[str, object]:
        return {"resource_type": "model", "name": name, "package_name": "p", "schema": "s", "alias": None,
                "tags": ["nightly"] if name == "b" else [],
                "config": {"materialized": "table", "file_format": "iceberg", **config}}

    manifest = {"nodes": {"model.p.a": node("a", meta={"iceberg_maint": {"enabled": False}}),
                          "model.p.b": node("b"), "model.p.v": node("v", materialized="view"),
                          "model.p.c": node("c", file_format="parquet")}}
    targets = iceberg_models(manifest)
    assert [(t.model, t.ref.name, t.raw_policy) for t in targets] == [
        ("p.a", "s.a", {"enabled": False}), ("p.b", "s.b", {})]
    assert [t.model for t in iceberg_models(manifest, ["tag:nightly"])] == ["p.b"]
    # A model --select names must have its table; one a tag picks may not be built yet.
    assert [(t.model, t.named) for t in iceberg_models(manifest, ["tag:nightly", "p.a"])] == [
        ("p.b", False), ("p.a", True)]
    assert [t.named for t in targets] == [False, False]
    with pytest.raises(UsageError, match="--select 'v' is not an Iceberg model of the project; Iceberg models: a, b"):
        iceberg_models(manifest, ["v"])
    # A tag that selects nothing is an error too (issue 55: it used to plan nothing and exit 0)...
    with pytest.raises(UsageError, match="--select 'tag:nope' selects no Iceberg model of the project "
                                         r"\(none has that tag\); Iceberg models: a, b"):
        iceberg_models(manifest, ["tag:nightly", "tag:nope"])
    # ...but a shard left empty is not: N jobs share a lake, some shards of a small one hold nothing.
    without_b = next(Shard(k, 2) for k in (1, 2) if not Shard(k, 2).holds("s", "b"))
    assert iceberg_models(manifest, ["tag:nightly"], without_b) == []
    plan = [PlannedOperation("s.a", "rewrite_manifests", False, "skipped", "x", None, "p.a"),
            PlannedOperation("s.b", "rewrite_manifests", True, "dry_run", "y", "CALL ...", "p.b"),
            PlannedOperation("raw.ev", "rewrite_manifests", True, "dry_run", "z", "CALL ...", "source:raw.events")]
    assert emit_args(plan) == {"select": ["b", "source:raw.events"]}
    assert emit_args(plan[:1]) is None  # nothing due: no select list that selects nothing


def test_sources_and_shards_in_the_selection() -> None:
    """iceberg_maintenance's selection in Python: sources that declare meta.iceberg_maint join the
    models by default; source:<source> takes those, source:<source>.<table> any table of it (named,
    so it must exist); a shard keeps the tables of its share."""
    def source(name: str, **meta: object) -> dict[str, object]:
        return {"resource_type": "source", "source_name": "raw", "name": name, "identifier": f"{name}_v2",
                "schema": "landing", "meta": meta, "config": {"enabled": True}}

    manifest = {"nodes": {"model.p.m": {"resource_type": "model", "name": "m", "package_name": "p", "schema": "s",
                                        "alias": None, "config": {"materialized": "table", "file_format": "iceberg"}}},
                "sources": {"source.p.raw.events": source("events",
                                                          iceberg_maint={"compaction": {"min_input_files": 2}}),
                            "source.p.raw.users": source("users")}}
    assert [(t.model, t.ref.name, t.raw_policy, t.named) for t in iceberg_models(manifest)] == [
        ("p.m", "s.m", {}, False), ("source:raw.events", "landing.events_v2", {"compaction": {"min_input_files": 2}},
                                    False)]
    assert [(t.model, t.named) for t in iceberg_models(manifest, ["source:raw"])] == [("source:raw.events", False)]
    assert [(t.model, t.raw_policy, t.named) for t in iceberg_models(manifest, ["source:raw.users"])] == [
        ("source:raw.users", {}, True)]
    with pytest.raises(UsageError, match="--select 'source:raw.nope' names no enabled source table; sources: raw"):
        iceberg_models(manifest, ["source:raw.nope"])
    with pytest.raises(UsageError, match="'source:web' names no enabled source table that declares meta.iceberg_maint"):
        iceberg_models(manifest, ["source:web"])
    everything = ["p.m", "source:raw.events", "source:raw.users"]
    shards = [[t.model for t in iceberg_models(manifest, everything, Shard(k, 3))] for k in (1, 2, 3)]
    assert sorted(sum(shards, [])) == everything  # disjoint, and together the whole selection
    assert shards[0] == [t.model for t in iceberg_models(manifest, everything)
                         if shard_of(*t.ref.name.split("."), 3) == 1]
