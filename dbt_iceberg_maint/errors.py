"""The one exception root of dbt_iceberg_maint."""

from __future__ import annotations


class IcebergMaintError(Exception):
    """Base class of every error this package raises on purpose."""


class RuntimeSetupError(IcebergMaintError):
    """The embedded Spark + Iceberg runtime cannot start (Java, jar, warehouse)."""


class UsageError(IcebergMaintError):
    """A caller passed an argument the product cannot accept."""


class PolicyError(IcebergMaintError):
    """A maintenance policy or procedure argument the macros would refuse (same message)."""
