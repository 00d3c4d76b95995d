{#- Test harness (tests/integration/test_metadata*.py): for each case {relation, policy,
    operations}, log table_health's result line and maintain(dry_run=true)'s, in one dbt
    invocation, so that the metadata planner can be compared with the macros. -#}
{% macro iceberg_maint_metadata_cases(cases) %}
  {%- for case in cases -%}
    {%- do dbt_iceberg_maint.table_health(case.relation, none, true) -%}
    {%- do dbt_iceberg_maint.maintain(case.relation, case.get('operations'), true, false, case.get('policy')) -%}
  {%- endfor -%}
{% endmacro %}
