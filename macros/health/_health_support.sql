{#- Private helpers shared by the health/ and properties/ macros. Names start with `_hp_` so
    they never collide with the package's other internal helpers. -#}

{#- `catalog.schema.table` / `schema.table` text for a Relation or a string (run-operation). -#}
{% macro _hp_table_name(relation, argument='relation') %}
  {%- if relation is none -%}
    {{ exceptions.raise_compiler_error(argument ~ " is required: pass a relation (e.g. this) or a table name such as 'schema.table'") }}
  {%- elif relation is string -%}
    {%- set parts = relation.split('.') -%}
    {%- if parts | length < 2 or parts | length > 3 -%}
      {{ exceptions.raise_compiler_error(argument ~ " = '" ~ relation ~ "' is not a table name; expected schema.table or catalog.schema.table") }}
    {%- endif -%}
    {%- for part in parts -%}
      {%- if not modules.re.fullmatch('[A-Za-z_][A-Za-z0-9_]*|`[^`]+`', part) -%}
        {{ exceptions.raise_compiler_error(argument ~ " = '" ~ relation ~ "' is not a table name; expected schema.table or catalog.schema.table made of identifiers") }}
      {%- endif -%}
    {%- endfor -%}
    {{ return(relation) }}
  {%- else -%}
    {{ return(relation.render()) }}
  {%- endif -%}
{% endmacro %}

{#- The dbt model node behind a relation (matched on schema and alias), or none. -#}
{% macro _hp_model_node(relation) %}
  {%- if relation is string -%}
    {%- set parts = relation.replace('`', '').split('.') -%}
    {%- set schema, identifier = parts[-2], parts[-1] -%}
  {%- else -%}
    {%- set schema, identifier = relation.schema, relation.identifier -%}
  {%- endif -%}
  {%- for node in graph.nodes.values() if node.resource_type == 'model' -%}
    {%- if (node.alias or node.name) | lower == identifier | lower and node.schema | lower == schema | lower -%}
      {{ return(node) }}
    {%- endif -%}
  {%- endfor -%}
  {{ return(none) }}
{% endmacro %}

{#- The model's `meta.iceberg_maint` policy: from the running model when relation is none,
    else from the graph node of the relation (a run-operation). -#}
{% macro _hp_policy(relation) %}
  {%- if relation is none -%}
    {%- set meta = config.get('meta') or {} -%}
  {%- else -%}
    {%- set node = dbt_iceberg_maint._hp_model_node(relation) -%}
    {%- set meta = {} if node is none else ((node.config or {}).get('meta') or node.get('meta') or {}) -%}
  {%- endif -%}
  {{ return(meta.get('iceberg_maint') or {}) }}
{% endmacro %}

{% macro _hp_now() %}
  {{ return(modules.datetime.datetime.now(modules.pytz.utc)) }}
{% endmacro %}

{% macro _hp_elapsed_ms(started) %}
  {{ return(((dbt_iceberg_maint._hp_now() - started).total_seconds() * 1000) | int) }}
{% endmacro %}

{#- One `ICEBERG_MAINT_RESULT <json>` line (the package's result channel, see DESIGN.md). -#}
{% macro _hp_log_result(table, operation, status, reason=none, sql=none, metrics={}, duration_ms=0) %}
  {%- set payload = {'table': table, 'operation': operation, 'status': status, 'reason': reason,
                     'sql': sql, 'metrics': metrics, 'duration_ms': duration_ms} -%}
  {{ log('ICEBERG_MAINT_RESULT ' ~ tojson(payload), info=true) }}
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
