{#- One of two idempotent MERGEs that lose a real catalog race at the same moment, in two dbt
    threads (tests/integration/test_threads.py). Only built with --vars '{threads_scenario: true}'. -#}
{{ config(
    enabled=var('threads_scenario', false),
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='event_id',
    tblproperties={'commit.retry.num-retries': '0', 'write.merge.isolation-level': 'snapshot'},
) }}

{{ latest_events() }}
