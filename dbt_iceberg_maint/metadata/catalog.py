"""Open the Iceberg catalog Spark uses, from Spark's own `spark.sql.catalog.<name>.*` settings.

`CatalogConfig` is a pure value built from CLI options or a dbt profile; `open_catalog` is the
I/O shell that turns it into a `MetadataCatalog` (catalog_tables.py: list tables, load one table's
metadata), a JDBC catalog's URI translated for pyiceberg by jdbc_uri.py.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dbt_iceberg_maint.errors import CatalogError, UsageError
from dbt_iceberg_maint.metadata.catalog_tables import MetadataCatalog
from dbt_iceberg_maint.metadata.jdbc_uri import sqlalchemy_uri, sqlite_file

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

DEFAULT_CATALOG_NAME = "local"
# Spark-side settings with no meaning for reading metadata: accepted and ignored.
SPARK_ONLY_KEYS = ("cache-enabled", "cache.expiration-interval-ms", "cache.case-sensitive", "default-namespace",
                   "io-impl", "jdbc.init-catalog-tables", "jdbc.busy_timeout")
# The embedded default's catalog file in the warehouse (dbt_iceberg_maint.runtime.embedded_catalog, kept
# free of that import: this module loads without Spark's).
EMBEDDED_CATALOG_FILE = "iceberg_catalog.db"
# Keys Spark's Hadoop catalog ignores: a profile that switches its catalog type (an env_var) keeps them.
_HADOOP_IGNORED_PREFIXES = ("uri", "jdbc.")
SUPPORTED_KEYS: dict[str, tuple[str, ...]] = {
    "hadoop": ("type", "warehouse"),
    "jdbc": ("type", "uri", "jdbc.user", "jdbc.password", "warehouse", "jdbc.schema-version"),
    "rest": ("type", "uri", "warehouse", "credential", "token", "scope", "oauth2-server-uri", "prefix"),
    "hive": ("type", "uri", "warehouse"),
    "glue": ("type", "warehouse", "glue.id", "glue.region", "glue.endpoint", "client.region"),
}




@dataclass(frozen=True)
class CatalogConfig:
    """An Iceberg catalog in Spark's vocabulary: `type`, `uri`, `warehouse`, `jdbc.user`, ..."""

    name: str
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def catalog_type(self) -> str:
        return self.properties.get("type", "hadoop").lower()

    @property
    def is_hadoop(self) -> bool:
        return self.catalog_type == "hadoop"

    def check(self) -> CatalogConfig:
        """Raise UsageError naming the first unsupported key or type; return self."""
        kind = self.catalog_type
        if "catalog-impl" in self.properties:
            raise UsageError(f"catalog property catalog-impl={self.properties['catalog-impl']} is not supported; "
                             f"use type= one of {', '.join(SUPPORTED_KEYS)}")
        if kind not in SUPPORTED_KEYS:
            raise UsageError(f"catalog property type={kind} is not supported; allowed: {', '.join(SUPPORTED_KEYS)}")
        for key in self.properties:
            if key not in SUPPORTED_KEYS[kind] and key not in SPARK_ONLY_KEYS and not key.startswith("header."):
                raise UsageError(f"catalog property {key} is not supported for type={kind}; supported: "
                                 f"{', '.join(SUPPORTED_KEYS[kind])} (ignored: {', '.join(SPARK_ONLY_KEYS)})")
        required = {"hadoop": ("warehouse",), "jdbc": ("uri",), "rest": ("uri",), "hive": ("uri",), "glue": ()}[kind]
        for key in required:
            if not self.properties.get(key):
                raise UsageError(f"catalog property {key} is required for type={kind}")
        return self


def parse_properties(pairs: Sequence[str]) -> dict[str, str]:
    """`KEY=VALUE` strings (the --catalog-property option) to a dict; a bare key is an error."""
    result: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--catalog-property {pair!r} is not KEY=VALUE (e.g. type=jdbc)")
        key = key.strip()
        # Full Spark keys are accepted too: spark.sql.catalog.<name>.uri -> uri.
        match = re.fullmatch(r"spark\.sql\.catalog\.[A-Za-z_][A-Za-z0-9_]*\.(.+)", key)
        result[match.group(1) if match else key] = value
    return result


def embedded_properties(warehouse: str) -> dict[str, str]:
    """The embedded runtime's catalog of a warehouse directory: Iceberg's JDBC catalog on the
    SQLite file `<warehouse>/iceberg_catalog.db` when it exists, else the Hadoop catalog (a
    warehouse written with `type=hadoop`, or before the SQLite catalog became the default)."""
    local = warehouse.removeprefix("file://").removeprefix("file:")
    database = Path(local) / EMBEDDED_CATALOG_FILE
    if "://" not in local and database.is_file():
        return {"type": "jdbc", "uri": f"jdbc:sqlite:{database}", "warehouse": warehouse}
    return {"type": "hadoop", "warehouse": warehouse}


def config_from_options(warehouse: str | None, properties: Sequence[str],
                        name: str = DEFAULT_CATALOG_NAME) -> CatalogConfig:
    props = parse_properties(properties)
    if warehouse is not None:
        kind = props.get("type")
        if kind is not None and kind.lower() != "hadoop":
            raise UsageError(f"--warehouse is the embedded catalog's directory; it cannot be combined with "
                             f"--catalog-property type={kind} (use --catalog-property warehouse=...)")
        base = embedded_properties(warehouse) if kind is None else {"type": "hadoop"}
        props = {**base, **props, "warehouse": warehouse}
    if not props:
        raise UsageError("no catalog given: pass --warehouse DIR, --catalog-property KEY=VALUE, "
                         "or --profiles-dir/--target")
    return CatalogConfig(name, props).check()


def config_from_spark_settings(settings: Mapping[str, Any]) -> CatalogConfig:
    """The Iceberg catalog among Spark settings (a profile's server_side_parameters): the
    default catalog when it is an Iceberg one, else the only Iceberg catalog."""
    catalogs: dict[str, dict[str, str]] = {}
    for key, value in settings.items():
        match = re.fullmatch(r"spark\.sql\.catalog\.([A-Za-z_][A-Za-z0-9_]*)(?:\.(.+))?", str(key))
        if match:
            entry = catalogs.setdefault(match.group(1), {})
            entry[match.group(2) or ""] = str(value)
    iceberg = {n: p for n, p in catalogs.items() if p.get("", "").startswith("org.apache.iceberg.spark.")}
    default = str(settings.get("spark.sql.defaultCatalog", ""))
    if default in iceberg:
        name = default
    elif len(iceberg) == 1:
        name = next(iter(iceberg))
    else:
        raise UsageError(f"the profile's server_side_parameters name {len(iceberg)} Iceberg catalogs "
                         f"({', '.join(sorted(iceberg)) or 'none'}); expected spark.sql.defaultCatalog to be one "
                         "of them, or exactly one")
    props = {k: v for k, v in iceberg[name].items() if k}
    if props.get("type", "hadoop").lower() == "hadoop":
        props = {k: v for k, v in props.items() if not k.startswith(_HADOOP_IGNORED_PREFIXES)}
    return CatalogConfig(name, props).check()


def config_from_profile(project_dir: Path, profiles_dir: Path, target: str | None,
                        environ: Mapping[str, str] | None = None) -> CatalogConfig:
    """Read `server_side_parameters` of the project's profile target (env_var() rendered)."""
    settings = profile_setting(project_dir, profiles_dir, target, "server_side_parameters", environ)
    return config_from_spark_settings(settings or {})


def profile_setting(project_dir: Path, profiles_dir: Path, target: str | None, key: str,
                    environ: Mapping[str, str] | None = None) -> Any:
    """One setting of the project's profile target (`schema`, `server_side_parameters`, ...), its
    env_var() calls rendered; only that setting is rendered, so another's missing variable does
    not matter."""
    import jinja2
    import yaml  # type: ignore[import-untyped]

    env = dict(os.environ if environ is None else environ)
    project_file = project_dir / "dbt_project.yml"
    profiles_file = profiles_dir / "profiles.yml"
    for path in (project_file, profiles_file):
        if not path.is_file():
            raise UsageError(f"{path} does not exist; --project-dir/--profiles-dir must point at a dbt project "
                             "and its profiles.yml")
    profile_name = yaml.safe_load(project_file.read_text()).get("profile")

    def env_var(name: str, default: str | None = None) -> str:
        if name in env:
            return env[name]
        if default is None:
            raise UsageError(f"profiles.yml needs environment variable {name}, which is not set")
        return default

    jinja = jinja2.Environment(undefined=jinja2.StrictUndefined)

    def render(value: Any) -> Any:
        if isinstance(value, str) and "{{" in value:
            return jinja.from_string(value).render(env_var=env_var)
        if isinstance(value, dict):
            return {k: render(v) for k, v in value.items()}
        return value

    profiles = yaml.safe_load(profiles_file.read_text()) or {}
    profile = profiles.get(profile_name)
    if not isinstance(profile, dict):
        raise UsageError(f"{profiles_file} has no profile {profile_name!r} (dbt_project.yml's `profile`)")
    chosen = target or render(profile.get("target"))
    output = (profile.get("outputs") or {}).get(chosen)
    if not isinstance(output, dict):
        raise UsageError(f"profile {profile_name!r} has no target {chosen!r}; targets: "
                         f"{', '.join(profile.get('outputs') or {})}")
    return render(output.get(key))


def open_catalog(config: CatalogConfig) -> MetadataCatalog:
    config.check()
    props = dict(config.properties)
    kind = config.catalog_type
    if kind == "hadoop":
        return MetadataCatalog(config)
    try:
        if kind == "jdbc":
            from pyiceberg.catalog.sql import SqlCatalog

            database = sqlite_file(props["uri"])
            if database is not None and not database.is_file():  # SqlCatalog would create an empty one
                raise CatalogError(f"catalog {config.name}: the SQLite catalog file {database} does not exist")
            uri = sqlalchemy_uri(props["uri"], props.get("jdbc.user"), props.get("jdbc.password"))
            extra = {"warehouse": props["warehouse"]} if props.get("warehouse") else {}
            # Spark's JdbcCatalog stores the catalog name in each row: the same name finds them.
            return MetadataCatalog(config, SqlCatalog(config.name, uri=uri, **extra))
        from pyiceberg.catalog import load_catalog

        settings = {k: v for k, v in props.items() if k not in SPARK_ONLY_KEYS}

        def make() -> Catalog:
            return load_catalog(config.name, **settings)

        return MetadataCatalog(config, make(), per_thread=make if kind == "hive" else None)
    except (UsageError, CatalogError):
        raise
    except Exception as exc:
        raise CatalogError(f"cannot open catalog {config.name} (type={kind}): {type(exc).__name__}: {exc}") from exc

