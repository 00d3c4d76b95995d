{#- An Iceberg table in the same schema as hive_events and the Hive source table (two-part names
    in Spark's session catalog), an append per batch: maintained. Only built with
    --vars '{hive_scenario: true}'. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(enabled=var('hive_scenario', false), materialized='incremental', incremental_strategy='append') }}

select event_id, user_id, amount, {{ seed_batch }} as loaded_batch from {{ ref('raw_events') }}
where batch = {{ seed_batch }}
