{#- insert_overwrite: each batch replaces its own partition, so a re-run is idempotent. -#}
{{ config(incremental_strategy='insert_overwrite', partition_by=['batch_id']) }}
select id, payload, cast(batch_id div 5 as bigint) as part, batch_id from ({{ batch_sql() }}) batch
