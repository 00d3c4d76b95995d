{#- Lint scenario (tests/integration/test_lint_project.py; only parsed with --vars
    '{lint_scenario: true}'): a MERGE that follows every lint rule. Its incremental predicate
    bounds the target's partition source column, so Spark scans (and Iceberg validates) only the
    recent partitions; compaction only touches partitions quiet for 6 h. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    enabled=var('lint_scenario', false),
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='event_id',
    partition_by=['days(event_ts)'],
    incremental_predicates=["DBT_INTERNAL_DEST.event_ts >= date_sub(current_date(), 3)"],
    meta={'iceberg_maint': {'compaction': {'cold_partitions_hours': 6}}},
) }}

select event_id, user_id, event_type, event_ts, amount, batch as loaded_batch
from {{ ref('raw_events') }}
where batch = {{ seed_batch }}
