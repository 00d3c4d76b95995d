{#- The snapshot log the runner's landed verification reads (dbt_iceberg_maint/runner/landed.py), through
    SQL on the dbt connection so that it works over any connection method (session, thrift).
    `tables`: a list of 'schema.table' strings. For each table: whether it exists, every snapshot
    its metadata holds and the current one (the `main` ref): which snapshots an attempt added is
    decided from lineage (parent ids and the ids present before), never from commit times, which
    come from the committing JVM's clock.
    Logs one line `ICEBERG_MAINT_SNAPSHOTS {"app_id": ..., "tables": [{table, exists,
    current_snapshot_id, snapshots}]}` and returns the same dict. Each snapshot: snapshot_id,
    parent_id, committed_at_ms (epoch ms), operation, app_id (summary spark.app.id),
    added_records, deleted_records. -#}
{% macro table_snapshots(tables) %}
  {{ return(adapter.dispatch('table_snapshots', 'dbt_iceberg_maint')(tables=tables)) }}
{% endmacro %}

{% macro default__table_snapshots(tables) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.table_snapshots is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports spark") }}
{% endmacro %}

{% macro spark__table_snapshots(tables) %}
  {%- if tables is string or tables is mapping or tables is not iterable -%}
    {{ exceptions.raise_compiler_error("table_snapshots: argument `tables` is " ~ tojson(tables)
        ~ "; expected a list of 'schema.table' strings") }}
  {%- endif -%}
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
    {%- set entry = {'table': name, 'exists': exists, 'current_snapshot_id': none, 'snapshots': []} -%}
    {%- if exists -%}
      {#- The session's catalog caches table metadata (Iceberg's CachingCatalog). After a commit whose
          outcome its own writer misjudged (a connection cut after the catalog committed), the cache
          still holds the old metadata and the landed write is invisible: read fresh metadata. -#}
      {#- A statement, not run_query: `refresh` returns no result set, which run_query cannot
          iterate over thrift. -#}
      {%- call statement('iceberg_maint_refresh_table') -%}
        refresh table {{ dbt_iceberg_maint._iceberg_maint_qualified_name(relation) }}
      {%- endcall -%}
      {%- for row in run_query(dbt_iceberg_maint.get_table_snapshots_sql(relation)) -%}
        {%- if row['is_current'] -%}{%- do entry.update({'current_snapshot_id': row['snapshot_id'] | int}) -%}{%- endif -%}
        {%- do entry.snapshots.append({
              'snapshot_id': row['snapshot_id'] | int,
              'parent_id': none if row['parent_id'] is none else row['parent_id'] | int,
              'committed_at_ms': row['committed_at_ms'] | int,
              'operation': row['operation'], 'app_id': row['app_id'],
              'added_records': row['added_records'], 'deleted_records': row['deleted_records']}) -%}
      {%- endfor -%}
    {%- endif -%}
    {%- do result.tables.append(entry) -%}
  {%- endfor -%}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('snapshots', result) -%}
  {{ return(result) }}
{% endmacro %}

{#- The query behind table_snapshots for one relation: every snapshot of its log, with its parent
    and whether the `main` ref points at it. Ordered by commit time for reading only. -#}
{% macro get_table_snapshots_sql(relation) %}
  {{ return(adapter.dispatch('get_table_snapshots_sql', 'dbt_iceberg_maint')(relation=relation)) }}
{% endmacro %}

{% macro default__get_table_snapshots_sql(relation) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.get_table_snapshots_sql is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports spark") }}
{% endmacro %}

{% macro spark__get_table_snapshots_sql(relation) %}
  {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(relation) -%}  {#- a checked name -#}
  {{ return('select snapshot_id, parent_id, unix_millis(committed_at) as committed_at_ms, operation, '
            ~ "coalesce(summary['spark.app.id'], summary['app-id']) as app_id, "
            ~ "summary['added-records'] as added_records, summary['deleted-records'] as deleted_records, "
            ~ "coalesce(snapshot_id = (select max(snapshot_id) from " ~ table ~ ".refs where name = 'main'), false)"
            ~ ' as is_current from ' ~ table ~ '.snapshots order by committed_at, snapshot_id') }}
{% endmacro %}
