{#- The seed batch the incremental models load: var `batch` when given, else the environment
    variable DBT_ICEBERG_MAINT_BATCH, else 1. dbt parses the whole project again whenever --vars
    change (about 3 s here), but only the files that read an environment variable when its value
    changes: the test suite advances batches through the environment. -#}
{% macro seed_batch() %}
  {%- set given = var('batch', none) -%}
  {{ return((given if given is not none else env_var('DBT_ICEBERG_MAINT_BATCH', '1')) | int) }}
{% endmacro %}
