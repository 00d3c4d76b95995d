{#- Private helpers of the health/ macros: a table's layout, partition transforms. -#}

{#- Relation names, graph lookups and the result channel come from macros/internal (shared
    with the procedures and maintain()), so every result line names tables the same way. -#}






{#- Columns (name -> Spark type) and the current partition spec, from `describe table`:
    {'columns': {...}, 'partition_fields': [{'transform': 'identity'|'days'|..., 'column': name,
    'text': 'days(event_ts)'}]}. -#}
{% macro _iceberg_maint_table_layout(table) %}
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
      {%- set section.name = {'# Partitioning': 'partitioning',
            '# Partition Information': 'partition_information'}.get(name, 'other') -%}
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
{% macro _iceberg_maint_is_run_operation_of(name) %}
  {%- set args = invocation_args_dict or {} -%}
  {{ return(args.get('which') == 'run-operation' and (args.get('macro') or '').split('.')[-1] == name) }}
{% endmacro %}
