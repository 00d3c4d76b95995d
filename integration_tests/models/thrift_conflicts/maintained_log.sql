{#- An append model maintained by its own post-hook, for tests/thrift/test_thrift_macros.py:
    `maintain()` over a Spark Thrift Server. Only built with --vars '{thrift_maintain_scenario: true}'.
    Compaction without partial progress: on a Hadoop catalog, partial-progress commits race each
    other (CommitFailedException: stale table metadata) and fail the rewrite. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    enabled=var('thrift_maintain_scenario', false),
    materialized='incremental',
    incremental_strategy='append',
    partition_by=['event_date'],
    post_hook="{{ dbt_iceberg_maint.maintain() }}",
    meta={'iceberg_maint': {
        'compaction': {'min_input_files': 2, 'partial_progress': false},
        'expire_snapshots': {'older_than_hours': 1, 'retain_last': 2},
        'rewrite_manifests': {'min_manifests': 2},
    }},
) }}

select event_id, event_type, cast(event_ts as date) as event_date, amount, batch as loaded_batch
from {{ ref('raw_events') }}
where batch = {{ seed_batch }}
