"""The documented path of `ManifestGraph` (docs/python-cli.md, "Python API"); it lives in runtime/invoke.py."""

from __future__ import annotations

from dbt_iceberg_maint.runtime.invoke import ManifestGraph

__all__ = ["ManifestGraph"]
