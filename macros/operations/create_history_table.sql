{#- `dbt run-operation dbt_iceberg_maint.create_history_table`: create the maintenance history
    table (docs/history.md) if missing, or check an existing one has its columns, before jobs
    that share a fresh schema start at one instant (a lost race to create a table fails a run on
    Iceberg's JDBC catalog on PostgreSQL, as for the lease logs: docs/leases.md). Nothing with
    history disabled. Logs one ICEBERG_MAINT_HISTORY line (rows 0; written false with the
    problem when the history cannot be written) and returns the table's name. -#}

{% macro create_history_table() %}
  {{ return(adapter.dispatch('create_history_table', 'dbt_iceberg_maint')()) }}
{% endmacro %}

{% macro default__create_history_table() %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.create_history_table is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__create_history_table() %}
  {%- set history = dbt_iceberg_maint._iceberg_maint_history_open('create_history_table') -%}
  {%- if not history.enabled -%}{{ return(none) }}{%- endif -%}
  {%- set ready = dbt_iceberg_maint._iceberg_maint_history_prepare(history) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('history', {'table': history.relation, 'path': history.path,
        'rows': 0, 'written': ready, 'problem': history.state.problem}) -%}
  {{ return(history.relation) }}
{% endmacro %}
