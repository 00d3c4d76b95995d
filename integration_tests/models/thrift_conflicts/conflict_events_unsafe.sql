{#- conflict_events declared not idempotent (as for a non-deterministic source): over thrift, the
    runner re-runs it only after landed verification, read through the dbt connection, proved
    that its MERGE did not land (tests/thrift/test_thrift_conflict.py). The rest as conflict_events:
    A MERGE that loses to a compaction over a Spark Thrift Server (tests/thrift/test_thrift_conflict.py).
    Only built with --vars '{thrift_conflict_scenario: true}'. With `conflict_gate_id`, the source
    row of that id passes the test's gate (tests/thrift/gate/IcebergMaintThriftGate.java, a Hive UDF
    the pre-hook registers from `thrift_gate_jar`), which holds the MERGE between planning (the
    target snapshot it read) and its commit until the test opens it. -#}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    enabled=var('thrift_conflict_scenario', false),
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='event_id',
    partition_by=['days(event_ts)'],
    pre_hook="{% if var('conflict_gate_id', -1) | int >= 0 %}create or replace temporary function iceberg_maint_thrift_gate as 'IcebergMaintThriftGate' using jar '{{ var('thrift_gate_jar') }}'{% endif %}",
    meta={'iceberg_maint': {'idempotent': false}},
) }}

{%- set gate_id = var('conflict_gate_id', -1) | int -%}

select event_id, user_id, event_type, event_ts, amount, batch as loaded_batch
from {{ ref('raw_events') }}
where batch = {{ seed_batch }}
{%- if gate_id >= 0 %}
    and (event_id <> {{ gate_id }} or iceberg_maint_thrift_gate('{{ var("thrift_gate_dir") }}', event_id, 600L))
{%- endif %}
