{#- Test harness (tests/unit/test_left_behind_sql.py): the pure parts of the left-behind sweep
    (macros/operations/left_behind_locations.sql) rendered without Spark, one
    `ICEBERG_MAINT_CASE {"id": ..., "value": ..., "errors": [...]}` line per case. -#}
{% macro iceberg_maint_left_behind_cases(cases) %}
  {%- for case in cases -%}
    {%- set kwargs = case.get('kwargs') or {} -%}
    {%- set outcome = {'id': case.id} -%}
    {%- if case.kind == 'find_sql' -%}
      {%- do outcome.update({'value': dbt_iceberg_maint.get_find_left_behind_locations_sql(**kwargs)}) -%}
    {%- elif case.kind == 'call_sql' -%}
      {%- do outcome.update({'value': dbt_iceberg_maint._iceberg_maint_left_behind_call_sql(kwargs.carrier,
            kwargs.location, kwargs.older_than_hours, kwargs.dry_run)}) -%}
    {%- elif case.kind == 'errors' -%}
      {%- do outcome.update({'errors': dbt_iceberg_maint._iceberg_maint_left_behind_errors(**kwargs)}) -%}
    {%- elif case.kind == 'excluded' -%}
      {%- do outcome.update({'value': dbt_iceberg_maint._iceberg_maint_left_behind_excluded(kwargs.root,
            kwargs.referenced)}) -%}
    {%- elif case.kind == 'selection' -%}
      {%- set selection = dbt_iceberg_maint._iceberg_maint_left_behind_selection('remove_left_behind_locations',
            kwargs.scan, kwargs.get('locations'), 72) -%}
      {%- do outcome.update({'value': {'remove': selection.remove | map(attribute='location') | list,
            'skip': selection.skip | map(attribute='location') | list}, 'errors': selection.errors}) -%}
    {%- endif -%}
    {%- do log('ICEBERG_MAINT_CASE ' ~ tojson(outcome), info=true) -%}
  {%- endfor -%}
{% endmacro %}
