"""benchmarks/post_hooks.py: it measures the README's post-hooks and policy, on 20 models."""

from __future__ import annotations

from pathlib import Path

from benchmarks import post_hooks

README = Path(__file__).parents[2] / "README.md"


def test_the_hooks_project_carries_the_readmes_post_hooks_and_policy_word_for_word() -> None:
    readme = [line.strip() for line in README.read_text().splitlines()]
    hooks = [line.strip() for line in post_hooks.HOOKS_CONFIG.splitlines()]
    start = readme.index(hooks[0])
    assert readme[start:start + len(hooks)] == hooks


def test_twenty_models_of_each_kind_the_docstring_names() -> None:
    models = post_hooks.models()
    assert len(models) == 20
    merges, appends, tables = post_hooks.FULL_SHAPE
    assert sum("incremental_strategy='merge'" in sql for sql in models.values()) == merges
    assert sum("materialized='table'" in sql for sql in models.values()) == tables + 1  # customers
    assert len(post_hooks.models(post_hooks.QUICK_SHAPE)) == 6
    # Each run writes the next batch: the event log and the marts built from it read the setting.
    assert sum("${hooks_bench.batch}" in sql for sql in models.values()) == 1 + merges + appends


def test_statements_are_told_apart_by_kind() -> None:
    kind = post_hooks.statement_kind
    assert kind("/* {\"app\": \"dbt\"} */ CALL local.system.remove_orphan_files(table => 'a.b')") == \
        "call remove_orphan_files"
    assert kind("show tblproperties a.b") == "show tblproperties"
    assert kind("alter table a.b set tblproperties ('k' = 'v')") == "alter table set tblproperties"
    assert kind("with files as (select 1 from a.b.data_files) select 1") == "metadata table query"
    assert kind("merge into a.b as t using c") == "merge into"
