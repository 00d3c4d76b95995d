{#- A table over the staging view (tests/integration/test_embedded_views.py). -#}
{{ config(enabled=var('views_scenario', false), materialized='table') }}

select event_date, count(*) as events, sum(amount) as amount
from {{ ref('stg_events') }}
group by event_date
