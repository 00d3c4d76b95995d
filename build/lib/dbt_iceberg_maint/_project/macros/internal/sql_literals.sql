{#- Spark SQL literals for procedure arguments. Spark string literals escape with a backslash,
    so backslashes are doubled first, then quotes are escaped. -#}

{% macro _iceberg_maint_string_literal(value) -%}
  {{ return("'" ~ (value | string).replace('\\', '\\\\').replace("'", "\\'") ~ "'") }}
{%- endmacro %}


{% macro _iceberg_maint_boolean_literal(value) -%}
  {{ return('true' if value else 'false') }}
{%- endmacro %}


{#- map('k1', 'v1', 'k2', 'v2'): keys sorted so the SQL is stable. -#}
{% macro _iceberg_maint_map_literal(mapping) -%}
  {%- set items = [] -%}
  {%- for key in mapping | sort -%}
    {%- set value = mapping[key] -%}
    {%- set text = (('true' if value else 'false') if value is boolean else value) -%}
    {%- do items.append(dbt_iceberg_maint._iceberg_maint_string_literal(key) ~ ', ' ~ dbt_iceberg_maint._iceberg_maint_string_literal(text)) -%}
  {%- endfor -%}
  {{ return('map(' ~ items | join(', ') ~ ')') }}
{%- endmacro %}


{#- TIMESTAMP 'YYYY-MM-DD HH:MM:SSZ', `hours` before now, in UTC. Iceberg's CALL accepts only
    constants (an expression such as current_timestamp() - interval 72 hours fails to parse),
    so the instant is computed here; the Z suffix makes it independent of the session zone. -#}
{% macro _iceberg_maint_timestamp_hours_ago(hours) -%}
  {%- set now = modules.datetime.datetime.now(modules.pytz.utc) -%}
  {%- set instant = now - modules.datetime.timedelta(hours=hours) -%}
  {{ return("TIMESTAMP '" ~ instant.strftime('%Y-%m-%d %H:%M:%S') ~ "Z'") }}
{%- endmacro %}


{#- CALL <namespace>.<procedure>(name => value, ...) from an ordered list of [name, literal]. -#}
{% macro _iceberg_maint_call_sql(relation, procedure, arguments) -%}
  {%- set rendered = [] -%}
  {%- for name, literal in arguments -%}
    {%- do rendered.append(name ~ ' => ' ~ literal) -%}
  {%- endfor -%}
  {{ return('CALL ' ~ dbt_iceberg_maint._iceberg_maint_procedure_namespace(relation) ~ '.' ~ procedure ~ '(' ~ rendered | join(', ') ~ ')') }}
{%- endmacro %}
