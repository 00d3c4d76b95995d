{#- One of two idempotent MERGEs that lose a real catalog race at the same moment, in two dbt
    threads (tests/integration/test_threads.py). Only built with --vars '{threads_scenario: true}'. -#}
{{ config(
    enabled=var('threads_scenario', false),
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='event_id',
    tblproperties={'commit.retry.num-retries': '0', 'write.merge.isolation-level': 'snapshot'},
) }}

with latest as (
    select *, row_number() over (partition by event_id order by batch desc) as version_rank
    from {{ ref('raw_events') }}
    where batch <= {{ var('batch') }}
)

select event_id, user_id, event_type, event_ts, amount, {{ var('batch') }} as loaded_batch
from latest
where version_rank = 1
