{#- Test helper (tests/unit/test_properties*.py, test_health*.py): call pure package macros
    with the given arguments and log each result as one `HP_CASE {json}` line, so many cases
    run in one dbt invocation. -#}
{% macro hp_test_render(cases) %}
  {%- for case in cases -%}
    {%- set result = dbt_iceberg_maint[case['macro']](**case.get('kwargs', {})) -%}
    {{ log('HP_CASE ' ~ tojson({'id': case['id'], 'result': result}), info=true) }}
  {%- endfor -%}
{% endmacro %}
