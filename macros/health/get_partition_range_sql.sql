{#- Pure: a predicate on the source column selecting exactly one partition value of a field.
    identity -> col = literal; years/months/days/hours -> (col >= lo and col < hi), bounds in UTC
    (Iceberg computes time transforms of timestamps in UTC); null -> col is null.
    Returns none for what cannot be expressed exactly (bucket, truncate, unknown transforms or
    column types, a value of the wrong shape). -#}
{% macro get_partition_range_sql(transform, column, column_type, value) %}
  {%- if column is none or column_type is none -%}{{ return(none) }}{%- endif -%}
  {%- set col = column if modules.re.fullmatch('[A-Za-z_][A-Za-z0-9_]*', column) else '`' ~ column | replace('`', '``')
        ~ '`' -%}
  {%- set type = column_type | lower -%}
  {%- if transform not in ['identity', 'years', 'months', 'days', 'hours', 'year', 'month', 'day', 'hour'] -%}
    {{ return(none) }}
  {%- endif -%}
  {%- if value is none -%}{{ return(col ~ ' is null') }}{%- endif -%}
  {%- if transform == 'identity' -%}
    {{ return(dbt_iceberg_maint._iceberg_maint_identity_sql(col, type, value)) }}
  {%- endif -%}
  {%- set dt = modules.datetime -%}
  {%- set kind = transform.rstrip('s') -%}
  {%- if kind == 'day' -%}
    {%- if value is not string or not modules.re.fullmatch('\\d{4}-\\d{2}-\\d{2}',
          value) -%}{{ return(none) }}{%- endif -%}
    {%- set lo = dt.datetime.strptime(value, '%Y-%m-%d') -%}
    {%- set hi = lo + dt.timedelta(days=1) -%}
  {%- elif value is boolean or value is not integer -%}
    {{ return(none) }}
  {%- elif kind == 'hour' -%}
    {%- set lo = dt.datetime(1970, 1, 1) + dt.timedelta(hours=value) -%}
    {%- set hi = lo + dt.timedelta(hours=1) -%}
  {%- elif kind == 'month' -%}
    {%- set lo = dt.datetime(1970 + value // 12, value % 12 + 1, 1) -%}
    {%- set hi = dt.datetime(1970 + (value + 1) // 12, (value + 1) % 12 + 1, 1) -%}
  {%- else -%}
    {%- set lo = dt.datetime(1970 + value, 1, 1) -%}
    {%- set hi = dt.datetime(1971 + value, 1, 1) -%}
  {%- endif -%}
  {%- if type == 'date' and kind != 'hour' -%}
    {%- set fmt, prefix, suffix = '%Y-%m-%d', 'date', '' -%}
  {%- elif type == 'timestamp' -%}
    {%- set fmt, prefix, suffix = '%Y-%m-%d %H:%M:%S', 'timestamp', '+00:00' -%}
  {%- elif type == 'timestamp_ntz' -%}
    {%- set fmt, prefix, suffix = '%Y-%m-%d %H:%M:%S', 'timestamp_ntz', '' -%}
  {%- else -%}
    {{ return(none) }}
  {%- endif -%}
  {{ return('(' ~ col ~ " >= " ~ prefix ~ " '" ~ lo.strftime(fmt) ~ suffix ~ "' and " ~ col ~ " < " ~ prefix ~ " '"
        ~ hi.strftime(fmt) ~ suffix ~ "')") }}
{% endmacro %}

{% macro _iceberg_maint_identity_sql(col, type, value) %}
  {%- if type in ['string'] or type.startswith('varchar') or type.startswith('char') -%}
    {#- A value with ';' or comment markers would make the whole `where` fail the procedures'
        fragment check: leave that partition out rather than abort the maintenance run. -#}
    {%- if value is not string
          or dbt_iceberg_maint._iceberg_maint_fragment_problems(value) -%}{{ return(none) }}{%- endif -%}
    {{ return(col ~ ' = ' ~ dbt_iceberg_maint._iceberg_maint_string_literal(value)) }}
  {%- elif type == 'boolean' -%}
    {{ return(col ~ ' = ' ~ ('true' if value else 'false')) if value is boolean else return(none) }}
  {%- elif type in ['tinyint', 'smallint', 'int', 'integer', 'bigint'] -%}
    {{ return(col ~ ' = ' ~ value) if value is integer and value is not boolean else return(none) }}
  {%- elif type == 'date' -%}
    {{ return(col ~ " = date '" ~ value ~ "'") if value is string and modules.re.fullmatch('\\d{4}-\\d{2}-\\d{2}',
          value) else return(none) }}
  {%- endif -%}
  {#- decimal/float/double (JSON numbers are floats: inexact), timestamps (to_json drops
      precision), binary and nested types: left out. -#}
  {{ return(none) }}
{% endmacro %}
