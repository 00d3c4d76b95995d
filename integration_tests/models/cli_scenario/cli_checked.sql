{#- A model whose data test fails (tests/integration/test_cli_end_to_end.py): the runner reports
    it and never re-runs it. Only built with --vars '{cli_scenario: true}'. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(enabled=var('cli_scenario', false), materialized='table') }}

select event_id, event_type from {{ ref('raw_events') }} where batch <= {{ seed_batch }}
