{#- An idempotent MERGE that loses a real catalog race (tests/integration/test_cli_end_to_end.py):
    no Iceberg retries, so the lost race reaches dbt as CommitFailedException and the runner
    re-runs it. Snapshot isolation: the race's append is no data conflict (under serializable the
    re-run, planned from the session's cached pre-race snapshot, would meet it as
    conflicting_added_files). Only built with --vars '{cli_scenario: true}'. -#}
{{ config(
    enabled=var('cli_scenario', false),
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
