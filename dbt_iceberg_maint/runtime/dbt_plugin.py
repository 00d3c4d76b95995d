"""The package as a dbt plugin, so plain `dbt` prepares the embedded catalog as our commands do.

dbt-core imports every installed top-level module whose name starts with `dbt_` and instantiates
the classes its `plugins` attribute lists (dbt/plugins/manager.py, an experimental interface of
dbt-core 1.10 and 1.11), after it has read the profile and before it connects. This one creates
what the profile target's Iceberg catalog needs before Spark opens it (embedded_profile): a
warehouse named by DBT_ICEBERG_MAINT_WAREHOUSE alone works without `dbt-iceberg-maint env`.
"""

from __future__ import annotations

from pathlib import Path

from dbt.plugins.manager import dbtPlugin

from dbt_iceberg_maint.runtime.embedded_profile import OFFLINE_COMMANDS, prepare_profile_catalog


class EmbeddedCatalogPlugin(dbtPlugin):
    def initialize(self) -> None:
        from dbt.flags import get_flags

        flags = get_flags()  # type: ignore[no-untyped-call]
        if getattr(flags, "WHICH", None) in OFFLINE_COMMANDS or not getattr(flags, "PROFILES_DIR", None):
            return
        prepare_profile_catalog(Path(getattr(flags, "PROJECT_DIR", None) or ".").resolve(),
                                Path(flags.PROFILES_DIR).resolve(), getattr(flags, "TARGET", None))
