"""The documented `python -m dbt_iceberg_maint.thrift_server start|stop` (docs/dbt-cloud.md); the server
lives in runtime/thrift_server.py."""

from __future__ import annotations

from dbt_iceberg_maint.runtime.thrift_server import main, start_thrift_server, stop_recorded_server

__all__ = ["main", "start_thrift_server", "stop_recorded_server"]

if __name__ == "__main__":
    raise SystemExit(main())
