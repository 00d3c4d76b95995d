{# Never run: the benchmark builds this table's state with SQL; the model makes it an Iceberg
   model of the project, so iceberg_maintenance maintains it with the policy above. #}
{{ config(materialized='incremental', partition_by=['day']) }}
select cast(1 as bigint) as id, date'2026-01-01' as day, 'x' as payload
