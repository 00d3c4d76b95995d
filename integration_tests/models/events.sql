{#- Day-partitioned events, loaded batch by batch and MERGEd on event_id: a correction in a
    later batch updates the row in place. Idempotent: re-running a batch changes nothing. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='event_id',
    partition_by=['days(event_ts)'],
    tags=['maintained'],
) }}

with loaded as (
    select
        event_id,
        user_id,
        event_type,
        event_ts,
        amount,
        batch as loaded_batch,
        row_number() over (partition by event_id order by batch desc) as version_rank
    from {{ ref('raw_events') }}
    {% if is_incremental() %}
    where batch = {{ seed_batch }}
    {% else %}
    where batch <= {{ seed_batch }}
    {% endif %}
)

select event_id, user_id, event_type, event_ts, amount, loaded_batch
from loaded
where version_rank = 1
