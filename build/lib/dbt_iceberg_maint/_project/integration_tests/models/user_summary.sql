{#- Rebuilt in full on every run (table materialization). -#}
{{ config(materialized='table') }}

select
    users.user_id,
    users.country,
    count(events.event_id) as event_count,
    coalesce(sum(events.amount), 0) as total_amount
from {{ ref('raw_users') }} as users
left join {{ ref('events') }} as events
    on events.user_id = users.user_id
group by users.user_id, users.country
