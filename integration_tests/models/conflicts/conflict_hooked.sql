{#- An idempotent model (table) whose post-hook loses a commit conflict after the model's own
    write committed (tests/integration/test_conflict_posthook.py). Only built with
    --vars '{conflict_hook_scenario: true}'. The hook MERGEs into an audit table that a
    concurrent compaction rewrites while the gate holds the hook. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    enabled=var('conflict_hook_scenario', false),
    materialized='table',
    post_hook="merge into {{ this.schema }}.conflict_hooked_audit as t using (select event_id, max(cast(event_ts as date)) as day, max(loaded_batch) as loaded_batch from {{ this }} where iceberg_maint_conflict_gate('conflict_hooked_audit', event_id) group by event_id) as s on t.event_id = s.event_id when matched then update set * when not matched then insert *",
) }}

select event_id, user_id, event_type, event_ts, amount, batch as loaded_batch
from {{ ref('raw_events') }}
where batch <= {{ seed_batch }}
