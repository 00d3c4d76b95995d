"""Open the Iceberg catalog Spark uses, from Spark's own `spark.sql.catalog.<name>.*` settings.

`CatalogConfig` is a pure value built from CLI options or a dbt profile; `open_catalog` is the
I/O shell that turns it into a `MetadataCatalog` (list tables, load one table's metadata).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from dbt_iceberg_maint.errors import CatalogError, TableMissingError, TableNotIcebergError, TableReadError, UsageError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

DEFAULT_CATALOG_NAME = "local"
# Spark-side settings with no meaning for reading metadata: accepted and ignored.
SPARK_ONLY_KEYS = ("cache-enabled", "cache.expiration-interval-ms", "cache.case-sensitive", "default-namespace",
                   "io-impl", "jdbc.init-catalog-tables", "jdbc.busy_timeout")
# The embedded default's catalog file in the warehouse (dbt_iceberg_maint.embedded_catalog, kept
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


# PostgreSQL JDBC URI parameters -> libpq's (what psycopg2 takes). None: the value needs a
# translation below. A parameter missing here is refused, never dropped: `currentSchema` decides
# which catalog tables are read, `sslmode` whether the connection is encrypted.
_JDBC_TO_LIBPQ: dict[str, str | None] = {
    "sslmode": "sslmode", "sslrootcert": "sslrootcert", "sslcert": "sslcert", "sslkey": "sslkey",
    "sslpassword": "sslpassword", "ssl": None, "currentSchema": None, "options": None,
    "ApplicationName": "application_name", "connectTimeout": "connect_timeout", "targetServerType": None,
    "gssEncMode": "gssencmode", "user": None, "password": None,
}


def _libpq_parameters(query: str, jdbc_uri: str) -> tuple[dict[str, str], str | None, str | None]:
    """(libpq parameters, user, password) from a JDBC URI's query string."""
    params: dict[str, str] = {}
    user = password = None
    search_path: list[str] = []
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in _JDBC_TO_LIBPQ:
            raise UsageError(f"catalog property uri={jdbc_uri}: JDBC URI parameter `{key}` ({key}={value}) has no "
                             "equivalent for pyiceberg's PostgreSQL connection; supported: "
                             f"{', '.join(_JDBC_TO_LIBPQ)}")
        target = _JDBC_TO_LIBPQ[key]
        if target is not None:
            params[target] = value
        elif key == "user":
            user = value
        elif key == "password":
            password = value
        elif key == "ssl":
            if value.lower() in ("true", ""):
                params.setdefault("sslmode", "require")
        elif key == "currentSchema":
            search_path.append(value)
        elif key == "options":
            params["options"] = value
        elif key == "targetServerType":
            params["target_session_attrs"] = {"primary": "read-write", "master": "read-write",
                                              "secondary": "read-only", "slave": "read-only"}.get(value, value)
    if search_path:
        params["options"] = " ".join(filter(None, [params.get("options"), f"-c search_path={','.join(search_path)}"]))
    return params, user, password


def _sqlalchemy_uri(jdbc_uri: str, user: str | None, password: str | None) -> str:
    """jdbc:postgresql://host:port/db?k=v -> postgresql+psycopg2://user:password@host:port/db?k=v,
    every JDBC parameter kept (translated to libpq's name) or refused."""
    if jdbc_uri.startswith("jdbc:sqlite:"):
        return "sqlite:///" + jdbc_uri.removeprefix("jdbc:sqlite:")
    if not jdbc_uri.startswith("jdbc:postgresql://"):
        raise UsageError(f"catalog property uri={jdbc_uri} is not supported for type=jdbc; "
                         "supported: jdbc:postgresql://host:port/db, jdbc:sqlite:PATH")
    parts = urlsplit(jdbc_uri.removeprefix("jdbc:"))
    params, uri_user, uri_password = _libpq_parameters(parts.query, jdbc_uri)
    # jdbc.user / jdbc.password win over the URI's own, as in the JDBC driver.
    user, password = user or uri_user, password or uri_password
    auth = ""
    if user:
        auth = quote(user, safe="") + (":" + quote(password, safe="") if password else "") + "@"
    query = ("?" + urlencode(params, quote_via=quote)) if params else ""
    return f"postgresql+psycopg2://{auth}{parts.netloc}{parts.path}{query}"


def _sqlite_file(jdbc_uri: str) -> Path | None:
    if not jdbc_uri.startswith("jdbc:sqlite:"):
        return None
    path = jdbc_uri.removeprefix("jdbc:sqlite:").split("?", 1)[0].removeprefix("file:")
    return None if not path or path.startswith(":memory:") else Path(path)


def _read_version_hint(table_dir: Path) -> Path:
    metadata_dir = table_dir / "metadata"
    hint = metadata_dir / "version-hint.text"
    try:
        version = int(hint.read_text().strip())
    except (OSError, ValueError) as exc:
        raise TableReadError(f"{hint}: cannot read the current version ({exc})") from exc
    for candidate in (f"v{version}.metadata.json", f"v{version}.gz.metadata.json"):
        if (metadata_dir / candidate).is_file():
            return metadata_dir / candidate
    raise TableReadError(f"{metadata_dir}: version-hint says {version} but v{version}.metadata.json is missing")


class MetadataCatalog:
    """Tables of one catalog, as pyiceberg `Table`s (metadata only)."""

    def __init__(self, config: CatalogConfig, catalog: Catalog | None = None,
                 per_thread: Callable[[], Catalog] | None = None) -> None:
        """`per_thread`: make one pyiceberg catalog per thread with it (`catalog` is the first
        thread's). pyiceberg's Hive catalog shares one metastore connection that each call opens and
        closes: two threads on one instance fail with `Transport not open`, and the planner reads
        tables from several threads."""
        self.config = config
        self._first = catalog
        self._per_thread = per_thread
        self._local = threading.local()
        self._owner = threading.get_ident()

    @property
    def _catalog(self) -> Catalog | None:
        if self._per_thread is None or threading.get_ident() == self._owner:
            return self._first
        mine: Catalog | None = getattr(self._local, "catalog", None)
        if mine is None:
            mine = self._local.catalog = self._per_thread()
        return mine

    @property
    def warehouse(self) -> Path:
        return Path(self.config.properties["warehouse"].removeprefix("file:"))

    @property
    def catalog(self) -> Catalog:
        """The pyiceberg catalog (for writers such as the benchmarks' lake builders)."""
        if self._catalog is None:
            raise CatalogError(f"catalog {self.config.name} is a Hadoop warehouse: pyiceberg has no catalog for it")
        return self._catalog

    def list_tables(self) -> list[str]:
        """Every table as `namespace.table` (nested namespaces dotted), sorted."""
        if self._catalog is None:
            root = self.warehouse
            if not root.is_dir():
                raise CatalogError(f"warehouse {root} is not a directory")
            found: list[str] = []
            for current, dirs, _files in os.walk(root):
                path = Path(current)
                if (path / "metadata").is_dir() and path != root:
                    found.append(".".join(path.relative_to(root).parts))
                    dirs.clear()
            return sorted(found)
        names: list[str] = []
        pending: list[tuple[str, ...]] = [()]
        while pending:
            namespace = pending.pop()
            for child in self._catalog.list_namespaces(namespace):
                pending.append(tuple(child))
            if namespace:
                names.extend(".".join(ident) for ident in self._catalog.list_tables(namespace))
        return sorted(names)

    def create_namespace(self, namespace: str) -> None:
        """Create `namespace` when it is missing (a Thrift Server's clients `USE default` on connect)."""
        if self._catalog is None:
            (self.warehouse / namespace).mkdir(parents=True, exist_ok=True)
        else:
            self._catalog.create_namespace_if_not_exists(namespace)

    def load(self, name: str) -> Table:
        """The table's current metadata; TableReadError when it cannot be read."""
        parts = [p for p in name.split(".") if p]
        if len(parts) > 1 and parts[0] == self.config.name:
            parts = parts[1:]
        if len(parts) < 2:
            raise TableReadError(f"table name {name!r} is not namespace.table")
        from pyiceberg.exceptions import NoSuchIcebergTableError, NoSuchPropertyException, NoSuchTableError

        try:
            if self._catalog is None:
                from pyiceberg.table import StaticTable

                table_dir = self.warehouse.joinpath(*parts)
                if not table_dir.is_dir():
                    raise TableMissingError(f"table {name} does not exist (no table directory {table_dir})")
                return StaticTable.from_metadata(str(_read_version_hint(table_dir)))
            return self._catalog.load_table(tuple(parts))
        except TableReadError:
            raise
        except NoSuchIcebergTableError as exc:  # a metastore table of another type
            raise TableNotIcebergError(f"table {name} is not an Iceberg table ({exc})") from exc
        except NoSuchPropertyException as exc:
            # A Hive Metastore table without the `table_type` parameter Iceberg sets: a Hive table.
            if "table_type" not in str(exc):
                raise TableReadError(f"{name}: {type(exc).__name__}: {exc}") from exc
            raise TableNotIcebergError(f"table {name} is not an Iceberg table ({exc})") from exc
        except NoSuchTableError as exc:
            raise TableMissingError(f"table {name} does not exist ({exc})") from exc
        except Exception as exc:  # pyiceberg raises many kinds (ValidationError, OSError, NoSuchTable...)
            raise TableReadError(f"{name}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                                 ) from exc


def open_catalog(config: CatalogConfig) -> MetadataCatalog:
    config.check()
    props = dict(config.properties)
    kind = config.catalog_type
    if kind == "hadoop":
        return MetadataCatalog(config)
    try:
        if kind == "jdbc":
            from pyiceberg.catalog.sql import SqlCatalog

            database = _sqlite_file(props["uri"])
            if database is not None and not database.is_file():  # SqlCatalog would create an empty one
                raise CatalogError(f"catalog {config.name}: the SQLite catalog file {database} does not exist")
            uri = _sqlalchemy_uri(props["uri"], props.get("jdbc.user"), props.get("jdbc.password"))
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

