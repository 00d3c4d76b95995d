{#- One writer round: batch LAB_BATCH inserts LAB_ROWS new events and rewrites (updates) the
    previous batch's events. Every column is a function of event_id, so a re-run or an update
    writes identical values: the MERGE is idempotent. Batch b lands in days
    base + b // LAB_ROUNDS_PER_DAY (+1 for odd ids): the hot window moves forward over time and
    the days it leaves behind go cold. -#}
{% macro lab_batch() %}
  {%- set batch = env_var('LAB_BATCH', '0') | int -%}
  {%- set rows = env_var('LAB_ROWS', '200') | int -%}
  {%- set per_day = env_var('LAB_ROUNDS_PER_DAY', '2') | int -%}
  {%- set first = [batch - 1, 0] | max * rows -%}
  select
    id as event_id,
    date_add(date '{{ env_var("LAB_BASE_DAY", "2024-01-01") }}',
             cast(floor(id / {{ rows }} / {{ per_day }}) as int) + cast(id % 2 as int)) as day,
    cast(floor(id / {{ rows }}) as bigint) as batch_id,
    cast({{ batch }} as bigint) as touched_by,
    sha2(cast(id as string), 256) as payload
  from range({{ first }}, {{ (batch + 1) * rows }}, 1, 4)
  {%- if env_var('LAB_GATE_DIR', '') %}
  where id <> {{ batch * rows }} or iceberg_maint_thrift_gate('{{ env_var("LAB_GATE_DIR") }}', id, 900L)
  {%- endif %}
{% endmacro %}

{#- The maintenance policy of a variant's table: `naive` compacts the whole table with Iceberg's
    defaults; `policy` lets the package find the cold days itself (`cold_partitions_hours`:
    partitions no commit touched for LAB_COLD_HOURS) and compacts them once a day has >= 2 small
    files. -#}
{% macro lab_policy(kind) %}
  {%- if kind == 'naive' -%}
    {{ return({'compaction': {'min_input_files': 5, 'partial_progress': false}}) }}
  {%- endif -%}
  {{ return({'compaction': {'min_input_files': 2, 'partial_progress': true,
      'cold_partitions_hours': env_var('LAB_COLD_HOURS', '1') | float}}) }}
{% endmacro %}

{#- The gate (lab/gate.py): with LAB_GATE_DIR set, the batch's first new row passes a Hive UDF
    that holds the MERGE, planned against its snapshot, until the harness opens the gate. -#}
{% macro lab_gate_hook() %}
  {%- if env_var('LAB_GATE_DIR', '') -%}
    create or replace temporary function iceberg_maint_thrift_gate as 'IcebergMaintThriftGate'
    using jar '{{ env_var("LAB_GATE_JAR") }}'
  {%- endif -%}
{% endmacro %}

{#- The append writer's batch: the rows lab/ledger.py's `batch_rows_sql` describes (ids unique
    across batches, a payload naming batch and row), so the ledger can check the table. -#}
{% macro lab_append_batch() %}
  {%- set batch = env_var('LAB_BATCH', '0') | int -%}
  {%- set rows = env_var('LAB_ROWS', '200') | int -%}
  select cast({{ batch }} as bigint) * 1000000 + id as id, cast({{ batch }} as bigint) as batch_id,
         concat('b{{ batch }}-r', cast(id as string)) as payload
  from range({{ rows }})
{% endmacro %}
