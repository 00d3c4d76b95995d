{#- Private helpers of the health/ and properties/ macros (prefix `_hp_`). -#}

{#- Relation names, graph lookups and the result channel come from macros/internal (shared
    with the procedures and maintain()), so every result line names tables the same way. -#}

{% macro _hp_table_name(relation, argument='relation') %}
  {{ return(dbt_iceberg_maint._iceberg_maint_qualified_name(relation, argument)) }}
{% endmacro %}

{#- The model's `meta.iceberg_maint` policy: from the running model when relation is none,
    else from the graph node of the relation (a run-operation); {} when there is none. -#}
{% macro _hp_policy(relation) %}
  {%- if relation is none -%}
    {%- set meta = config.get('meta') or {} -%}
    {{ return(meta.get('iceberg_maint') or {}) }}
  {%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_model_policy(dbt_iceberg_maint._iceberg_maint_node_for_relation(relation))) }}
{% endmacro %}

{% macro _hp_now() %}
  {{ return(dbt_iceberg_maint._iceberg_maint_now()) }}
{% endmacro %}

{% macro _hp_elapsed_ms(started) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_elapsed_ms(started)) }}
{% endmacro %}

{% macro _hp_log_result(table, operation, status, reason=none, sql=none, metrics={}, duration_ms=0) %}
  {%- do dbt_iceberg_maint._iceberg_maint_log_result(table, operation, status, reason, sql, metrics, duration_ms) -%}
{% endmacro %}

{#- Columns (name -> Spark type) and the current partition spec, from `describe table`:
    {'columns': {...}, 'partition_fields': [{'transform': 'identity'|'days'|..., 'column': name,
    'text': 'days(event_ts)'}]}. -#}
{% macro _hp_table_layout(table) %}
  {%- set columns = {} -%}
  {%- set fields = [] -%}
  {%- set section = namespace(name='columns') -%}
  {%- for row in run_query('describe table ' ~ table) -%}
    {%- set name = (row['col_name'] or '') | trim -%}
    {%- set type = (row['data_type'] or '') | trim -%}
    {#- Spark prints "# Partitioning" / "Part N" rows for transforms, but for identity-only
        specs a Hive-style "# Partition Information" section of column rows. -#}
    {%- if name == '# col_name' and section.name == 'partition_information' -%}
    {%- elif name == '' or name.startswith('#') -%}
      {%- set section.name = {'# Partitioning': 'partitioning', '# Partition Information': 'partition_information'}.get(name, 'other') -%}
    {%- elif section.name == 'columns' -%}
      {%- do columns.update({name: type | lower}) -%}
    {%- elif section.name == 'partitioning' and name.startswith('Part ') -%}
      {%- do fields.append(dbt_iceberg_maint.parse_partition_transform(type)) -%}
    {%- elif section.name == 'partition_information' -%}
      {%- do fields.append({'transform': 'identity', 'column': name, 'text': name}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return({'columns': columns, 'partition_fields': fields}) }}
{% endmacro %}

{#- 'days(event_ts)' -> {'transform': 'days', 'column': 'event_ts', 'text': ...}; a plain column
    name is identity; bucket/truncate/other transforms keep their name (not expressible). -#}
{% macro parse_partition_transform(text) %}
  {%- set match = modules.re.fullmatch('\\s*([A-Za-z_]+)\\((.*)\\)\\s*', text) -%}
  {%- if match -%}
    {%- set arguments = match.group(2).split(',') -%}
    {{ return({'transform': match.group(1) | lower, 'column': arguments[-1] | trim | replace('`', ''), 'text': text}) }}
  {%- endif -%}
  {{ return({'transform': 'identity', 'column': text | trim | replace('`', ''), 'text': text}) }}
{% endmacro %}

{#- True when `dbt run-operation <name>` (or <package>.<name>) is what is running. -#}
{% macro _hp_is_run_operation_of(name) %}
  {%- set args = invocation_args_dict or {} -%}
  {{ return(args.get('which') == 'run-operation' and (args.get('macro') or '').split('.')[-1] == name) }}
{% endmacro %}
