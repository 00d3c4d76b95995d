{#- A Spark SQL predicate (accepted by rewrite_data_files' `where`) selecting exactly the
    partitions not written for `quiet_hours`, or none when nothing is cold.

    A partition is cold when its `partitions.last_updated_at` (commit time of its newest file)
    is older than now - quiet_hours; when that snapshot was expired, the oldest retained
    snapshot's commit time stands in (the partition is at least that old).
    Each cold partition becomes a range on the source column: identity -> `col = literal` (or
    `col is null`), years/months/days/hours(ts) -> `(ts >= lo and ts < hi)` with UTC bounds.
    Partitions that cannot be expressed exactly (bucket, truncate, unknown transforms, unsupported
    types, partitions written under an older partition spec) are left out, never widened.
    An unpartitioned table is one partition: `true` when it is cold as a whole, else none.
    as_of: the reference time, 'YYYY-MM-DD HH:MM:SS[.ffffff]' in UTC (default: now), so that a
    job can judge all its tables against its own start time. -#}
{% macro cold_partitions_where(relation, quiet_hours, as_of=none) %}
  {{ return(adapter.dispatch('cold_partitions_where', 'dbt_iceberg_maint')(
      relation=relation, quiet_hours=quiet_hours, as_of=as_of)) }}
{% endmacro %}

{% macro default__cold_partitions_where(relation, quiet_hours, as_of=none) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.cold_partitions_where is not implemented for adapter '"
        ~ adapter.type() ~ "'; it supports spark") }}
{% endmacro %}

{% macro spark__cold_partitions_where(relation, quiet_hours, as_of=none) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_cold_scope(relation, quiet_hours, as_of).where) }}
{% endmacro %}


{#- {'where': the cold-partition predicate or none, 'max_small_files': the most files below
    `small_file_threshold_bytes` in one partition the predicate selects (none when no threshold
    is given), 'max_delete_ratio': with delete_ratio, the greatest share of such a partition's rows
    deletion vectors delete (an unpartitioned table's whole share; else none), 'partitioned': whether
    the table has partition fields (an unpartitioned one is cold or not as a whole)}: compaction is
    due only when a partition it may touch has enough small files or deleted rows. -#}
{% macro _iceberg_maint_cold_scope(relation, quiet_hours, as_of=none, small_file_threshold_bytes=none,
    delete_ratio=false) %}
  {%- if quiet_hours is boolean or quiet_hours is not number or quiet_hours <= 0 -%}
    {{ exceptions.raise_compiler_error("cold_partitions_where: quiet_hours = " ~ tojson(quiet_hours)
          ~ " is not allowed; expected a number of hours greater than 0") }}
  {%- endif -%}
  {%- if as_of is not none and (as_of is not string
        or not modules.re.fullmatch('\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}(\\.\\d{1,6})?', as_of)) -%}
    {{ exceptions.raise_compiler_error("cold_partitions_where: as_of = " ~ tojson(as_of)
          ~ " is not allowed; expected none or a UTC time 'YYYY-MM-DD HH:MM:SS[.ffffff]'") }}
  {%- endif -%}
  {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(relation) -%}
  {%- if not execute -%}
    {{ return({'where': none, 'max_small_files': none, 'max_delete_ratio': none, 'partitioned': none}) }}
  {%- endif -%}
  {%- set reference = 'current_timestamp()' if as_of is none else "timestamp '" ~ as_of ~ "+00:00'" -%}
  {%- set layout = dbt_iceberg_maint._iceberg_maint_table_layout(table) -%}
  {%- set quiet_micros = (quiet_hours * 3600000000) | int -%}
  {%- set cold_condition -%}
    unix_micros(coalesce(last_updated_at, (select min(committed_at) from {{ table }}.snapshots)))
      < unix_micros({{ reference }}) - {{ quiet_micros }}
  {%- endset -%}
  {%- set small = (small_file_threshold_bytes | int) if small_file_threshold_bytes is not none else 0 -%}
  {%- if layout['partition_fields'] | length == 0 -%}
    {%- set ratio_sql = (", (select coalesce(sum(d.record_count), 0) from " ~ table ~ ".delete_files d where "
          ~ "d.file_format = 'PUFFIN') / (select sum(f.record_count) from " ~ table ~ ".data_files f) as delete_ratio")
          if delete_ratio else '' -%}
    {%- set rows = run_query('select count(*) as total, count_if(' ~ cold_condition
          ~ ') as cold, (select count_if(file_size_in_bytes < ' ~ small ~ ') from ' ~ table
          ~ '.data_files) as small_files' ~ ratio_sql ~ ' from ' ~ table ~ '.partitions').rows -%}
    {%- set cold = rows[0]['total'] | int > 0 and rows[0]['total'] | int == rows[0]['cold'] | int -%}
    {{ return({'where': 'true' if cold else none,
               'max_small_files': none if small_file_threshold_bytes is none else ((rows[0]['small_files'] | int)
                   if cold else 0),
               'max_delete_ratio': none if not delete_ratio else (((rows[0]['delete_ratio'] or 0) | float)
                   if cold else 0.0), 'partitioned': false}) }}
  {%- endif -%}
  {#- A row belongs to the current spec only if its spec has as many fields as the current one
      (the field count of each spec comes from its manifests' partition_summaries); rows of
      older specs are left out, as the partition struct is the union of every spec's fields. -#}
  {%- set query -%}
    with spec_fields as (
      select partition_spec_id as spec_id, max(size(partition_summaries)) as fields
      from {{ table }}.manifests group by partition_spec_id
    ), small as (
      select partition, count(*) as small_files from {{ table }}.data_files
      where file_size_in_bytes < {{ small }} group by partition
    ){% if delete_ratio %}, ratios as (
      select r.partition, d.deleted / r.records as delete_ratio
      from (select partition, sum(record_count) as records from {{ table }}.data_files group by partition) as r
        join (select partition, sum(record_count) as deleted from {{ table }}.delete_files
              where file_format = 'PUFFIN' group by partition) as d on r.partition <=> d.partition
      where r.records > 0
    ){% endif %}
    select to_json(p.partition, map('ignoreNullFields', 'false')) as partition_json, s.fields as spec_fields,
           coalesce(f.small_files, 0) as small_files{% if delete_ratio %},
           coalesce(x.delete_ratio, cast(0 as double)) as delete_ratio{% endif %}
    from {{ table }}.partitions as p left join spec_fields as s on p.spec_id = s.spec_id
      left join small as f on p.partition <=> f.partition{% if delete_ratio %}
      left join ratios as x on p.partition <=> x.partition{% endif %}
    where {{ cold_condition }}
  {%- endset -%}
  {%- set partitions = [] -%}
  {%- set largest = namespace(small_files=0, delete_ratio=0.0) -%}
  {%- for row in run_query(query) -%}
    {%- set partition = fromjson(row['partition_json']) -%}
    {#- Counted only where the predicate can select the partition: compaction touches nothing else. -#}
    {%- if row['spec_fields'] is not none and row['spec_fields'] | int == layout['partition_fields'] | length
          and dbt_iceberg_maint.get_partitions_where_sql(layout['partition_fields'], layout['columns'],
              [partition]) is not none -%}
      {%- do partitions.append(partition) -%}
      {%- set largest.small_files = [largest.small_files, row['small_files'] | int] | max -%}
      {%- if delete_ratio -%}
        {%- set largest.delete_ratio = [largest.delete_ratio, row['delete_ratio'] | float] | max -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return({'where': dbt_iceberg_maint.get_partitions_where_sql(layout['partition_fields'], layout['columns'],
        partitions),
             'max_small_files': none if small_file_threshold_bytes is none else largest.small_files,
             'max_delete_ratio': largest.delete_ratio if delete_ratio else none, 'partitioned': true}) }}
{% endmacro %}

{#- Pure: OR of one conjunction per partition (values given as dicts in spec order); partitions
    with any field that cannot be expressed are left out; none when none is left. -#}
{% macro get_partitions_where_sql(partition_fields, columns, partitions) %}
  {%- set terms = [] -%}
  {%- for partition in partitions -%}
    {%- set values = partition.values() | list -%}
    {%- if values | length == partition_fields | length -%}
      {%- set parts = [] -%}
      {%- for field in partition_fields -%}
        {%- set part = dbt_iceberg_maint.get_partition_range_sql(field['transform'], field['column'],
              columns.get(field['column']), values[loop.index0]) -%}
        {%- if part is not none -%}{%- do parts.append(part) -%}{%- endif -%}
      {%- endfor -%}
      {%- if parts | length == partition_fields | length -%}
        {%- set term = parts | join(' and ') -%}
        {%- do terms.append('(' ~ term ~ ')' if parts | length > 1 else term) -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(terms | unique | join(' or ') if terms | length > 0 else none) }}
{% endmacro %}
