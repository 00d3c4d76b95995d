{#- Test harness (tests/unit/test_table_snapshots_sql.py): render get_table_snapshots_sql cases
    without touching Spark; each logs `ICEBERG_MAINT_SNAPSHOT_SQL {"id": ..., "sql": ...}`. -#}
{% macro iceberg_maint_render_snapshot_sql(cases) %}
  {%- for case in cases -%}
    {%- set sql = dbt_iceberg_maint.get_table_snapshots_sql(case.relation) -%}
    {%- do log('ICEBERG_MAINT_SNAPSHOT_SQL ' ~ tojson({'id': case.id, 'sql': sql}), info=true) -%}
  {%- endfor -%}
{% endmacro %}
