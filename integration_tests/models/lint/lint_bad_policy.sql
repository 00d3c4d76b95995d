{#- Lint scenario: a policy that would fail the maintenance run (a where that does not parse, a
    where naming a column the model does not produce, an orphan window below 24 h), and a
    declared property nobody reconciles, silenced with a reason. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    enabled=var('lint_scenario', false),
    materialized='incremental',
    incremental_strategy='append',
    partition_by=['event_date'],
    meta={'iceberg_maint': {
        'compaction': {'where': 'event_date <'},
        'rewrite_position_delete_files': {'where': 'event_day = current_date()'},
        'remove_orphan_files': {'older_than_hours': 12},
        'properties': {'write.target-file-size-bytes': '134217728'},
        'lint_ignore': {'properties_never_reconciled': 'reconciled by the nightly apply_table_properties job'},
    }},
) }}

select event_id, event_type, cast(event_ts as date) as event_date, amount
from {{ ref('raw_events') }}
where batch = {{ seed_batch }}
