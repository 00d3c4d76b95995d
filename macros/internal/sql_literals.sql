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
    {%- do items.append(dbt_iceberg_maint._iceberg_maint_string_literal(key) ~ ', '
          ~ dbt_iceberg_maint._iceberg_maint_string_literal(text)) -%}
  {%- endfor -%}
  {{ return('map(' ~ items | join(', ') ~ ')') }}
{%- endmacro %}


{#- TIMESTAMP 'YYYY-MM-DD HH:MM:SS[.ffffff]Z', `hours` before `reference` (a UTC datetime;
    default now). Iceberg's CALL accepts only constants (an expression such as
    current_timestamp() - interval 72 hours fails to parse), so the instant is computed here;
    the Z suffix makes it independent of the session zone. -#}
{% macro _iceberg_maint_timestamp_hours_ago(hours, reference=none) -%}
  {%- set now = reference if reference is not none else modules.datetime.datetime.now(modules.pytz.utc) -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_timestamp_literal((now - modules.datetime.timedelta(hours=hours)).replace(
        microsecond=0))) }}
{%- endmacro %}


{% macro _iceberg_maint_timestamp_literal(instant) -%}
  {%- set text = instant.strftime('%Y-%m-%d %H:%M:%S') ~ (instant.strftime('.%f') if instant.microsecond else '') -%}
  {{ return("TIMESTAMP '" ~ text ~ "Z'") }}
{%- endmacro %}


{#- {'value': a UTC datetime or none, 'errors': [...]} for an instant argument (as_of,
    older_than): 'YYYY-MM-DD HH:MM:SS[.ffffff]' or ISO 'YYYY-MM-DDTHH:MM:SS[.ffffff]', in UTC
    (an optional Z or +00:00 says so; other offsets are refused rather than guessed). -#}
{% macro _iceberg_maint_parse_instant(owner, argument, value) %}
  {%- if value is none -%}{{ return({'value': none, 'errors': []}) }}{%- endif -%}
  {%- set pattern = '(\\d{4}-\\d{2}-\\d{2})[ T](\\d{2}:\\d{2}:\\d{2})(\\.\\d{1,6})?(Z|\\+00:00)?' -%}
  {%- set match = modules.re.fullmatch(pattern, value) if value is string else none -%}
  {%- set problem = owner ~ ": argument `" ~ argument ~ "` is " ~ tojson(value)
        ~ "; expected a UTC time 'YYYY-MM-DD HH:MM:SS[.ffffff]' (or ISO 8601 with T and an optional Z)" -%}
  {%- if not match -%}{{ return({'value': none, 'errors': [problem]}) }}{%- endif -%}
  {%- set fields = (match.group(1).split('-') + match.group(2).split(':')) | map('int') | list -%}
  {%- if not (1 <= fields[1] <= 12 and 1 <= fields[2] <= 31 and fields[3] < 24 and fields[4] < 60
        and fields[5] < 60) -%}
    {{ return({'value': none, 'errors': [problem]}) }}
  {%- endif -%}
  {%- set fraction = (match.group(3) or '.0')[1:] -%}
  {%- set text = match.group(1) ~ ' ' ~ match.group(2) ~ '.' ~ (fraction ~ '000000')[:6] -%}
  {%- set parsed = modules.datetime.datetime.strptime(text, '%Y-%m-%d %H:%M:%S.%f') -%}
  {{ return({'value': parsed.replace(tzinfo=modules.pytz.utc), 'errors': []}) }}
{% endmacro %}


{#- CALL <namespace>.<procedure>(name => value, ...) from an ordered list of [name, literal]. -#}
{% macro _iceberg_maint_call_sql(relation, procedure, arguments) -%}
  {%- set rendered = [] -%}
  {%- for name, literal in arguments -%}
    {%- do rendered.append(name ~ ' => ' ~ literal) -%}
  {%- endfor -%}
  {{ return('CALL ' ~ dbt_iceberg_maint._iceberg_maint_procedure_namespace(relation) ~ '.' ~ procedure ~ '('
        ~ rendered | join(', ') ~ ')') }}
{%- endmacro %}
