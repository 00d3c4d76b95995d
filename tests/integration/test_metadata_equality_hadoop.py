"""The metadata planner's equality with the macros (test_metadata_equality.py) on a Hadoop catalog's
warehouse: tables found by their folders, read through version-hint.text and pyiceberg's StaticTable.
A repeat of that module's claim on another catalog (marker `catalogs`: the lab tier); the Hadoop
reader's own cases (an unreadable version-hint.text, folders that are no table) are in the test
tier's test_metadata_cli.py and tests/unit."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dbt_iceberg_maint.metadata.catalog import config_from_options, open_catalog
from tests.integration.test_metadata_equality import assert_planner_equals_macros

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.conftest import DbtProject

pytestmark = [pytest.mark.integration, pytest.mark.catalogs]
CATALOG_PROPERTIES = {"type": "hadoop"}


def test_planner_equals_macros_on_a_hadoop_warehouse(spark: SparkSession, warehouse: Path,
                                                     dbt_project: DbtProject) -> None:
    catalog = open_catalog(config_from_options(str(warehouse), []))
    assert catalog.config.properties == {"type": "hadoop", "warehouse": str(warehouse)}
    assert_planner_equals_macros(spark, catalog, dbt_project)
