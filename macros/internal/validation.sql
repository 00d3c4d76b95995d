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


{#- An age in hours a timestamp can be computed from: at most 876000 (100 years). A larger one
    would fail while the SQL is rendered (Python's datetime), not with a message naming it. -#}
{% macro _iceberg_maint_check_hours_bound(procedure, argument, value) %}
  {%- if value is number and value is not boolean and value > 876000 -%}
    {{ return([procedure ~ ": argument `" ~ argument ~ "` is " ~ value ~ "; it must be at most 876000 (100 years)"]) }}
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


{#- A string that becomes part of a SQL text Iceberg parses (sort_order): no statement
    separator, no comment that could hide the rest, quotes and parentheses balanced. -#}
{% macro _iceberg_maint_check_sql_fragment(procedure, argument, value) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_fragment_errors(procedure, argument, value, one_expression=false)) }}
{% endmacro %}


{#- The `where` guard (argument or policy, every procedure): one balanced boolean expression, so
    that `(<where>) and (<cold predicate>)` keeps the cold scope a top-level conjunct. -#}
{% macro _iceberg_maint_check_where(procedure, argument, value) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_fragment_errors(procedure, argument, value, one_expression=true)) }}
{% endmacro %}


{% macro _iceberg_maint_fragment_errors(procedure, argument, value, one_expression) %}
  {%- if value is none -%}{{ return([]) }}{%- endif -%}
  {%- if value is not string or not value.strip() -%}
    {{ return([procedure ~ ": argument `" ~ argument ~ "` is '" ~ value ~ "'; expected a non-empty SQL string"]) }}
  {%- endif -%}
  {%- set head = procedure ~ ": argument `" ~ argument ~ "` is " ~ tojson(value) -%}
  {%- set problems = dbt_iceberg_maint._iceberg_maint_fragment_problems(value) -%}
  {%- if problems -%}
    {{ return([head ~ "; it must not contain " ~ problems | join(' or ')]) }}
  {%- endif -%}
  {%- set shape = dbt_iceberg_maint._iceberg_maint_scan_expression(value) -%}
  {%- set problem = shape.problem or ('it holds ' ~ (shape.parts | length) ~ ' comma-separated expressions'
        if one_expression and shape.parts | length > 1 else none) -%}
  {%- if problem -%}
    {{ return([head ~ "; it must be one " ~ ('boolean expression' if one_expression else 'SQL expression list')
          ~ " with quotes and parentheses balanced outside string literals, but " ~ problem]) }}
  {%- endif -%}
  {{ return([]) }}
{% endmacro %}


{#- What makes a text unfit to be one SQL fragment inside a CALL: a statement separator or a
    comment marker (which could hide the rest of the statement), refused even inside literals. -#}
{% macro _iceberg_maint_fragment_problems(text) %}
  {%- set problems = [] -%}
  {%- if ';' in text -%}{%- do problems.append(
        "';' (a statement separator: only one predicate/expression is allowed)") -%}{%- endif -%}
  {%- if '--' in text or '/*' in text
        or '*/' in text -%}{%- do problems.append("a SQL comment (--, /* or */)") -%}{%- endif -%}
  {{ return(problems) }}
{% endmacro %}


{#- Walk a SQL text as Spark's lexer does: '...' and "..." literals (backslash escapes, a doubled
    quote stays inside; r'...' raw literals without escapes), `...` identifiers (a doubled
    backtick stays inside), parenthesis depth.
    {'problem': why it is not balanced, or none; 'parts': the text split at commas outside any
    literal and parenthesis}. The one scanner of the package: the where guard and the replayed
    CALL's arguments both read text with it. -#}
{% macro _iceberg_maint_scan_expression(text) %}
  {%- set state = namespace(quote=none, raw=false, depth=0, skip=false, problem=none, start=0, opened_at=0) -%}
  {%- set parts = [] -%}
  {%- for char in text if state.problem is none -%}
    {%- set i = loop.index0 -%}
    {%- if state.skip -%}
      {%- set state.skip = false -%}
    {%- elif state.quote is not none -%}
      {%- if char == '\\' and state.quote != '`' and not state.raw -%}
        {%- set state.skip = true -%}
      {%- elif char == state.quote -%}
        {#- '' ends the literal and starts a new one, not raw. -#}
        {%- if text[i + 1:i + 2] == char -%}{%- set state.skip = true -%}{%- set state.raw = false -%}
        {%- else -%}{%- set state.quote = none -%}{%- endif -%}
      {%- endif -%}
    {%- elif char in ["'", '"', '`'] -%}
      {%- set state.quote = char -%}
      {%- set state.opened_at = i -%}
      {#- r'...' / R"...": Spark's raw literal, where a backslash escapes nothing. -#}
      {%- set state.raw = char != '`' and text[i - 1:i] in ['r', 'R'] and i > 0
            and not modules.re.fullmatch('[A-Za-z0-9_]', text[i - 2:i - 1] if i > 1 else ' ') -%}
    {%- elif char == '(' -%}
      {%- set state.depth = state.depth + 1 -%}
    {%- elif char == ')' -%}
      {%- if state.depth == 0 -%}
        {%- set state.problem = "the ')' at character " ~ (i + 1) ~ " closes a parenthesis it never opened" -%}
      {%- endif -%}
      {%- set state.depth = state.depth - 1 -%}
    {%- elif char == ',' and state.depth == 0 -%}
      {%- do parts.append(text[state.start:i]) -%}
      {%- set state.start = i + 1 -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if state.problem is none and state.quote is not none -%}
    {%- set state.problem = "the " ~ state.quote ~ " at character " ~ (state.opened_at + 1) ~ " is never closed" -%}
  {%- elif state.problem is none and state.depth > 0 -%}
    {%- set state.problem = state.depth ~ " parenthesis(es) are never closed" -%}
  {%- endif -%}
  {%- do parts.append(text[state.start:]) -%}
  {{ return({'problem': state.problem, 'parts': parts}) }}
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
