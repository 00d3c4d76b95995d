{#- The rows of the batch a dbt writer run loads (lab/torture_workers.py sets the variable before
    each run); none when it is unset (e.g. `dbt parse`). -#}
{% macro batch_sql() %}
  {{ return(env_var('TORTURE_BATCH_SQL',
                    "select cast(0 as bigint) as id, cast(0 as bigint) as batch_id, 'none' as payload from range(0)")) }}
{% endmacro %}
