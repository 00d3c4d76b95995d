{#- The maintenance history table's name, '[catalog.]schema.table', from the vars
    dbt_iceberg_maint_history_schema (default the target's schema) and
    dbt_iceberg_maint_history_table (default iceberg_maint_history): for models, tests and
    dashboards that read it, e.g. `select * from {{ dbt_iceberg_maint.history_relation() }}`.
    Columns and vars: docs/history.md. -#}

{% macro history_relation() %}
  {{ return(adapter.dispatch('history_relation', 'dbt_iceberg_maint')()) }}
{% endmacro %}

{% macro default__history_relation() %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.history_relation is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__history_relation() %}
  {{ return(dbt_iceberg_maint._iceberg_maint_history_settings().relation) }}
{% endmacro %}
