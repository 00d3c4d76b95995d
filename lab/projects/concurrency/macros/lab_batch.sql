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
{% endmacro %}

{#- The maintenance policy of a variant's table: `naive` compacts the whole table with Iceberg's
    defaults; `policy` compacts only the cold days (before LAB_COLD_BEFORE, the start of the
    writers' hot window) once a day has >= 2 small files. -#}
{% macro lab_policy(kind) %}
  {%- if kind == 'naive' -%}
    {{ return({'compaction': {'min_input_files': 5, 'partial_progress': false}}) }}
  {%- endif -%}
  {{ return({'compaction': {'min_input_files': 2, 'partial_progress': true,
      'where': "day < date '" ~ env_var('LAB_COLD_BEFORE', '1970-01-01') ~ "'"}}) }}
{% endmacro %}
