{#- Test harness (tests/integration/test_metadata*.py): for each case {relation, policy,
    operations, gates}, log table_health's result line and maintain(dry_run=true)'s, in one dbt
    invocation, so that the metadata planner can be compared with the macros; for each
    {operation, gate, cold_partitions_hours} of `gates`, an ICEBERG_MAINT_GATE line; then one
    ICEBERG_MAINT_SUMMARIES line: every case's first tier read alone and read with the others in
    one statement (iceberg_maintenance's way), at one fixed as_of. -#}
{% macro iceberg_maint_metadata_cases(cases) %}
  {%- for case in cases -%}
    {%- do dbt_iceberg_maint.table_health(case.relation, none, true) -%}
    {%- do dbt_iceberg_maint.maintain(case.relation, case.get('operations'), true, false, case.get('policy')) -%}
    {%- for check in case.get('gates') or [] -%}
      {%- set reason = dbt_iceberg_maint.iceberg_maint_cost_gate_reason(case.relation, check.operation, check.gate, check.get('cold_partitions_hours')) -%}
      {%- do log('ICEBERG_MAINT_GATE ' ~ tojson({'table': case.relation, 'check': check, 'reason': reason}), info=true) -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- set as_of = '2030-01-01 00:00:00.000000' -%}
  {%- set requests = [] -%}
  {%- set single = [] -%}
  {%- for case in cases -%}
    {%- set properties = dbt_iceberg_maint._iceberg_maint_table_properties(case.relation) -%}
    {%- set current = properties.get('current-snapshot-id') or '' -%}
    {%- set lineage_of = [current | int] if current.isdigit() else [] -%}
    {%- do requests.append({'table': case.relation, 'properties': properties, 'as_of': as_of, 'table_bytes': true,
          'lineage_of': lineage_of}) -%}
    {%- do single.append(dbt_iceberg_maint._iceberg_maint_summary_figures(case.relation, as_of, table_bytes=true,
          properties=properties, lineage_of=lineage_of)) -%}
  {%- endfor -%}
  {%- do log('ICEBERG_MAINT_SUMMARIES ' ~ tojson({'single': single,
        'many': dbt_iceberg_maint._iceberg_maint_summary_figures_many(requests)}), info=true) -%}
{% endmacro %}
