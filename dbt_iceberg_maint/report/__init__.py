"""`dbt-iceberg-maint report`: the maintenance history and current health as one report.

A pure core (`model`: typed history rows and the report's values; `core.build_report`: rows,
current health and estimates -> a `Report`) between a thin I/O shell (`shell`: reads the history
table and the tables' metadata with pyiceberg, writes the files) and the renderers (`render`: JSON,
PNG charts with matplotlib, one self-contained HTML page). docs/report.md describes the figures.
"""
