{#- The snapshot log the runner's landed verification reads (dbt_iceberg_maint/landed.py), through
    SQL on the dbt connection so that it works over any connection method (session, thrift).
    `tables`: a list of 'schema.table' strings. `after`: {table: snapshot_id}; for a table named
    there, that snapshot and every one committed at or after it (-1: every snapshot), else only
    the current one.
    Logs one line `ICEBERG_MAINT_SNAPSHOTS {"app_id": ..., "tables": [{table, exists, snapshots}]}`
    and returns the same dict. Each snapshot: snapshot_id, committed_at_ms (epoch ms),
    operation, app_id (summary spark.app.id), added_records, deleted_records. -#}
{% macro table_snapshots(tables, after=none) %}
  {{ return(adapter.dispatch('table_snapshots', 'dbt_iceberg_maint')(tables=tables, after=after)) }}
{% endmacro %}

{% macro default__table_snapshots(tables, after=none) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.table_snapshots is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports spark") }}
{% endmacro %}

{% macro spark__table_snapshots(tables, after=none) %}
  {%- if tables is string or tables is mapping or tables is not iterable -%}
    {{ exceptions.raise_compiler_error("table_snapshots: argument `tables` is " ~ tojson(tables)
        ~ "; expected a list of 'schema.table' strings") }}
  {%- endif -%}
  {%- if after is not none and after is not mapping -%}
    {{ exceptions.raise_compiler_error("table_snapshots: argument `after` is " ~ tojson(after)
        ~ "; expected a mapping of 'schema.table' to a snapshot id") }}
  {%- endif -%}
  {%- set after = after or {} -%}
  {%- set result = {'app_id': none, 'tables': []} -%}
  {%- if not execute -%}{{ return(result) }}{%- endif -%}
  {%- for row in run_query('set spark.app.id') -%}{%- do result.update({'app_id': row[1]}) -%}{%- endfor -%}
  {%- for name in tables -%}
    {%- set parts = (name | string).split('.') -%}
    {%- if parts | length != 2 or not parts[0] or not parts[1] -%}
      {{ exceptions.raise_compiler_error("table_snapshots: argument `tables` contains '" ~ name
          ~ "'; expected 'schema.table'") }}
    {%- endif -%}
    {#- Not adapter.get_relation: outside a node it lists (and on v2 catalogs describes) the whole schema. -#}
    {%- set exists = dbt_iceberg_maint._iceberg_maint_show_table_exists(none, parts[0], parts[1]) -%}
    {%- set relation = api.Relation.create(schema=parts[0], identifier=parts[1]) -%}
    {%- set entry = {'table': name, 'exists': exists, 'snapshots': []} -%}
    {%- if exists -%}
      {#- The session's catalog caches table metadata (Iceberg's CachingCatalog). After a commit whose
          outcome its own writer misjudged (a connection cut after the catalog committed), the cache
          still holds the old metadata and the landed write is invisible: read fresh metadata. -#}
      {#- A statement, not run_query: `refresh` returns no result set, which run_query cannot
          iterate over thrift. -#}
      {%- call statement('iceberg_maint_refresh_table') -%}refresh table {{ relation }}{%- endcall -%}
      {%- for row in run_query(dbt_iceberg_maint.get_table_snapshots_sql(relation, after.get(name))) -%}
        {%- do entry.snapshots.append({
              'snapshot_id': row['snapshot_id'] | int, 'committed_at_ms': row['committed_at_ms'] | int,
              'operation': row['operation'], 'app_id': row['app_id'],
              'added_records': row['added_records'], 'deleted_records': row['deleted_records']}) -%}
      {%- endfor -%}
    {%- endif -%}
    {%- do result.tables.append(entry) -%}
  {%- endfor -%}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('snapshots', result) -%}
  {{ return(result) }}
{% endmacro %}

{#- The query behind table_snapshots for one relation: the current snapshot, or with
    `after_snapshot_id` that snapshot and every one committed at or after it (-1: every one). -#}
{% macro get_table_snapshots_sql(relation, after_snapshot_id=none) %}
  {{ return(adapter.dispatch('get_table_snapshots_sql', 'dbt_iceberg_maint')(
      relation=relation, after_snapshot_id=after_snapshot_id)) }}
{% endmacro %}

{% macro default__get_table_snapshots_sql(relation, after_snapshot_id=none) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.get_table_snapshots_sql is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports spark") }}
{% endmacro %}

{% macro spark__get_table_snapshots_sql(relation, after_snapshot_id=none) %}
  {%- if after_snapshot_id is not none
        and (after_snapshot_id is boolean or after_snapshot_id is not integer) -%}
    {{ exceptions.raise_compiler_error("get_table_snapshots_sql: argument `after_snapshot_id` is "
        ~ tojson(after_snapshot_id) ~ "; expected an integer snapshot id, -1 (every snapshot) or none") }}
  {%- endif -%}
  {%- set columns -%}
    snapshot_id, unix_millis(committed_at) as committed_at_ms, operation,
    coalesce(summary['spark.app.id'], summary['app-id']) as app_id,
    summary['added-records'] as added_records, summary['deleted-records'] as deleted_records
  {%- endset -%}
  {%- if after_snapshot_id is none -%}
    {{ return('select ' ~ columns ~ ' from ' ~ relation
              ~ '.snapshots order by committed_at desc, snapshot_id desc limit 1') }}
  {%- elif after_snapshot_id == -1 -%}
    {{ return('select ' ~ columns ~ ' from ' ~ relation ~ '.snapshots order by committed_at, snapshot_id') }}
  {%- else -%}
    {{ return('select ' ~ columns ~ ' from ' ~ relation ~ '.snapshots where snapshot_id = ' ~ after_snapshot_id
              ~ ' or committed_at >= (select max(committed_at) from ' ~ relation ~ '.snapshots where snapshot_id = '
              ~ after_snapshot_id ~ ') order by committed_at, snapshot_id') }}
  {%- endif -%}
{% endmacro %}
