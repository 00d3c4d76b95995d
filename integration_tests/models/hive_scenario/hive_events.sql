{#- A Hive (parquet) table beside Iceberg ones in Spark's session catalog on a Hive Metastore
    (tests/thrift/test_thrift_hive_metastore.py), appended to per batch, with the maintain() post-hook every model of the
    folder has: it must leave this table alone (the reason at debug level) and never fail the run. Only built with
    --vars '{hive_scenario: true}'. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(enabled=var('hive_scenario', false), materialized='incremental', incremental_strategy='append',
          file_format='parquet') }}

select event_id, user_id, amount from {{ ref('raw_events') }} where batch = {{ seed_batch }}
