{#- conflicting_added_files: a serializable copy-on-write MERGE loses to a concurrent append
    (tests/integration/test_conflict_kinds.py; docs/conflict-kinds-evidence.md). Only built with
    --vars '{conflict_kinds: true}'. Every run merges all rows up to the batch, so the batch-1
    rows are updated (their files rewritten or deleted from) on the second run. -#}
{{ config(
    enabled=var('conflict_kinds', false),
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='event_id',
    tblproperties={'format-version': '2', 'write.merge.isolation-level': 'serializable'},
) }}

with latest as (
    select *, row_number() over (partition by event_id order by batch desc) as version_rank
    from {{ ref('raw_events') }}
    where batch <= {{ var('batch') }}
)

select event_id, user_id, event_type, event_ts, amount, {{ var('batch') }} as loaded_batch
from latest
where version_rank = 1 and iceberg_maint_conflict_gate('{{ this.identifier }}', event_id)
