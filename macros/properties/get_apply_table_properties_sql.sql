{#- Pure: the ALTER TABLE statement that sets the declared keys whose current value differs,
    or '' when nothing differs. `declared` and `current` map property keys to string values. -#}
{% macro get_apply_table_properties_sql(relation, declared, current) %}
  {{ return(adapter.dispatch('get_apply_table_properties_sql', 'dbt_iceberg_maint')(
      relation=relation, declared=declared, current=current)) }}
{% endmacro %}

{% macro default__get_apply_table_properties_sql(relation, declared, current) %}
  {{ exceptions.raise_compiler_error(
        "dbt_iceberg_maint.get_apply_table_properties_sql is not implemented for adapter '" ~ adapter.type()
        ~ "'; it supports spark") }}
{% endmacro %}

{% macro spark__get_apply_table_properties_sql(relation, declared, current) %}
  {%- set changes = dbt_iceberg_maint.table_property_changes(declared, current) -%}
  {%- if changes | length == 0 -%}{{ return('') }}{%- endif -%}
  {%- set assignments = [] -%}
  {%- for key in changes | sort -%}
    {%- do assignments.append(dbt_iceberg_maint._iceberg_maint_string_literal(key) ~ ' = '
          ~ dbt_iceberg_maint._iceberg_maint_string_literal(changes[key]['to'])) -%}
  {%- endfor -%}
  {{ return('alter table ' ~ dbt_iceberg_maint._iceberg_maint_qualified_name(relation) ~ ' set tblproperties ('
        ~ assignments | join(', ') ~ ')') }}
{% endmacro %}

{#- {key: {'from': current value or none, 'to': declared value}} for every differing key. -#}
{% macro table_property_changes(declared, current) %}
  {%- set changes = {} -%}
  {%- for key, value in declared.items() -%}
    {%- if current.get(key) is none or (current.get(key) | string) != (value | string) -%}
      {%- do changes.update({key: {'from': current.get(key), 'to': value | string}}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(changes) }}
{% endmacro %}
