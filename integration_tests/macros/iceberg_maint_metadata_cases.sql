{#- Test harness (tests/integration/test_metadata*.py): for each case {relation, policy,
    operations, gates}, log table_health's result line and maintain(dry_run=true)'s, in one dbt
    invocation, so that the metadata planner can be compared with the macros; for each
    {operation, gate, cold_partitions_hours} of `gates`, an ICEBERG_MAINT_GATE line. -#}
{% macro iceberg_maint_metadata_cases(cases) %}
  {%- for case in cases -%}
    {%- do dbt_iceberg_maint.table_health(case.relation, none, true) -%}
    {%- do dbt_iceberg_maint.maintain(case.relation, case.get('operations'), true, false, case.get('policy')) -%}
    {%- for check in case.get('gates') or [] -%}
      {%- set reason = dbt_iceberg_maint.iceberg_maint_cost_gate_reason(case.relation, check.operation, check.gate, check.get('cold_partitions_hours')) -%}
      {%- do log('ICEBERG_MAINT_GATE ' ~ tojson({'table': case.relation, 'check': check, 'reason': reason}), info=true) -%}
    {%- endfor -%}
  {%- endfor -%}
{% endmacro %}
