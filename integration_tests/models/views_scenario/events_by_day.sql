{#- An incremental MERGE on a date partition over the staging view
    (tests/integration/test_embedded_views.py): the newest version of each event, the batch the
    `batch` var names merged in on later runs. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    enabled=var('views_scenario', false),
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='event_id',
    partition_by=['event_date'],
) }}

with latest as (
    select *, row_number() over (partition by event_id order by batch desc) as version_rank
    from {{ ref('stg_events') }}
    {% if is_incremental() %}where batch = {{ seed_batch }}{% endif %}
)

select event_id, user_id, event_type, event_date, amount, batch as loaded_batch
from latest
where version_rank = 1
