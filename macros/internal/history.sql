{#- Maintenance history: one row per executed or skipped step, appended to the Iceberg table
    `iceberg_maint_history` of the target schema (docs/history.md), from SQL alone.

    Every maintenance path writes it: maintain() (post-hook or run-operation), iceberg_maintenance,
    execute_maintenance_steps (the Python fleet engine's path) and the procedure macros. A path
    keeps one writer per macro invocation (_iceberg_maint_history_open) and adds a row per step
    result; rows are sent in one INSERT per flush, and a writer flushes before and after every CALL
    and at the end, so a post-hook where nothing is due sends one INSERT, and a run stopped midway
    (a CALL Spark rejects, a killed process) keeps the row of every step finished before. The
    fleet engine's steps defer their rows to the engine instead, which writes many steps' rows in
    one INSERT with its next lease claim (docs/history.md).

    Writing history never changes a maintained table (only its own table is written, without a
    lease) and must not fail maintenance. dbt's Jinja cannot catch a failed statement, so the
    predictable failures are checked before the first write with statements that cannot fail:
    the history namespace exists, and a table of that name has the history columns (else it is
    created). When a check fails, nothing is written and one `ICEBERG_MAINT_HISTORY {json}` line
    at info level reports it (`problem`, rows not written); maintenance goes on. -#}


{#- The columns, in order, with their Spark types: the contract's columns first. -#}
{% macro _iceberg_maint_history_columns() %}
  {{ return([['run_id', 'string'], ['invocation_id', 'string'], ['path', 'string'], ['node', 'string'],
      ['table_name', 'string'], ['operation', 'string'], ['status', 'string'], ['reason', 'string'],
      ['started_at', 'timestamp'], ['ended_at', 'timestamp'], ['duration_ms', 'bigint'], ['output', 'string'],
      ['health_before', 'string'], ['health_after', 'string'], ['snapshot_id_before', 'bigint'],
      ['snapshot_id_after', 'bigint'], ['lease_holder', 'string'], ['sql', 'string']]) }}
{% endmacro %}


{#- The run id every path records (and leases hold): var dbt_iceberg_maint_run_id, else env
    DBT_ICEBERG_MAINT_RUN_ID (dbt-iceberg-maint maintain sets it for its replays), else dbt's
    invocation_id. -#}
{% macro _iceberg_maint_run_id() %}
  {{ return((var('dbt_iceberg_maint_run_id', none) or env_var('DBT_ICEBERG_MAINT_RUN_ID', '') or invocation_id)
      | string) }}
{% endmacro %}


{#- History settings from the vars: enabled (dbt_iceberg_maint_history_enabled, default true),
    the schema (dbt_iceberg_maint_history_schema: 'schema' or 'catalog.schema', default the
    target's schema) and table name (dbt_iceberg_maint_history_table, default
    iceberg_maint_history); relation: '[catalog.]schema.table'. A var of the wrong shape is an
    error before anything runs. -#}
{% macro _iceberg_maint_history_settings() %}
  {%- set enabled = var('dbt_iceberg_maint_history_enabled', true) -%}
  {%- set schema = var('dbt_iceberg_maint_history_schema', none) or target.schema -%}
  {%- set name = var('dbt_iceberg_maint_history_table', 'iceberg_maint_history') -%}
  {%- set is_identifier = dbt_iceberg_maint._iceberg_maint_is_identifier -%}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_check_boolean('history',
        'var dbt_iceberg_maint_history_enabled', enabled) -%}
  {%- set parts = schema.split('.') if schema is string else [] -%}
  {%- set check = namespace(valid=1 <= parts | length <= 2) -%}
  {%- for part in parts if not is_identifier(part) -%}{%- set check.valid = false -%}{%- endfor -%}
  {%- if not check.valid -%}
    {%- do errors.append("history: var `dbt_iceberg_maint_history_schema` is " ~ tojson(schema)
          ~ "; expected 'schema' or 'catalog.schema' made of letters, digits and underscores") -%}
  {%- endif -%}
  {%- if not is_identifier(name) -%}
    {%- do errors.append("history: var `dbt_iceberg_maint_history_table` is " ~ tojson(name)
          ~ "; expected a table name made of letters, digits and underscores") -%}
  {%- endif -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(errors) -%}
  {{ return({'enabled': enabled is not false, 'catalog': parts[0] if parts | length == 2 else none,
      'schema': parts[-1], 'table': name, 'relation': schema ~ '.' ~ name}) }}
{% endmacro %}


{#- Pure: the DDL of the history table. Appends must always land (many quick commit retries);
    no distribution (a flush is a few rows); old metadata files go; partitioned by day. -#}
{% macro _iceberg_maint_history_create_sql(relation) %}
  {%- set columns = [] -%}
  {%- for name, type in dbt_iceberg_maint._iceberg_maint_history_columns() -%}
    {%- do columns.append(name ~ ' ' ~ type) -%}
  {%- endfor -%}
  {{ return('create table if not exists ' ~ relation ~ ' (' ~ columns | join(', ') ~ ') using iceberg '
      ~ "partitioned by (days(started_at)) tblproperties ('format-version' = '2', "
      ~ "'commit.retry.num-retries' = '100', 'commit.retry.min-wait-ms' = '20', 'commit.retry.max-wait-ms' = '2000', "
      ~ "'write.distribution-mode' = 'none', 'write.metadata.delete-after-commit.enabled' = 'true', "
      ~ "'write.metadata.previous-versions-max' = '20', 'dbt-iceberg-maint.history' = 'true')") }}
{% endmacro %}


{#- Pure: one INSERT of `rows` (mappings keyed by the column names; a missing key is null). -#}
{% macro _iceberg_maint_history_insert_sql(relation, rows) %}
  {%- set literal = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {%- set columns = dbt_iceberg_maint._iceberg_maint_history_columns() -%}
  {%- set tuples = [] -%}
  {%- for row in rows -%}
    {%- set values = [] -%}
    {%- for name, type in columns -%}
      {%- set value = row.get(name) -%}
      {%- if value is none -%}
        {%- do values.append('null') -%}
      {%- elif type == 'timestamp' -%}
        {%- do values.append(dbt_iceberg_maint._iceberg_maint_timestamp_literal(value)) -%}
      {%- elif type == 'bigint' -%}
        {%- do values.append((value | int) | string) -%}
      {%- else -%}
        {%- do values.append(literal(value)) -%}
      {%- endif -%}
    {%- endfor -%}
    {%- do tuples.append('(' ~ values | join(', ') ~ ')') -%}
  {%- endfor -%}
  {{ return('insert into ' ~ relation ~ ' (' ~ columns | map(attribute=0) | join(', ') ~ ') values '
      ~ tuples | join(', ')) }}
{% endmacro %}


{#- Pure: JSON text of a step's output figures (the procedure's output columns); a list longer
    than 100 items (remove_orphan_files' locations) keeps its first 100 and adds
    `<name>_truncated: true`. none stays none. -#}
{% macro _iceberg_maint_history_json(value) %}
  {%- if value is none -%}{{ return(none) }}{%- endif -%}
  {%- set safe = dbt_iceberg_maint._iceberg_maint_json_safe(value) -%}
  {%- if safe is mapping -%}
    {%- set copy = {} -%}
    {%- for key, item in safe.items() -%}
      {%- if item is iterable and item is not string and item is not mapping and item | length > 100 -%}
        {%- do copy.update({key: item[:100], key ~ '_truncated': true}) -%}
      {%- else -%}
        {%- do copy.update({key: item}) -%}
      {%- endif -%}
    {%- endfor -%}
    {%- set safe = copy -%}
  {%- endif -%}
  {{ return(tojson(safe, sort_keys=true)) }}
{% endmacro %}


{#- Pure: the history row of one step result (`record`: what _iceberg_maint_log_result returned),
    with what the writer knows of the run and what the step knows of the table: `started` and
    `ended` (UTC datetimes), `before`/`after` (the table's summary figures, or none), the lease
    holder. -#}
{% macro _iceberg_maint_history_row(history, record, started, ended, before=none, after=none, lease_holder=none,
    node=none) %}
  {{ return({'run_id': history.run_id, 'invocation_id': history.invocation_id, 'path': history.path,
      'node': node, 'table_name': record.table, 'operation': record.operation, 'status': record.status,
      'reason': record.reason, 'started_at': started, 'ended_at': ended, 'duration_ms': record.duration_ms,
      'output': dbt_iceberg_maint._iceberg_maint_history_json(record.metrics or {}),
      'health_before': dbt_iceberg_maint._iceberg_maint_history_json(before),
      'health_after': dbt_iceberg_maint._iceberg_maint_history_json(after),
      'snapshot_id_before': (before or {}).get('snapshot_id'), 'snapshot_id_after': (after or {}).get('snapshot_id'),
      'lease_holder': lease_holder, 'sql': record.sql}) }}
{% endmacro %}


{#- A writer for one macro invocation of `path` (maintain, iceberg_maintenance,
    execute_maintenance_steps, or a procedure's name). Disabled (the var, or dbt parsing) it sends
    no statement at all. -#}
{% macro _iceberg_maint_history_open(path) %}
  {%- set settings = dbt_iceberg_maint._iceberg_maint_history_settings() -%}
  {{ return(dict(settings, enabled=settings.enabled and execute, path=path,
      run_id=dbt_iceberg_maint._iceberg_maint_run_id(), invocation_id=invocation_id | string,
      deferred=false, pending=[], state={'ready': none, 'problem': none, 'written': 0, 'flushes': 0})) }}
{% endmacro %}


{#- Queue the row of one step result; the caller flushes after an executed step and before a CALL,
    so a kill loses at most the row of the step it interrupts. A deferred writer (the fleet
    engine's steps: execute_maintenance_steps' `defer_history`) writes nothing: it logs the row at
    once in an ICEBERG_MAINT_HISTORY_ROWS line, so a later step that stops the macro cannot lose
    it, and the engine writes the rows of many steps in one INSERT (claim_leases' `history_rows`). -#}
{% macro _iceberg_maint_history_add(history, row) %}
  {%- if history.enabled and history.deferred -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_marker('history_rows',
          {'rows': [dbt_iceberg_maint._iceberg_maint_json_safe(row)]}, info=false) -%}
  {%- elif history.enabled -%}
    {%- do history.pending.append(row) -%}
  {%- endif -%}
{% endmacro %}


{#- {'rows': [...], 'errors': [...]} for history rows handed back by the caller (what
    ICEBERG_MAINT_HISTORY_ROWS lines logged): a list of mappings keyed by history columns, each
    naming its table_name, operation and status, every value of its column's type or null
    (timestamps as UTC text); the rows come back with their timestamps as datetimes. -#}
{% macro _iceberg_maint_history_rows_given(owner, rows) %}
  {%- if rows is none -%}{{ return({'rows': [], 'errors': []}) }}{%- endif -%}
  {%- set problem = owner ~ ': argument `history_rows` ' -%}
  {%- if rows is string or rows is mapping or rows is not iterable -%}
    {{ return({'rows': [], 'errors': [problem ~ 'is ' ~ tojson(rows) ~ '; expected a list of history rows '
        ~ '(mappings keyed by the history columns), as ICEBERG_MAINT_HISTORY_ROWS lines log them']}) }}
  {%- endif -%}
  {%- set columns = dbt_iceberg_maint._iceberg_maint_history_columns() -%}
  {%- set names = columns | map(attribute=0) | list -%}
  {%- set converted = [] -%}
  {%- set errors = [] -%}
  {%- for row in rows -%}
    {%- set where = problem ~ 'row ' ~ loop.index -%}
    {%- if row is not mapping -%}
      {%- do errors.append(where ~ ' is ' ~ tojson(row) ~ '; expected a mapping keyed by the history columns') -%}
    {%- else -%}
      {%- set unknown = row.keys() | reject('in', names) | list -%}
      {%- if unknown -%}
        {%- do errors.append(where ~ ' has unknown column(s) ' ~ unknown | join(', ') ~ '; expected some of '
              ~ names | join(', ')) -%}
      {%- endif -%}
      {%- set copy = {} -%}
      {%- for name, type in columns -%}
        {%- set value = row.get(name) -%}
        {%- set required = name in ['table_name', 'operation', 'status'] -%}
        {%- if value is none and not required -%}
          {%- do copy.update({name: none}) -%}
        {%- elif type == 'timestamp' -%}
          {%- set parsed = dbt_iceberg_maint._iceberg_maint_parse_instant(owner, 'history_rows', value) -%}
          {%- if parsed.errors -%}
            {%- do errors.append(where ~ ' column ' ~ name ~ ' is ' ~ tojson(value) ~ "; expected a UTC time "
                  ~ "'YYYY-MM-DD HH:MM:SS[.ffffff]' or null") -%}
          {%- endif -%}
          {%- do copy.update({name: parsed.value}) -%}
        {%- elif type == 'bigint' -%}
          {%- if value is not number or value is boolean or value != value | int -%}
            {%- do errors.append(where ~ ' column ' ~ name ~ ' is ' ~ tojson(value)
                  ~ '; expected a whole number or null') -%}
          {%- endif -%}
          {%- do copy.update({name: value}) -%}
        {%- elif value is not string or (required and not value) -%}
          {%- do errors.append(where ~ ' column ' ~ name ~ ' is ' ~ tojson(value) ~ '; expected '
                ~ ('a non-empty string' if required else 'a string or null')) -%}
        {%- else -%}
          {%- do copy.update({name: value}) -%}
        {%- endif -%}
      {%- endfor -%}
      {%- do converted.append(copy) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return({'rows': [] if errors else converted, 'errors': errors}) }}
{% endmacro %}


{#- Whether rows can be written, decided once per writer with statements that cannot fail:
    inside a node whose schema is the history schema, dbt's relation cache answers (no statement;
    a table this writer creates is added to it, so the next post-hook finds it); elsewhere SHOW
    NAMESPACES and SHOW TABLES, then CREATE TABLE IF NOT EXISTS when missing, or DESCRIBE of an
    existing table to check it has the history columns. -#}
{% macro _iceberg_maint_history_prepare(history) %}
  {%- if history.state.ready is not none -%}{{ return(history.state.ready) }}{%- endif -%}
  {%- set cached = history.catalog is none and dbt_iceberg_maint._iceberg_maint_in_node() and this is defined
        and this is not none and (this.schema or '') | lower == history.schema | lower -%}
  {%- if cached -%}
    {%- if adapter.get_relation(database=none, schema=history.schema, identifier=history.table) is none -%}
      {%- do dbt_iceberg_maint._iceberg_maint_history_statement(
            dbt_iceberg_maint._iceberg_maint_history_create_sql(history.relation)) -%}
      {%- do adapter.cache_added(api.Relation.create(schema=history.schema, identifier=history.table, type='table')) -%}
    {%- endif -%}
    {%- do history.state.update({'ready': true}) -%}
    {{ return(true) }}
  {%- endif -%}
  {%- set literal = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {%- set in_catalog = (' in ' ~ history.catalog) if history.catalog else '' -%}
  {%- set namespace_text = ((history.catalog ~ '.') if history.catalog else '') ~ history.schema -%}
  {%- set problem = none -%}
  {%- if run_query('show namespaces' ~ in_catalog ~ ' like ' ~ literal(history.schema)).rows | length == 0 -%}
    {%- set problem = 'history schema ' ~ namespace_text ~ ' does not exist (var dbt_iceberg_maint_history_schema)' -%}
  {%- else -%}
    {%- set names = [] -%}
    {%- for row in run_query('show tables in ' ~ namespace_text ~ ' like ' ~ literal(history.table))
          if not row['isTemporary'] -%}
      {%- do names.append(row['tableName'] | lower) -%}
    {%- endfor -%}
    {%- if (history.table | lower) not in names -%}
      {%- do dbt_iceberg_maint._iceberg_maint_history_statement(
            dbt_iceberg_maint._iceberg_maint_history_create_sql(history.relation)) -%}
    {%- else -%}
      {%- set found = [] -%}
      {%- for row in run_query('describe table ' ~ history.relation) -%}
        {%- do found.append((row[0] or '') | string | lower) -%}
      {%- endfor -%}
      {%- set missing = dbt_iceberg_maint._iceberg_maint_history_columns() | map(attribute=0)
            | reject('in', found) | list -%}
      {%- if missing -%}
        {%- set problem = 'table ' ~ history.relation ~ ' exists without the history column(s) '
              ~ missing | join(', ') -%}
      {%- endif -%}
    {%- endif -%}
  {%- endif -%}
  {%- do history.state.update({'ready': problem is none, 'problem': problem}) -%}
  {{ return(problem is none) }}
{% endmacro %}


{#- Send the pending rows in one INSERT (none pending: no statement). When the history cannot be
    written, drop them and report it: one ICEBERG_MAINT_HISTORY line at info level per flush. -#}
{% macro _iceberg_maint_history_flush(history) %}
  {%- if not history.enabled or not history.pending -%}{{ return(none) }}{%- endif -%}
  {%- set rows = history.pending[:] -%}
  {%- do history.pending.clear() -%}
  {%- if dbt_iceberg_maint._iceberg_maint_history_prepare(history) -%}
    {%- do dbt_iceberg_maint._iceberg_maint_history_statement(
          dbt_iceberg_maint._iceberg_maint_history_insert_sql(history.relation, rows)) -%}
    {%- do history.state.update({'written': history.state.written + rows | length,
          'flushes': history.state.flushes + 1}) -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_marker('history', {'table': history.relation, 'path': history.path,
          'rows': rows | length, 'written': true, 'problem': none}, info=false) -%}
  {%- else -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_marker('history', {'table': history.relation, 'path': history.path,
          'rows': rows | length, 'written': false, 'problem': history.state.problem}) -%}
  {%- endif -%}
{% endmacro %}


{#- The table's summary figures after an executed step (one metadata-only query: the snapshot
    count and oldest age, the current snapshot's id and file counts), only while history is on. -#}
{% macro _iceberg_maint_history_health(history, table) %}
  {%- if not history.enabled -%}{{ return(none) }}{%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_summary_figures(table)) }}
{% endmacro %}


{#- The selector label of the dbt node whose table `table` is (package.name, source:src.table),
    or none. -#}
{% macro _iceberg_maint_history_node(table) %}
  {%- set node = dbt_iceberg_maint._iceberg_maint_node_for_relation(table) -%}
  {{ return(none if node is none else dbt_iceberg_maint._iceberg_maint_node_label(node)) }}
{% endmacro %}


{% macro _iceberg_maint_history_statement(sql) %}
  {%- call statement('iceberg_maint_history', fetch_result=False) -%}{{ sql }}{%- endcall -%}
{% endmacro %}
