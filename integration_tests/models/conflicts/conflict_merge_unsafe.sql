{#- The same MERGE as conflict_merge, declared not idempotent (e.g. its source is not
    deterministic): the runner must report its conflict and refuse to re-run it. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    enabled=var('conflict_scenario', false),
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='event_id',
    partition_by=['days(event_ts)'],
    meta={'iceberg_maint': {'idempotent': false}},
) }}

select event_id, user_id, event_type, event_ts, amount, batch as loaded_batch
from {{ ref('raw_events') }}
where iceberg_maint_conflict_gate('{{ this.identifier }}', event_id)
{% if is_incremental() %}
    and batch = {{ seed_batch }}
{% else %}
    and batch <= {{ seed_batch }}
{% endif %}
