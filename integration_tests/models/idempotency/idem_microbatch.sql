{#- microbatch (tests/integration/test_idempotency_table.py): each day's batch overwrites its own
    partition, so re-running the same days after their commits landed changes nothing.
    Only built with --vars '{idempotency_scenario: true}'. -#}
{{ config(
    enabled=var('idempotency_scenario', false),
    materialized='incremental',
    incremental_strategy='microbatch',
    event_time='event_ts',
    begin='2026-11-01',
    batch_size='day',
    partition_by=['event_date'],
) }}

select event_id, user_id, event_type, event_ts, amount, batch as loaded_batch, cast(event_ts as date) as event_date
from {{ ref('idem_events') }}
