"""The one exception root of dbt_iceberg_maint."""

from __future__ import annotations


class IcebergMaintError(Exception):
    """Base class of every error this package raises on purpose."""


class RuntimeSetupError(IcebergMaintError):
    """The embedded Spark + Iceberg runtime cannot start (Java, jar, warehouse)."""


class UsageError(IcebergMaintError):
    """A caller passed an argument the product cannot accept."""


class CatalogError(IcebergMaintError):
    """The catalog cannot be opened (bad settings, unreachable)."""


class TableReadError(IcebergMaintError):
    """One table's metadata cannot be read (missing file, corrupt JSON, not Iceberg)."""


class TableMissingError(TableReadError):
    """The catalog has no such table (pyiceberg's NoSuchTableError, or no table directory)."""


class TableNotIcebergError(TableReadError):
    """The catalog's table is not an Iceberg table (a Hive table beside Iceberg ones in a metastore)."""


class NotSelectable(IcebergMaintError):
    """dbt's selection syntax cannot name exactly this node."""


class SnapshotLogError(IcebergMaintError):
    """A snapshot log line the runner cannot read."""


class ResultLineError(IcebergMaintError):
    """A line carries the result marker but is not a valid result record."""


class PolicyError(IcebergMaintError):
    """A maintenance policy or procedure argument the macros would refuse (same message)."""


class LeaseError(IcebergMaintError):
    """The lease admin's run-operation failed or logged no readable ICEBERG_MAINT_LEASES line."""


class HistoryError(IcebergMaintError):
    """The maintenance history table is missing or holds a row the report cannot read."""
