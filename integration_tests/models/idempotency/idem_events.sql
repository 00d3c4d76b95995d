{#- The microbatch model's input, with an event_time so each batch reads only its own day. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(enabled=var('idempotency_scenario', false), materialized='table', event_time='event_ts') }}

select event_id, user_id, event_type, event_ts, amount, batch
from {{ ref('raw_events') }}
where batch <= {{ seed_batch }}
