"""One catalog's tables as pyiceberg `Table`s (metadata only): listed, and each loaded with the
catalog's failures turned into the product's errors (missing, not Iceberg, unreadable). A Hadoop
warehouse has no pyiceberg catalog: its tables are read from their directories."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from dbt_iceberg_maint.errors import CatalogError, TableMissingError, TableNotIcebergError, TableReadError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

    from dbt_iceberg_maint.metadata.catalog import CatalogConfig


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
        from pyiceberg.catalog import TABLE_TYPE
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
            # pyiceberg raises this one type for that and for an Iceberg table without
            # `metadata_location` (unreadable): no type tells them apart, the property named does.
            if TABLE_TYPE not in str(exc):
                raise TableReadError(f"{name}: {type(exc).__name__}: {exc}") from exc
            raise TableNotIcebergError(f"table {name} is not an Iceberg table ({exc})") from exc
        except NoSuchTableError as exc:
            raise TableMissingError(f"table {name} does not exist ({exc})") from exc
        except Exception as exc:  # pyiceberg raises many kinds (ValidationError, OSError, NoSuchTable...)
            raise TableReadError(f"{name}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                                 ) from exc
