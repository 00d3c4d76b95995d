{#- One of four tables maintained by overlapping jobs at once (tests/integration/test_leases.py):
    an append per run, so a run never conflicts with a compaction; with lease_post_hook its
    post-hook maintain() forces compaction and snapshot expiry. Only built
    with --vars '{lease_scenario: true}'. -#}
{{ config(
    enabled=var('lease_scenario', false),
    materialized='incremental',
    incremental_strategy='append',
    partition_by=['day'],
    post_hook="{% if var('lease_post_hook', false) %}{{ dbt_iceberg_maint.maintain(operations=['rewrite_data_files', 'expire_snapshots'], force=true) }}{% endif %}",
    meta={'iceberg_maint': {'expire_snapshots': {'older_than_hours': 0, 'retain_last': 1}}},
) }}

select cast(id as bigint) as id, date_add(date'2026-01-01', cast(id % 3 as int)) as day
from range(30)
