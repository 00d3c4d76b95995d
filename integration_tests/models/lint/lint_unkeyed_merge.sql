{#- Lint scenario: a MERGE without unique_key (dbt-spark merges `on FALSE`: an append, not
    idempotent). Compaction is scoped by a where that leaves the newest partitions alone. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    enabled=var('lint_scenario', false),
    materialized='incremental',
    incremental_strategy='merge',
    partition_by=['event_date'],
    meta={'iceberg_maint': {'compaction': {'where': 'event_date < date_sub(current_date(), 1)'}}},
) }}

select event_id, event_type, cast(event_ts as date) as event_date, amount
from {{ ref('raw_events') }}
where batch = {{ seed_batch }}
