{#- commit_failed: a real lost catalog race (another writer takes the metadata version the MERGE was about to write; no Iceberg retries)
    (tests/integration/test_conflict_kinds.py; docs/conflict-kinds-evidence.md). Only built with
    --vars '{conflict_kinds: true}'. Every run merges all rows up to the batch, so the batch-1
    rows are updated (their files rewritten or deleted from) on the second run. -#}
{{ config(
    enabled=var('conflict_kinds', false),
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='event_id',
    tblproperties={'format-version': '2', 'write.merge.isolation-level': 'snapshot', 'commit.retry.num-retries': '0'},
) }}

{{ latest_events(gated=true) }}
