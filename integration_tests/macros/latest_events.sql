{#- The scenario models' source: the newest version of every event up to the seed batch (var
    `batch`, else DBT_ICEBERG_MAINT_BATCH).
    gated: every row passes the conflict gate UDF (dbt_iceberg_maint/runtime/_conflict_gate.py), which
    can hold the model until a test's concurrent commit has landed. -#}
{% macro latest_events(gated=false) %}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
with latest as (
    select *, row_number() over (partition by event_id order by batch desc) as version_rank
    from {{ ref('raw_events') }}
    where batch <= {{ seed_batch }}
)

select event_id, user_id, event_type, event_ts, amount, {{ seed_batch }} as loaded_batch
from latest
where version_rank = 1
{%- if gated %} and iceberg_maint_conflict_gate('{{ this.identifier }}', event_id){% endif %}
{% endmacro %}
