{#- Generic test `dbt_iceberg_maint.iceberg_maintenance_streak`: maintenance of a model's or a
    source's table went wrong in the last `runs_in_a_row` runs in a row, read from the
    maintenance history (docs/history.md). One row per operation whose latest runs were all bad
    (columns table, operation, runs_in_a_row, last_status, last_reason, last_run_id, last_at).

    A run is one run_id of the history. For an operation it is bad when every row of that
    operation in the run is `failed` or a skip of a kind in `kinds` (`lease`: another job held
    the table's lease, or the run lost it; `cost_gate`: the policy's cost gate skipped it); a
    run that also succeeded or decided the operation was not due (a replay that finished it)
    is good and ends the streak. Runs that did not touch the operation do not count either way.
    Only the last `lookback_days` of history are read (the table is partitioned by day). -#}
{% test iceberg_maintenance_streak(model, runs_in_a_row=3, kinds=['failed', 'lease', 'cost_gate'],
    lookback_days=30) %}
  {%- if execute -%}
    {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(
          dbt_iceberg_maint._iceberg_maint_streak_errors(runs_in_a_row, kinds, lookback_days, kwargs)) -%}
  {%- endif -%}
  {{ return(adapter.dispatch('test_iceberg_maintenance_streak', 'dbt_iceberg_maint')(model, runs_in_a_row, kinds,
      lookback_days)) }}
{% endtest %}

{% macro default__test_iceberg_maintenance_streak(model, runs_in_a_row, kinds, lookback_days) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.iceberg_maintenance_streak is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__test_iceberg_maintenance_streak(model, runs_in_a_row, kinds, lookback_days) %}
  {%- if not execute -%}{{ return('select 1 as placeholder where false') }}{%- endif -%}
  {%- if model is string and model.strip().startswith('(') -%}
    {{ exceptions.raise_compiler_error("iceberg_maintenance_streak: the `where` config does not apply; the test"
        ~ " reads the maintenance history of the whole table (got the subquery " ~ model ~ ")") }}
  {%- endif -%}
  {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(model, 'model') -%}
  {%- set history = dbt_iceberg_maint._iceberg_maint_history_settings() -%}
  {%- if not dbt_iceberg_maint._iceberg_maint_table_exists(history.relation) -%}
    {#- No history to read is a failure, not a pass: the test would otherwise never fire. -#}
    {{ return(dbt_iceberg_maint._iceberg_maint_streak_missing_sql(table, history.relation)) }}
  {%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_streak_sql(history.relation, table, runs_in_a_row, kinds,
      lookback_days)) }}
{% endmacro %}


{#- The skip reasons of each kind, by their first words (as the maintenance paths write them:
    macros/internal/lease.sql, macros/health/cost_gate.sql). -#}
{% macro _iceberg_maint_streak_kinds() %}
  {{ return({'failed': [], 'lease': ['lease held by ', 'lease lost: '], 'cost_gate': ['cost gate: ']}) }}
{% endmacro %}


{#- Pure: the problems of the test's arguments (unknown: any other keywords), each naming the
    argument, the value and what is allowed. -#}
{% macro _iceberg_maint_streak_errors(runs_in_a_row, kinds, lookback_days, unknown={}) %}
  {%- set owner = 'iceberg_maintenance_streak' -%}
  {%- set allowed = dbt_iceberg_maint._iceberg_maint_streak_kinds() -%}
  {%- set errors = [] -%}
  {%- for name in unknown | sort -%}
    {%- do errors.append(owner ~ ": unknown argument `" ~ name ~ "` (value " ~ tojson(unknown[name] | string)
          ~ "); allowed: runs_in_a_row, kinds, lookback_days") -%}
  {%- endfor -%}
  {%- if runs_in_a_row is boolean or runs_in_a_row is not integer or runs_in_a_row < 1 -%}
    {%- do errors.append(owner ~ ": argument `runs_in_a_row` is " ~ tojson(runs_in_a_row)
          ~ "; expected a whole number >= 1") -%}
  {%- endif -%}
  {%- if kinds is string or kinds is mapping or kinds is not iterable or kinds | length == 0
        or kinds | reject('in', allowed.keys() | list) | list -%}
    {%- do errors.append(owner ~ ": argument `kinds` is " ~ tojson(kinds | list if kinds is iterable
          and kinds is not string and kinds is not mapping else kinds)
          ~ "; expected a non-empty list of " ~ allowed.keys() | join(', ')) -%}
  {%- endif -%}
  {%- if lookback_days is boolean or lookback_days is not number or lookback_days <= 0 -%}
    {%- do errors.append(owner ~ ": argument `lookback_days` is " ~ tojson(lookback_days)
          ~ "; expected a number of days > 0") -%}
  {%- endif -%}
  {{ return(errors) }}
{% endmacro %}


{#- Pure: the test's SELECT over the history table `relation` for `table`. -#}
{% macro _iceberg_maint_streak_sql(relation, table, runs_in_a_row, kinds, lookback_days) %}
  {%- set literal = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {%- set prefixes = dbt_iceberg_maint._iceberg_maint_streak_kinds() -%}
  {%- set bad = [] -%}
  {%- if 'failed' in kinds -%}{%- do bad.append("status = 'failed'") -%}{%- endif -%}
  {%- for kind in kinds if prefixes[kind] -%}
    {%- for prefix in prefixes[kind] -%}
      {%- do bad.append("(status = 'skipped' and reason like " ~ literal(prefix ~ '%') ~ ")") -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- set minutes = (lookback_days * 1440) | round | int -%}
  {{ return("with steps as (
  select run_id, operation, started_at, status, reason,
         case when " ~ bad | join(' or ') ~ " then 1 else 0 end as bad
  from " ~ relation ~ "
  where lower(table_name) = " ~ literal(table | lower) ~ "
    and started_at >= current_timestamp() - interval " ~ minutes ~ " minutes
),
runs as (
  select operation, run_id, max(started_at) as at, min(bad) as bad,
         max_by(status, started_at) as last_status, max_by(reason, started_at) as last_reason
  from steps group by operation, run_id
),
ranked as (
  select *, row_number() over (partition by operation order by at desc, run_id desc) as recency from runs
),
streaks as (
  select operation, coalesce(min(case when bad = 0 then recency end), max(recency) + 1) - 1 as runs_in_a_row
  from ranked group by operation
)
select " ~ literal(table) ~ " as `table`, s.operation, s.runs_in_a_row, r.last_status, r.last_reason,
       r.run_id as last_run_id, r.at as last_at
from streaks s join ranked r on r.operation = s.operation and r.recency = 1
where s.runs_in_a_row >= " ~ runs_in_a_row) }}
{% endmacro %}


{#- Pure: one failing row when there is no history table to read. -#}
{% macro _iceberg_maint_streak_missing_sql(table, relation) %}
  {%- set literal = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {{ return('select ' ~ literal(table) ~ ' as `table`, cast(null as string) as operation, cast(0 as int) as runs_in_a_row, '
      ~ "'missing' as last_status, " ~ literal('no maintenance history: table ' ~ relation ~ ' does not exist'
      ~ ' (no maintenance path has written it yet, or var dbt_iceberg_maint_history_enabled is false)')
      ~ ' as last_reason, cast(null as string) as last_run_id, cast(null as timestamp) as last_at') }}
{% endmacro %}
