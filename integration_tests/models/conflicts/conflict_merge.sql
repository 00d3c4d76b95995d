{#- An idempotent MERGE (unique_key) that loses to a concurrent compaction
    (tests/integration/test_conflict_runner.py). Only built with --vars '{conflict_scenario: true}'.
    The source calls the Python UDF `iceberg_maint_conflict_gate(key, id)`, which the test
    registers on the session: once armed, it holds the MERGE between planning and commit until
    the test's compaction (in its own Spark session) has committed. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    enabled=var('conflict_scenario', false),
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='event_id',
    partition_by=['days(event_ts)'],
) }}

select event_id, user_id, event_type, event_ts, amount, batch as loaded_batch
from {{ ref('raw_events') }}
where iceberg_maint_conflict_gate('{{ this.identifier }}', event_id)
{% if is_incremental() %}
    and batch = {{ seed_batch }}
{% else %}
    and batch <= {{ seed_batch }}
{% endif %}
