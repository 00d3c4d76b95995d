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

{{ latest_events() }}
