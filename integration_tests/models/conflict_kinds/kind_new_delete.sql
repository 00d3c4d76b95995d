{#- new_delete_for_replaced_file: a copy-on-write MERGE rewrites a file a concurrent merge-on-read DELETE added deletes to
    (tests/integration/test_conflict_kinds.py; docs/conflict-kinds-evidence.md). Only built with
    --vars '{conflict_kinds: true}'. Every run merges all rows up to the batch, so the batch-1
    rows are updated (their files rewritten or deleted from) on the second run. -#}
{{ config(
    enabled=var('conflict_kinds', false),
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='event_id',
    tblproperties={'format-version': '2', 'write.merge.isolation-level': 'snapshot', 'write.delete.mode': 'merge-on-read'},
) }}

{{ latest_events(gated=true) }}
