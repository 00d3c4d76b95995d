"""Fuzzed bad input through the real macros on the suite's session (docs/torture.md, "Bad
input"): the quick sample that `./scripts/torture --quick` draws too."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from lab.fuzz import build_target, covered, macro_vars, run_fuzz, twin_signatures

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = [pytest.mark.integration, pytest.mark.lab]


def test_fuzzed_input_is_refused_naming_the_argument_or_works(spark: SparkSession, dbt_project: DbtProject) -> None:
    """The quick sample (about 75 inputs, ./scripts/torture --quick draws the same): every twin,
    var and `where` form tried; the oracle finds no defect; no table changed."""
    build_target(spark)
    result = run_fuzz(dbt_project, spark, "local.fuzz.target", "fuzz.target", examples=6)
    assert result["defects"] == [], [(d["id"], d["case"], d["verdict"][:300]) for d in result["defects"]]
    assert result["table_changed"] == 0
    assert result["tried"] >= 50 and result["refused"] > 0 and result["accepted"] > 0, result
    targets = [*twin_signatures(), *(f"var:{v}" for v in macro_vars()), "policy:compaction.where+cold_partitions_hours",
               "remove_orphan_files", "relation", "execute_maintenance_steps"]
    assert covered(result, targets) == [], result["by_target"]
