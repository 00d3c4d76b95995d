{#- Table statistics from Iceberg metadata tables (data_files, delete_files, snapshots,
    manifests, partitions), as a dict. Small files are those below 0.75 x the target file size
    (rewrite_data_files' default min-file-size-bytes); the target is the argument, else the
    table's write.target-file-size-bytes, else Iceberg's default 536870912.
    log_result: log an ICEBERG_MAINT_RESULT line (operation table_health); by default only when
    table_health is the macro that `dbt run-operation` was asked to run, or a node's hook.
    In a node (e.g. as a post-hook) it renders to nothing: the figures are in the log line. -#}
{% macro table_health(relation=none, target_file_size_bytes=none, log_result=none, as_of=none) %}
  {%- set in_node = dbt_iceberg_maint._iceberg_maint_in_node() -%}
  {%- set health = adapter.dispatch('table_health', 'dbt_iceberg_maint')(
        relation=relation if relation is not none else this, target_file_size_bytes=target_file_size_bytes,
        log_result=log_result if log_result is not none else (true if in_node else none), as_of=as_of) -%}
  {{ return('' if in_node else health) }}
{% endmacro %}

{% macro default__table_health(relation=none, target_file_size_bytes=none, log_result=none, as_of=none) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.table_health is not implemented for adapter '" ~ adapter.type()
        ~ "'; it supports spark") }}
{% endmacro %}

{#- as_of: the reference time of oldest_snapshot_age_hours (UTC text; default now). -#}
{% macro spark__table_health(relation=none, target_file_size_bytes=none, log_result=none, as_of=none) %}
  {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(relation) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(
        dbt_iceberg_maint._iceberg_maint_parse_instant('table_health', 'as_of', as_of).errors) -%}
  {%- if target_file_size_bytes is not none and (target_file_size_bytes is boolean
        or target_file_size_bytes is not integer or target_file_size_bytes <= 0) -%}
    {{ exceptions.raise_compiler_error("table_health: target_file_size_bytes = " ~ tojson(target_file_size_bytes)
          ~ " is not allowed; expected a positive integer (bytes) or none") }}
  {%- endif -%}
  {%- if not execute -%}{{ return({}) }}{%- endif -%}
  {%- set started = dbt_iceberg_maint._iceberg_maint_now() -%}
  {%- set target = target_file_size_bytes -%}
  {%- if target is none -%}
    {%- set properties = dbt_iceberg_maint._iceberg_maint_table_properties(table) -%}
    {%- set target = properties.get('write.target-file-size-bytes', 536870912) | int -%}
  {%- endif -%}
  {%- set layout = dbt_iceberg_maint._iceberg_maint_table_layout(table) -%}
  {%- set sql = dbt_iceberg_maint.get_table_health_sql(table, target, layout['partition_fields'] | length > 0,
        as_of) -%}
  {%- set row = run_query(sql).rows[0] -%}
  {%- set health = {'table': table} -%}
  {%- for column in ['data_files', 'small_files', 'data_bytes', 'delete_files', 'records', 'snapshots',
                     'manifests', 'data_manifests', 'partitions', 'max_small_files_in_partition',
                     'deletion_vectors'] -%}
    {%- do health.update({column: row[column] | int}) -%}
  {%- endfor -%}
  {%- do health.update({'max_partition_delete_ratio': (row['max_partition_delete_ratio'] | float) | round(4)}) -%}
  {%- set age = row['oldest_snapshot_age_hours'] -%}
  {%- do health.update({
        'oldest_snapshot_age_hours': none if age is none else ((age | float) | round(3)),
        'target_file_size_bytes': target,
        'small_file_threshold_bytes': (target * 0.75) | int}) -%}
  {%- set should_log = log_result if log_result is not none else dbt_iceberg_maint._iceberg_maint_is_run_operation_of(
        'table_health') -%}
  {%- if should_log -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_result(table, 'table_health', 'success', sql=sql, metrics=health,
         duration_ms=dbt_iceberg_maint._iceberg_maint_elapsed_ms(started)) -%}
  {%- endif -%}
  {{ return(health) }}
{% endmacro %}

{#- Pure: one query, one row of health figures. -#}
{% macro get_table_health_sql(relation, target_file_size_bytes, partitioned=true, as_of=none) %}
  {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(relation) -%}
  {%- set instant = dbt_iceberg_maint._iceberg_maint_parse_instant('get_table_health_sql', 'as_of', as_of) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(instant.errors) -%}
  {%- set reference = 'current_timestamp()' if as_of is none
        else "timestamp '" ~ instant.value.strftime('%Y-%m-%d %H:%M:%S.%f') ~ "+00:00'" -%}
  {%- set small = (target_file_size_bytes * 0.75) | int -%}
  {#- Unpartitioned tables have no `partition` column in data_files: the table is one partition. -#}
  {%- set partition_key = 'spec_id, partition' if partitioned else 'spec_id' -%}
  {%- set sql -%}
with files as (
  select {{ partition_key }}, file_size_in_bytes, record_count from {{ table }}.data_files
), deletes as (
  select {{ partition_key }}, file_format, record_count from {{ table }}.delete_files
)
select
  (select count(*) from files) as data_files,
  (select count(*) from files where file_size_in_bytes < {{ small }}) as small_files,
  (select coalesce(sum(file_size_in_bytes), 0) from files) as data_bytes,
  (select coalesce(sum(record_count), 0) from files) as records,
  (select count(*) from deletes) as delete_files,
  (select count(*) from deletes where file_format = 'PUFFIN') as deletion_vectors,
  {{ dbt_iceberg_maint._iceberg_maint_max_delete_ratio_sql('files', 'deletes', partitioned) }} as max_partition_delete_ratio,
  (select count(*) from {{ table }}.snapshots) as snapshots,
  (select (unix_micros({{ reference }}) - unix_micros(min(committed_at))) / 3600000000.0
     from {{ table }}.snapshots) as oldest_snapshot_age_hours,
  (select count(*) from {{ table }}.manifests) as manifests,
  (select count(*) from {{ table }}.manifests where content = 0) as data_manifests,
  (select count(*) from {{ table }}.partitions) as partitions,
  {{ dbt_iceberg_maint._iceberg_maint_max_small_files_sql('files', small, partitioned) }} as max_small_files_in_partition
  {%- endset -%}
  {{ return(sql) }}
{% endmacro %}


{#- The most small files (below `small` bytes) in one partition of `files` (a data_files table or
    a query of it), as a scalar subquery. Unpartitioned tables have no `partition` column in
    data_files: the table is one partition. -#}
{% macro _iceberg_maint_max_small_files_sql(files, small, partitioned) %}
  {{ return('(select coalesce(max(small_files), 0) from (select count(*) as small_files from ' ~ files
      ~ ' where file_size_in_bytes < ' ~ small ~ ' group by ' ~ ('spec_id, partition' if partitioned else 'spec_id')
      ~ '))') }}
{% endmacro %}


{#- Deletion vectors (format v3: Puffin delete files, one per data file, record_count = the rows it
    deletes) and the greatest share of a partition's rows they delete: sum of their record_count
    over sum of the data files' record_count, per (spec_id, partition), as a scalar subquery (0 when
    there is none). `files` and `deletes`: data_files and delete_files tables or queries of them. -#}
{% macro _iceberg_maint_deletion_vectors_sql(table) %}
  {{ return("(select count(*) from " ~ table ~ ".delete_files where file_format = 'PUFFIN')") }}
{% endmacro %}

{% macro _iceberg_maint_max_delete_ratio_sql(files, deletes, partitioned) %}
  {%- set key = 'spec_id, partition' if partitioned else 'spec_id' -%}
  {%- set same = 'f.spec_id = d.spec_id' ~ (' and f.partition <=> d.partition' if partitioned else '') -%}
  {{ return('(select coalesce(max(d.deleted / f.records), cast(0 as double)) from (select ' ~ key
      ~ ', sum(record_count) as records from ' ~ files ~ ' group by ' ~ key ~ ') f join (select ' ~ key
      ~ ", sum(record_count) as deleted from " ~ deletes ~ " where file_format = 'PUFFIN' group by " ~ key
      ~ ') d on ' ~ same ~ ' where f.records > 0)') }}
{% endmacro %}
