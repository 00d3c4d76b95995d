{#- merge on a unique key: a re-run after a landed commit leaves the same rows. -#}
{{ config(incremental_strategy='merge', unique_key='id', partition_by=['part']) }}
select id, batch_id, payload, cast(batch_id div 5 as bigint) as part from ({{ batch_sql() }}) batch
