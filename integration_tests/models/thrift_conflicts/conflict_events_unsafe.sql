{#- conflict_events declared not idempotent (as for a non-deterministic source): over thrift, the
    runner re-runs it only after landed verification, read through the dbt connection, proved
    that its MERGE did not land (tests/thrift/test_thrift_conflict.py). The rest as conflict_events:
    A MERGE that loses to a compaction over a Spark Thrift Server (tests/thrift/test_thrift_conflict.py).
    Only built with --vars '{thrift_conflict_scenario: true}'. The server runs no Python (as in
    dbt Cloud) and MERGE refuses non-deterministic sources (so no reflect/sleep): the source is
    slowed by deterministic pure-SQL work on one row (`conflict_gate_id`), about
    `conflict_work` x 10,000 lambda steps, which holds the MERGE between planning (the target
    snapshot it read) and its commit. -#}
{{ config(
    enabled=var('thrift_conflict_scenario', false),
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='event_id',
    partition_by=['days(event_ts)'],
    meta={'iceberg_maint': {'idempotent': false}},
) }}

{%- set gate_id = var('conflict_gate_id', -1) | int -%}
{%- set work = var('conflict_work', 0) | int -%}

select event_id, user_id, event_type, event_ts, amount, batch as loaded_batch
from {{ ref('raw_events') }}
where batch = {{ var('batch') }}
    and (
        event_id <> {{ gate_id }}
        {#- `+ cast(event_id * 0 as int)` keeps the optimizer from folding the work away. #}
        or aggregate(
            sequence(1, {{ work }} + cast(event_id * 0 as int)), 0L,
            (total, i) -> total + aggregate(sequence(1, 10000 + cast(event_id * 0 as int)), 0L, (s, j) -> s + j)
        ) >= 0
    )
