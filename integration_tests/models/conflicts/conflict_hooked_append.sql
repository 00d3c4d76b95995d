{#- The same post-hook conflict on an append model: its append has landed when the hook fails,
    so a re-run would append the batch twice; the runner must refuse. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    enabled=var('conflict_hook_scenario', false),
    materialized='incremental',
    incremental_strategy='append',
    post_hook="merge into {{ this.schema }}.conflict_hooked_append_audit as t using (select event_id, max(cast(event_ts as date)) as day, max(loaded_batch) as loaded_batch from {{ this }} where iceberg_maint_conflict_gate('conflict_hooked_append_audit', event_id) group by event_id) as s on t.event_id = s.event_id when matched then update set * when not matched then insert *",
) }}

select event_id, user_id, event_type, event_ts, amount, batch as loaded_batch
from {{ ref('raw_events') }}
{% if is_incremental() %}
where batch = {{ seed_batch }}
{% else %}
where batch <= {{ seed_batch }}
{% endif %}
