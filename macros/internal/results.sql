{#- The result channel: one `ICEBERG_MAINT_RESULT <json>` line per executed, skipped, failed or
    dry-run operation (read back by dbt_iceberg_maint.maintenance.results.parse_result_lines). -#}

{% macro _iceberg_maint_now() -%}
  {{ return(modules.datetime.datetime.now(modules.pytz.utc)) }}
{%- endmacro %}


{% macro _iceberg_maint_elapsed_ms(started) -%}
  {%- set delta = dbt_iceberg_maint._iceberg_maint_now() - started -%}
  {{ return((delta.total_seconds() * 1000) | round | int) }}
{%- endmacro %}


{#- JSON-safe copy of a value: agate returns Decimal and datetime values, which tojson cannot
    encode (it would return none). -#}
{% macro _iceberg_maint_json_safe(value) -%}
  {%- if value is none or value is boolean or value is string -%}
    {{ return(value) }}
  {%- elif value is mapping -%}
    {%- set copy = {} -%}
    {%- for key, item in value.items() -%}{%- do copy.update({key | string: dbt_iceberg_maint._iceberg_maint_json_safe(
          item)}) -%}{%- endfor -%}
    {{ return(copy) }}
  {%- elif value is iterable -%}
    {%- set copy = [] -%}
    {%- for item in value -%}{%- do copy.append(dbt_iceberg_maint._iceberg_maint_json_safe(item)) -%}{%- endfor -%}
    {{ return(copy) }}
  {%- elif value is number -%}
    {{ return((value | int) if (value | int) == value else (value | float)) }}
  {%- else -%}
    {{ return(value | string) }}
  {%- endif -%}
{%- endmacro %}


{#- Log the result line and return the record as a dict. -#}
{% macro _iceberg_maint_log_result(table, operation, status, reason=none, sql=none, metrics={}, duration_ms=0) %}
  {%- set record = {
      'table': table | string,
      'operation': operation,
      'status': status,
      'reason': reason,
      'sql': sql,
      'metrics': dbt_iceberg_maint._iceberg_maint_json_safe(metrics or {}),
      'duration_ms': duration_ms | int,
  } -%}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('result', record) -%}
  {{ return(record) }}
{% endmacro %}


{#- What a public macro that executes statements hands back: inside a node (its hooks or SQL)
    dbt runs the rendered text as SQL, so there it renders to '' (the result line is in the
    log); called from a macro or run-operation it returns the value. -#}
{% macro _iceberg_maint_outside_node(value) %}
  {{ return('' if dbt_iceberg_maint._iceberg_maint_in_node() else value) }}
{% endmacro %}


{#- True while dbt renders a node whose text it runs as SQL: a model's SQL or hooks, a seed's or
    snapshot's hooks, an on-run-start/on-run-end hook (resource type operation). Under
    run-operation `model` is the macro (resource type macro). -#}
{% macro _iceberg_maint_in_node() %}
  {{ return(model is mapping and model.get('resource_type') in ['model', 'seed', 'snapshot', 'operation']) }}
{% endmacro %}


{#- Why a hook macro called without a relation does nothing in this node, or none when it acts
    on `this`. Users attach the hooks at project or package level, and dbt hands them to every node
    below, including a package's on-run-start operations (where `this` is none), views and
    ephemeral models; only a model or snapshot that built a table is maintained. The reason goes
    to the debug log, never as a failure. A relation given explicitly is always acted on. -#}
{% macro _iceberg_maint_hook_skip_reason(name, relation) %}
  {%- if relation is not none or not dbt_iceberg_maint._iceberg_maint_in_node() -%}{{ return(none) }}{%- endif -%}
  {%- set config = model.get('config') or {} -%}
  {%- set materialized = config.get('materialized') or '' -%}
  {%- set file_format = (config.get('file_format') or '') | lower -%}
  {%- set reason = none -%}
  {%- if model.get('resource_type') not in ['model', 'snapshot'] or this is none -%}
    {%- set reason = 'not a model or snapshot that built a table (a ' ~ model.get('resource_type') ~ ')' -%}
  {%- elif materialized in ['view', 'ephemeral', 'materialized_view'] -%}
    {%- set reason = 'it is ' ~ materialized -%}
  {%- elif file_format and file_format != 'iceberg' -%}
    {%- set reason = 'not an Iceberg table (' ~ file_format ~ ')' -%}
  {%- endif -%}
  {%- if reason is not none -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_hook_skip(name, reason) -%}
  {%- endif -%}
  {{ return(reason) }}
{% endmacro %}


{% macro _iceberg_maint_log_hook_skip(name, reason) %}
  {%- if execute -%}
    {%- do log('dbt_iceberg_maint.' ~ name ~ ': nothing to do for ' ~ model.get('unique_id') ~ ': ' ~ reason,
          info=false) -%}
  {%- endif -%}
{% endmacro %}


{#- True when the macro `name` of this package is what `dbt run-operation` runs (not a macro
    that calls it, not a node's hook). -#}
{% macro _iceberg_maint_is_run_operation(name) %}
  {{ return(model is mapping and model.get('resource_type') == 'macro'
      and model.get('unique_id') == 'macro.dbt_iceberg_maint.' ~ name) }}
{% endmacro %}
