{#- A table the iceberg_healthy generic test checks (tests/integration/test_healthy_test.py): an
    append per batch, so small files, snapshots and manifests pile up until maintenance runs.
    Only built with --vars '{health_scenario: true}'. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(enabled=var('health_scenario', false), materialized='incremental', incremental_strategy='append') }}

select /*+ COALESCE(1) */ cast(id + {{ seed_batch }} * 1000 as bigint) as id, cast({{ seed_batch }} as int) as batch
from range(20)
