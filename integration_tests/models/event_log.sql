{#- Append-only audit log of every row received, partitioned by event_date (identity).
    Not idempotent: re-running a batch appends its rows a second time. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    materialized='incremental',
    incremental_strategy='append',
    partition_by=['event_date'],
    tags=['maintained'],
) }}

select
    event_id,
    event_type,
    cast(event_ts as date) as event_date,
    amount,
    batch as loaded_batch
from {{ ref('raw_events') }}
{% if is_incremental() %}
where batch = {{ seed_batch }}
{% else %}
where batch <= {{ seed_batch }}
{% endif %}
