{#- A typical staging view over the seed (tests/integration/test_embedded_views.py): built with
    `create or replace view` on every run, which the embedded catalog supports and a Hadoop
    catalog does not. Only built with --vars '{views_scenario: true}'. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(enabled=var('views_scenario', false), materialized='view') }}

select event_id, user_id, lower(event_type) as event_type, event_ts, cast(event_ts as date) as event_date,
       amount, batch
from {{ ref('raw_events') }}
where batch <= {{ seed_batch }}
