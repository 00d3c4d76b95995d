{#- One row per table and day of the maintenance history (docs/history.md): what maintenance did
    to the table that day and the table's figures after its last executed step of the day (null
    on a day where no step ran). Built only with the var dbt_iceberg_maint_history_models: true. -#}
{{ config(enabled=var('dbt_iceberg_maint_history_models', false), materialized='table', file_format='iceberg') }}

{%- set figure = "coalesce(cast(get_json_object(output, '$.{}') as bigint), 0)" %}
{%- set health = "cast(get_json_object(max_by(health_after, case when health_after is not null then ended_at end), '$.{}') as {})" %}

select
  table_name,
  max(node) as node,
  to_date(started_at) as day,
  count(distinct run_id) as runs,
  count_if(status = 'success') as succeeded,
  count_if(status = 'failed') as failed,
  count_if(status = 'skipped') as skipped,
  count_if(status = 'success' and operation = 'rewrite_data_files') as compactions,
  count_if(status = 'success' and operation = 'expire_snapshots') as expiries,
  sum(case when operation = 'rewrite_data_files' then {{ figure.format('rewritten_bytes_count') }} else 0 end)
    as bytes_compacted,
  sum({{ figure.format('orphan_file_count') }}) as orphan_files_removed,
  {{ health.format('data_files', 'bigint') }} as data_files,
  {{ health.format('delete_files', 'bigint') }} as delete_files,
  {{ health.format('snapshots', 'bigint') }} as snapshots,
  {{ health.format('oldest_snapshot_age_hours', 'double') }} as oldest_snapshot_age_hours
from {{ dbt_iceberg_maint.history_relation() }}
group by table_name, to_date(started_at)
