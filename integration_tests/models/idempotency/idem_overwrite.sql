{#- insert_overwrite (tests/integration/test_idempotency_table.py): re-running a batch after its
    commit landed replaces the same partitions. Only built with --vars '{idempotency_scenario: true}'. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    enabled=var('idempotency_scenario', false),
    materialized='incremental',
    incremental_strategy='insert_overwrite',
    partition_by=['loaded_batch'],
) }}

select event_id, user_id, event_type, event_ts, amount, batch as loaded_batch
from {{ ref('raw_events') }}
{% if is_incremental() %}
where batch = {{ seed_batch }}
{% else %}
where batch <= {{ seed_batch }}
{% endif %}
