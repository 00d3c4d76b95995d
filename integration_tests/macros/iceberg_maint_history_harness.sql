{#- Test harness of the history macros (tests/unit/test_history_macros.py renders it without
    Spark): each case logs `ICEBERG_MAINT_CASE {"id": ..., "value": ...}`. -#}
{% macro iceberg_maint_history_cases(cases) %}
  {%- for case in cases -%}
    {%- set kwargs = case.get('kwargs') or {} -%}
    {%- set value = none -%}
    {%- if case.kind == 'settings' -%}
      {%- set value = dbt_iceberg_maint._iceberg_maint_history_settings() -%}
    {%- elif case.kind == 'create' -%}
      {%- set value = dbt_iceberg_maint._iceberg_maint_history_create_sql(kwargs.relation) -%}
    {%- elif case.kind == 'row' -%}
      {#- A writer as a path opens it (disabled outside execution: no statement), and the row and
          INSERT of one step result. -#}
      {%- set history = dbt_iceberg_maint._iceberg_maint_history_open(kwargs.path) -%}
      {%- set at = modules.datetime.datetime(2026, 11, 27, 9, 30, 0, 125000, modules.pytz.utc) -%}
      {%- set row = dbt_iceberg_maint._iceberg_maint_history_row(history, kwargs.record, at,
            at + modules.datetime.timedelta(seconds=2), kwargs.get('before'), kwargs.get('after'),
            kwargs.get('holder'), kwargs.get('node')) -%}
      {%- set value = {'row': dbt_iceberg_maint._iceberg_maint_json_safe(row),
            'insert': dbt_iceberg_maint._iceberg_maint_history_insert_sql(history.relation, [row, row]),
            'enabled': history.enabled, 'columns': dbt_iceberg_maint._iceberg_maint_history_columns()} -%}
    {%- elif case.kind == 'execute' -%}
      {#- The step loop every path runs: what it returns, and (the test checks) what it sends. -#}
      {%- set value = dbt_iceberg_maint._iceberg_maint_execute_steps(kwargs.steps, kwargs.dry_run, progress=false,
            path='maintain', defer_history=kwargs.get('defer_history', false)) -%}
    {%- elif case.kind == 'given' -%}
      {#- Rows handed back (claim_leases' history_rows): checked, converted, and their INSERT. -#}
      {%- set given = dbt_iceberg_maint._iceberg_maint_history_rows_given('claim_leases', kwargs.rows) -%}
      {%- set value = {'errors': given.errors, 'insert': dbt_iceberg_maint._iceberg_maint_history_insert_sql(
            'analytics.iceberg_maint_history', given.rows) if given.rows else none} -%}
    {%- elif case.kind == 'relation' -%}
      {%- set value = dbt_iceberg_maint.history_relation() -%}
    {%- elif case.kind == 'streak_kinds' -%}
      {%- set value = dbt_iceberg_maint._iceberg_maint_streak_kinds() -%}
    {%- endif -%}
    {%- do log('ICEBERG_MAINT_CASE ' ~ tojson({'id': case.id, 'value': value}), info=true) -%}
  {%- endfor -%}
{% endmacro %}
