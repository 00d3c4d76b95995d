{#- One row per maintenance run (a run_id of the history, docs/history.md): when it ran, which
    paths and tables it covered, what its steps did and what they reclaimed. Built only with the
    var dbt_iceberg_maint_history_models: true. -#}
{{ config(enabled=var('dbt_iceberg_maint_history_models', false), materialized='table', file_format='iceberg') }}

{%- set figure = "coalesce(cast(get_json_object(output, '$.{}') as bigint), 0)" %}

select
  run_id,
  min(started_at) as started_at,
  max(ended_at) as ended_at,
  concat_ws(',', sort_array(collect_set(path))) as paths,
  count(distinct table_name) as tables,
  count(*) as steps,
  count_if(status = 'success') as succeeded,
  count_if(status = 'failed') as failed,
  count_if(status = 'skipped') as skipped,
  count_if(status = 'skipped' and (reason like 'lease held by %' or reason like 'lease lost: %')) as skipped_for_lease,
  count_if(status = 'skipped' and reason like 'cost gate: %') as skipped_by_cost_gate,
  sum(duration_ms) as procedure_ms,
  sum({{ figure.format('rewritten_data_files_count') }}) as data_files_rewritten,
  sum({{ figure.format('added_data_files_count') }}) as data_files_added,
  sum(case when operation = 'rewrite_data_files' then {{ figure.format('rewritten_bytes_count') }} else 0 end)
    as bytes_compacted,
  sum({{ figure.format('deleted_data_files_count') }}) as data_files_expired,
  sum({{ figure.format('deleted_manifest_lists_count') }}) as snapshots_expired,
  sum({{ figure.format('orphan_file_count') }}) as orphan_files_removed,
  sum({{ figure.format('rewritten_manifests_count') }}) as manifests_rewritten
from {{ dbt_iceberg_maint.history_relation() }}
group by run_id
