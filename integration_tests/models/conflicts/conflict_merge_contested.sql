{#- conflict_merge_unsafe's twin for the undecidable case of landed verification
    (tests/integration/test_conflict_runner.py): while the gate holds its MERGE, another session of
    the same Spark application appends to its table. The MERGE loses a real conflict, and the
    snapshot log shows a data snapshot of this application committed meanwhile: whose write it
    is cannot be told, so the runner refuses. Only built with --vars '{conflict_contested: true}'. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    enabled=var('conflict_contested', false),
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='event_id',
    partition_by=['days(event_ts)'],
    meta={'iceberg_maint': {'idempotent': false}},
) }}

select event_id, user_id, event_type, event_ts, amount, batch as loaded_batch
from {{ ref('raw_events') }}
where iceberg_maint_conflict_gate('{{ this.identifier }}', event_id)
{% if is_incremental() %}
    and batch = {{ seed_batch }}
{% else %}
    and batch <= {{ seed_batch }}
{% endif %}
