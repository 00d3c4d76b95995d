{#- Argument checks shared by the procedures. Each returns a list of messages (empty when the
    value is acceptable) so a caller can collect every problem before raising once, and the
    test harness can check many messages in one dbt invocation. A message names the argument,
    the value and what is allowed. -#}

{% macro _iceberg_maint_check_positive_number(procedure, argument, value, minimum_exclusive=0, integer=false) %}
  {%- if value is none -%}{{ return([]) }}{%- endif -%}
  {%- if value is boolean or value is not number or (integer and value is not integer) -%}
    {{ return([procedure ~ ": argument `" ~ argument ~ "` is " ~ value ~ "; expected a "
          ~ ("whole number" if integer else "number") ~ " greater than " ~ minimum_exclusive]) }}
  {%- elif value <= minimum_exclusive -%}
    {{ return([procedure ~ ": argument `" ~ argument ~ "` is " ~ value ~ "; it must be greater than "
          ~ minimum_exclusive]) }}
  {%- endif -%}
  {{ return([]) }}
{% endmacro %}


{% macro _iceberg_maint_check_boolean(procedure, argument, value) %}
  {%- if value is none or value is boolean -%}{{ return([]) }}{%- endif -%}
  {{ return([procedure ~ ": argument `" ~ argument ~ "` is " ~ value ~ "; expected true or false"]) }}
{% endmacro %}


{% macro _iceberg_maint_check_choice(procedure, argument, value, allowed) %}
  {%- if value is none -%}{{ return([]) }}{%- endif -%}
  {%- if value is not string or value | lower not in allowed | map('lower') | list -%}
    {{ return([procedure ~ ": argument `" ~ argument ~ "` is '" ~ value ~ "'; allowed values: "
          ~ allowed | join(', ')]) }}
  {%- endif -%}
  {{ return([]) }}
{% endmacro %}


{#- A string that becomes part of a SQL text Iceberg parses (where, sort_order): one
    expression, no statement separator, no comment that could hide the rest. -#}
{% macro _iceberg_maint_check_sql_fragment(procedure, argument, value) %}
  {%- if value is none -%}{{ return([]) }}{%- endif -%}
  {%- if value is not string or not value.strip() -%}
    {{ return([procedure ~ ": argument `" ~ argument ~ "` is '" ~ value ~ "'; expected a non-empty SQL string"]) }}
  {%- endif -%}
  {%- set problems = dbt_iceberg_maint._iceberg_maint_fragment_problems(value) -%}
  {%- if problems -%}
    {{ return([procedure ~ ": argument `" ~ argument ~ "` is \"" ~ value ~ "\"; it must not contain "
          ~ problems | join(' or ')]) }}
  {%- endif -%}
  {{ return([]) }}
{% endmacro %}


{#- What makes a text unfit to be one SQL fragment inside a CALL: a statement separator or a
    comment marker (which could hide the rest of the statement). -#}
{% macro _iceberg_maint_fragment_problems(text) %}
  {%- set problems = [] -%}
  {%- if ';' in text -%}{%- do problems.append(
        "';' (a statement separator: only one predicate/expression is allowed)") -%}{%- endif -%}
  {%- if '--' in text or '/*' in text
        or '*/' in text -%}{%- do problems.append("a SQL comment (--, /* or */)") -%}{%- endif -%}
  {{ return(problems) }}
{% endmacro %}


{#- A mapping of string keys to scalar values (procedure options, equal_schemes, ...). -#}
{% macro _iceberg_maint_check_string_map(procedure, argument, value) %}
  {%- if value is none -%}{{ return([]) }}{%- endif -%}
  {%- if value is not mapping -%}
    {{ return([procedure ~ ": argument `" ~ argument ~ "` is " ~ value
          ~ "; expected a mapping of string keys to string values, e.g. {'key': 'value'}"]) }}
  {%- endif -%}
  {%- for key, item in value.items() -%}
    {%- if key is not string or not key.strip() or item is none or item is mapping or (item is iterable
          and item is not string) -%}
      {{ return([procedure ~ ": argument `" ~ argument ~ "` has entry " ~ key ~ ": " ~ item
            ~ "; keys must be non-empty strings and values strings, numbers or booleans"]) }}
    {%- endif -%}
  {%- endfor -%}
  {{ return([]) }}
{% endmacro %}


{#- Raise one compiler error listing every problem, or do nothing. -#}
{% macro _iceberg_maint_raise_if_errors(errors) %}
  {%- if errors -%}
    {{ exceptions.raise_compiler_error("dbt_iceberg_maint: invalid arguments: " ~ errors | join('; ')) }}
  {%- endif -%}
{% endmacro %}
