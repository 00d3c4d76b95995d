{#- Iceberg `compute_table_stats`: compute column statistics (NDV theta sketches) of a snapshot
    and attach them to the table as a Puffin statistics file. Commits table metadata, never a
    snapshot: the table's data and current snapshot stay as they are. -#}

{% macro get_compute_table_stats_sql(relation=none, snapshot_id=none, columns=none) %}
  {{ return(adapter.dispatch('get_compute_table_stats_sql', 'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, snapshot_id=snapshot_id, columns=columns)) }}
{% endmacro %}

{% macro default__get_compute_table_stats_sql(relation, snapshot_id, columns) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.get_compute_table_stats_sql is not implemented for adapter '"
        ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__get_compute_table_stats_sql(relation, snapshot_id, columns) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_compute_table_stats_errors(
        snapshot_id, columns)) -%}
  {%- set arguments = [['table',
        dbt_iceberg_maint._iceberg_maint_string_literal(dbt_iceberg_maint._iceberg_maint_table_name(relation))]] -%}
  {%- if snapshot_id is not none -%}{%- do arguments.append(['snapshot_id', snapshot_id | string]) -%}{%- endif -%}
  {%- if columns is not none -%}
    {%- set literals = [] -%}
    {%- for column in columns -%}{%- do literals.append(dbt_iceberg_maint._iceberg_maint_string_literal(column)) -%}{%- endfor -%}
    {%- do arguments.append(['columns', 'array(' ~ literals | join(', ') ~ ')']) -%}
  {%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_call_sql(relation, 'compute_table_stats', arguments)) }}
{% endmacro %}


{% macro _iceberg_maint_compute_table_stats_errors(snapshot_id=none, columns=none) %}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_check_snapshot_id('compute_table_stats', snapshot_id) -%}
  {%- if columns is none -%}{{ return(errors) }}{%- endif -%}
  {%- if columns is string or columns is mapping or columns is not iterable or columns | length == 0 -%}
    {%- do errors.append("compute_table_stats: argument `columns` is " ~ columns
          ~ "; expected a non-empty list of column names, e.g. ['id', 'event_date']") -%}
    {{ return(errors) }}
  {%- endif -%}
  {%- for column in columns -%}
    {%- if column is not string or not column.strip() or column != column.strip() or '\n' in column -%}
      {%- do errors.append("compute_table_stats: argument `columns` has entry " ~ column
            ~ "; expected a column name, non-empty, without surrounding whitespace or line breaks") -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(errors) }}
{% endmacro %}

{#- A snapshot id argument: a whole number >= 0 (Iceberg refuses one the table does not have). -#}
{% macro _iceberg_maint_check_snapshot_id(procedure, snapshot_id) %}
  {%- if snapshot_id is not none and (snapshot_id is boolean or snapshot_id is not integer or snapshot_id < 0) -%}
    {{ return([procedure ~ ": argument `snapshot_id` is " ~ snapshot_id ~ "; expected a snapshot id, a whole number >= 0"]) }}
  {%- endif -%}
  {{ return([]) }}
{% endmacro %}


{% macro compute_table_stats(relation=none, snapshot_id=none, columns=none, dry_run=false) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_outside_node(adapter.dispatch('compute_table_stats', 'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, snapshot_id=snapshot_id, columns=columns,
          dry_run=dry_run))) }}
{% endmacro %}

{% macro default__compute_table_stats(relation, snapshot_id, columns, dry_run) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.compute_table_stats is not implemented for adapter '"
        ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__compute_table_stats(relation, snapshot_id, columns, dry_run) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_check_boolean(
        'compute_table_stats', 'dry_run', dry_run)) -%}
  {%- set sql = dbt_iceberg_maint.get_compute_table_stats_sql(relation, snapshot_id, columns) -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_run_procedure(relation, 'compute_table_stats', sql, dry_run)) }}
{% endmacro %}


{#- ---- As a maintenance step (get_maintenance_plan) ---------------------------------------- -#}

{#- Not a default operation (request it: operations: [..., compute_table_stats]): it reads every
    row of the table. interval_hours 24: at most one full read a day per table. -#}
{% macro _iceberg_maint_compute_table_stats_defaults() %}
  {{ return({'enabled': true, 'columns': none, 'interval_hours': 24}) }}
{% endmacro %}

{% macro _iceberg_maint_compute_table_stats_policy_errors(section) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_compute_table_stats_errors(columns=section.columns)) }}
{% endmacro %}

{% macro _iceberg_maint_compute_table_stats_due(section, health) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_statistics_due(health, 'statistics_snapshot_id', 'table statistics')) }}
{% endmacro %}

{% macro _iceberg_maint_compute_table_stats_planned_sql(relation, section, context={}) %}
  {{ return({'sql': dbt_iceberg_maint.get_compute_table_stats_sql(relation=relation, columns=section.columns),
      'reason': none}) }}
{% endmacro %}


{#- Pure: whether statistics bound to a snapshot (compute_table_stats, compute_partition_stats)
    are due: when a rewrite planned before them in this plan commits a new snapshot, or when the
    table's current snapshot (health.snapshot_id) is not the one its newest known statistics are
    for (health[key]: the macros know it from the table property the plan records after a
    successful run, the Python planner from the table metadata). A table without snapshots has
    nothing to compute. Twin: policy/operations.py `statistics_due`. -#}
{% macro _iceberg_maint_statistics_due(health, key, what) %}
  {%- set planned = health.get('rewrites_planned') or [] -%}
  {%- set current = health.get('snapshot_id') -%}
  {%- set recorded = health.get(key) -%}
  {%- if planned -%}
    {{ return({'due': true, 'reason': 'the ' ~ planned | join(' and ') ~ ' commits planned first leave the table '
        ~ 'without ' ~ what ~ ' for its new snapshot'}) }}
  {%- elif current is none -%}
    {{ return({'due': false, 'reason': 'the table has no snapshot: no ' ~ what ~ ' to compute'}) }}
  {%- elif recorded is not none and recorded | string == current | string -%}
    {{ return({'due': false, 'reason': what ~ ' exist for the current snapshot ' ~ current}) }}
  {%- endif -%}
  {{ return({'due': true, 'reason': 'no ' ~ what ~ ' for the current snapshot ' ~ current
      ~ ((' (the last computed are for snapshot ' ~ recorded ~ ')') if recorded is not none else '')}) }}
{% endmacro %}
