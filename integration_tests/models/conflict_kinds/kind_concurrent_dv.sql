{#- concurrent_dv: a format-version 3 table; the post-hook's merge-on-read DELETE writes a deletion
    vector for a data file a concurrent DELETE added a DV to meanwhile
    (tests/integration/test_conflict_kinds.py). Only built with --vars '{conflict_kinds: true}'. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    enabled=var('conflict_kinds', false),
    materialized='table',
    tblproperties={'format-version': '3', 'write.delete.mode': 'merge-on-read'},
    post_hook="delete from {{ this }} where event_id % 2 = 1 and iceberg_maint_conflict_gate('{{ this.identifier }}', event_id)",
) }}

select distinct event_id, {{ seed_batch }} as loaded_batch
from {{ ref('raw_events') }}
where batch <= {{ seed_batch }}
