{# Never run: the benchmark appends to this table with SQL (the commits) and maintains it with
   iceberg_maintenance; the unmaintained copy receives the same commits. #}
{{ config(materialized='incremental', partition_by=['day']) }}
select cast(1 as bigint) as id, cast(1 as bigint) as user_id, date'2026-01-01' as day, cast(1.0 as double) as amount
