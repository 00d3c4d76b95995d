"""idempotency: which dbt nodes may be re-run after a failure."""

from __future__ import annotations

from typing import Any

import pytest

from dbt_iceberg_maint.errors import UsageError
from dbt_iceberg_maint.runner.idempotency import idempotency, is_idempotent


def model(materialized: str, meta: dict[str, Any] | None = None, **config: Any) -> dict[str, Any]:
    return {
        "unique_id": "model.proj.m",
        "resource_type": "model",
        "config": {"materialized": materialized, "meta": meta or {}, **config},
    }


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (model("table"), True),
        (model("view"), True),
        (model("ephemeral"), True),
        (model("incremental", incremental_strategy="merge", unique_key="event_id"), True),
        (model("incremental", incremental_strategy="merge", unique_key=["event_id", "day"]), True),
        (model("incremental", incremental_strategy="insert_overwrite", partition_by=["day"]), True),
        (model("incremental", incremental_strategy="microbatch"), True),
        (model("incremental", incremental_strategy="append"), False),
        (model("incremental"), False),  # dbt-spark's default strategy is append
        (model("incremental", incremental_strategy="merge"), False),
        (model("incremental", incremental_strategy="merge", unique_key=None), False),
        (model("incremental", incremental_strategy="merge", unique_key=[]), False),
        (model("incremental", incremental_strategy="merge", unique_key=" "), False),
        (model("incremental", incremental_strategy="delete+insert", unique_key="id"), False),
        (model("my_custom_materialization"), False),
        ({"resource_type": "seed", "config": {}}, True),
        ({"resource_type": "test", "config": {"severity": "ERROR"}}, True),
        ({"resource_type": "unit_test", "config": {}}, True),
        ({"resource_type": "snapshot", "config": {"strategy": "timestamp", "unique_key": "id"}}, True),
        ({"resource_type": "operation", "config": {}}, False),
    ],
    ids=lambda value: str(
        value.get("config", {}).get("incremental_strategy") or value.get("config", {}).get("materialized")
        or value.get("resource_type")) if isinstance(value, dict) else str(value),
)
def test_inferred_from_materialization_and_strategy(node: dict[str, Any], expected: bool) -> None:
    verdict = idempotency(node)
    assert verdict.idempotent is expected
    assert verdict.reason
    assert not verdict.overridden
    assert is_idempotent(node) is expected


def test_append_reason_explains_duplicates() -> None:
    assert "duplicates rows" in idempotency(model("incremental", incremental_strategy="append")).reason


@pytest.mark.parametrize("override", [True, False])
@pytest.mark.parametrize(
    "node_config",
    [
        {"materialized": "incremental", "incremental_strategy": "append"},
        {"materialized": "incremental", "incremental_strategy": "merge", "unique_key": "id"},
    ],
)
def test_meta_overrides_the_inference_either_way(override: bool, node_config: dict[str, Any]) -> None:
    node = model(**node_config, meta={"iceberg_maint": {"idempotent": override}})
    verdict = idempotency(node)
    assert verdict.idempotent is override
    assert verdict.overridden
    assert "meta.iceberg_maint.idempotent" in verdict.reason


def test_meta_at_node_level_of_older_manifests_counts_too() -> None:
    node = {
        "resource_type": "model",
        "config": {"materialized": "table"},
        "meta": {"iceberg_maint": {"idempotent": False}},
    }
    assert not is_idempotent(node)


def test_meta_without_idempotent_key_keeps_the_inference() -> None:
    node = model("table", meta={"iceberg_maint": {"isolation_level": "snapshot"}})
    assert idempotency(node) == idempotency(model("table"))


def test_non_boolean_override_is_a_usage_error_naming_the_value() -> None:
    node = model("table", meta={"iceberg_maint": {"idempotent": "yes"}})
    message = r"invalid meta.iceberg_maint.idempotent value 'yes' on 'model.proj.m' \(allowed: true/false\)"
    with pytest.raises(UsageError, match=message):
        idempotency(node)
