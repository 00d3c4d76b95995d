{#- Generic test `dbt_iceberg_maint.iceberg_healthy`: one row per violated health threshold of an
    Iceberg table (columns table, check, value, threshold, message), so dbt's severity,
    warn_if/error_if and store_failures apply as to any test. The figures are read with
    run_query when the test executes (metadata first: the snapshot summary; the files and
    manifests tables only for the thresholds that need them) and the test's SQL is a SELECT of
    literal rows. Arguments are checked when the test executes, not while dbt parses the project:
    a mistake fails that test only, never the whole project's parse. -#}
{% test iceberg_healthy(model, max_small_files=none, max_small_files_in_partition=none, max_snapshots=none,
    max_delete_files=none, max_manifests=none, max_data_manifests=none, max_days_since_compaction=none,
    max_hours_since_compaction=none, max_days_since_expiry=none, max_hours_since_expiry=none,
    max_backlog_operations=none) %}
  {%- if execute -%}
    {#- Referencing kwargs makes the macro accept unknown keywords, so they are named below. -#}
    {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_healthy_errors({
          'max_small_files': max_small_files, 'max_small_files_in_partition': max_small_files_in_partition,
          'max_snapshots': max_snapshots, 'max_delete_files': max_delete_files, 'max_manifests': max_manifests,
          'max_data_manifests': max_data_manifests, 'max_days_since_compaction': max_days_since_compaction,
          'max_hours_since_compaction': max_hours_since_compaction, 'max_days_since_expiry': max_days_since_expiry,
          'max_hours_since_expiry': max_hours_since_expiry, 'max_backlog_operations': max_backlog_operations},
          kwargs)) -%}
  {%- endif -%}
  {{ return(adapter.dispatch('test_iceberg_healthy', 'dbt_iceberg_maint')(model, max_small_files,
      max_small_files_in_partition, max_snapshots, max_delete_files, max_manifests, max_data_manifests,
      max_days_since_compaction, max_hours_since_compaction, max_days_since_expiry, max_hours_since_expiry,
      max_backlog_operations)) }}
{% endtest %}

{% macro default__test_iceberg_healthy(model, max_small_files, max_small_files_in_partition, max_snapshots,
    max_delete_files, max_manifests, max_data_manifests, max_days_since_compaction, max_hours_since_compaction,
    max_days_since_expiry, max_hours_since_expiry, max_backlog_operations) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.iceberg_healthy is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__test_iceberg_healthy(model, max_small_files, max_small_files_in_partition, max_snapshots,
    max_delete_files, max_manifests, max_data_manifests, max_days_since_compaction, max_hours_since_compaction,
    max_days_since_expiry, max_hours_since_expiry, max_backlog_operations) %}
  {%- if not execute -%}{{ return(dbt_iceberg_maint._iceberg_maint_health_rows_sql([])) }}{%- endif -%}
  {%- set thresholds = {} -%}
  {%- for name, value in [['max_small_files', max_small_files],
        ['max_small_files_in_partition', max_small_files_in_partition], ['max_snapshots', max_snapshots],
        ['max_delete_files', max_delete_files], ['max_manifests', max_manifests],
        ['max_data_manifests', max_data_manifests], ['max_days_since_compaction', max_days_since_compaction],
        ['max_hours_since_compaction', max_hours_since_compaction], ['max_days_since_expiry', max_days_since_expiry],
        ['max_hours_since_expiry', max_hours_since_expiry], ['max_backlog_operations', max_backlog_operations]]
        if value is not none -%}
    {%- do thresholds.update({name: value}) -%}
  {%- endfor -%}
  {%- if model is string and model.strip().startswith('(') -%}
    {{ exceptions.raise_compiler_error("iceberg_healthy: the `where` config does not apply; the test checks the"
        ~ " whole table's metadata (got the subquery " ~ model ~ ")") }}
  {%- endif -%}
  {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(model, 'model') -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_health_rows_sql(dbt_iceberg_maint._iceberg_maint_health_violations(
      table, thresholds, dbt_iceberg_maint._iceberg_maint_healthy_figures(model, table, thresholds)))) }}
{% endmacro %}


{#- The thresholds iceberg_healthy accepts: name -> kind (count: a whole number >= 0; hours or
    days: a number > 0). -#}
{% macro _iceberg_maint_healthy_arguments() %}
  {{ return({'max_small_files': 'count', 'max_small_files_in_partition': 'count', 'max_snapshots': 'count',
      'max_delete_files': 'count', 'max_manifests': 'count', 'max_data_manifests': 'count',
      'max_days_since_compaction': 'days', 'max_hours_since_compaction': 'hours', 'max_days_since_expiry': 'days',
      'max_hours_since_expiry': 'hours', 'max_backlog_operations': 'count'}) }}
{% endmacro %}


{#- Pure: the problems of iceberg_healthy's arguments (given: name -> value, none = omitted;
    unknown: any other keywords), each naming the argument, the value and what is allowed. -#}
{% macro _iceberg_maint_healthy_errors(given, unknown={}) %}
  {%- set owner = 'iceberg_healthy' -%}
  {%- set kinds = dbt_iceberg_maint._iceberg_maint_healthy_arguments() -%}
  {%- set errors = [] -%}
  {%- for name in unknown | sort -%}
    {%- do errors.append(owner ~ ": unknown argument `" ~ name ~ "` (value " ~ tojson(unknown[name] | string)
          ~ "); allowed: " ~ kinds.keys() | join(', ')) -%}
  {%- endfor -%}
  {%- for name, kind in kinds.items() if given.get(name) is not none -%}
    {%- set value = given[name] -%}
    {%- set shown = tojson(value) if value is string else value -%}
    {%- if kind == 'count' and (value is boolean or value is not integer) -%}
      {%- do errors.append(owner ~ ": argument `" ~ name ~ "` is " ~ shown ~ "; expected a whole number >= 0") -%}
    {%- elif kind == 'count' and value < 0 -%}
      {%- do errors.append(owner ~ ": argument `" ~ name ~ "` is " ~ value ~ "; it must be >= 0") -%}
    {%- elif kind != 'count' and (value is boolean or value is not number) -%}
      {%- do errors.append(owner ~ ": argument `" ~ name ~ "` is " ~ shown ~ "; expected a number of " ~ kind
            ~ " greater than 0") -%}
    {%- elif kind != 'count' and value <= 0 -%}
      {%- do errors.append(owner ~ ": argument `" ~ name ~ "` is " ~ value ~ "; it must be greater than 0") -%}
    {%- elif kind != 'count' and value * (24 if kind == 'days' else 1) > 876000 -%}
      {%- do errors.append(owner ~ ": argument `" ~ name ~ "` is " ~ value ~ "; it must be at most 100 years") -%}
    {%- endif -%}
  {%- endfor -%}
  {%- for what in ['compaction', 'expiry'] -%}
    {%- if given.get('max_days_since_' ~ what) is not none and given.get('max_hours_since_' ~ what) is not none -%}
      {%- do errors.append(owner ~ ": give `max_days_since_" ~ what ~ "` or `max_hours_since_" ~ what
            ~ "`, not both") -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set named = namespace(any=false) -%}
  {%- for name in kinds if given.get(name) is not none -%}{%- set named.any = true -%}{%- endfor -%}
  {%- if not named.any -%}
    {%- do errors.append(owner ~ ": no threshold given; set at least one of " ~ kinds.keys() | join(', ')) -%}
  {%- endif -%}
  {{ return(errors) }}
{% endmacro %}


{#- What the thresholds need to know about the table, each read at most once and only when a
    threshold needs it: existence (SHOW NAMESPACES, SHOW TABLES), the table properties (SHOW
    TBLPROPERTIES: Iceberg or not, the target file size, the maintenance checks recorded), the
    snapshot summary (one query on the snapshots metadata table, for the current snapshot the
    properties name), and the deeper figures (one query on the data_files / manifests /
    delete_files tables) only for the thresholds the summary cannot answer: a table with no more
    data files than max_small_files has no more small files either. -#}
{% macro _iceberg_maint_healthy_figures(relation, table, thresholds) %}
  {%- if not dbt_iceberg_maint._iceberg_maint_table_exists(relation) -%}{{ return({'exists': false}) }}{%- endif -%}
  {%- set properties = dbt_iceberg_maint._iceberg_maint_table_properties(table) -%}
  {%- set format = properties.get('format', '') | lower -%}
  {%- if not format.startswith('iceberg') -%}
    {{ return({'exists': true, 'iceberg': false, 'format': properties.get('format') or properties.get('provider')}) }}
  {%- endif -%}
  {%- set timed = thresholds.get('max_days_since_compaction') is not none
        or thresholds.get('max_hours_since_compaction') is not none -%}
  {%- set figures = dbt_iceberg_maint._iceberg_maint_summary_figures(table, rewrite_age=timed, properties=properties) -%}
  {%- set target = properties.get('write.target-file-size-bytes', 536870912) | int -%}
  {%- set small = (target * 0.75) | int -%}
  {%- set data_files = figures.data_files -%}
  {%- set needs = {} -%}
  {%- for name in ['max_small_files', 'max_small_files_in_partition'] -%}
    {%- do needs.update({name: thresholds.get(name) is not none and (data_files is none or data_files > thresholds[name])}) -%}
  {%- endfor -%}
  {%- set deep = dbt_iceberg_maint._iceberg_maint_deep_figures(table,
        small if needs.max_small_files_in_partition else none,
        thresholds.get('max_data_manifests') is not none,
        thresholds.get('max_delete_files') is not none and figures.delete_files is none,
        small_files_below=small if needs.max_small_files else none,
        manifests=thresholds.get('max_manifests') is not none) -%}
  {%- do figures.update(deep) -%}
  {%- do figures.update({'exists': true, 'iceberg': true, 'small_file_threshold_bytes': small,
        'checked_hours_ago': dbt_iceberg_maint._iceberg_maint_checked_hours_ago(properties)}) -%}
  {%- if thresholds.get('max_backlog_operations') is not none -%}
    {%- do figures.update(dbt_iceberg_maint._iceberg_maint_backlog_figures(table)) -%}
  {%- endif -%}
  {{ return(figures) }}
{% endmacro %}


{#- Pure: the violated thresholds as rows {table, check, value, threshold, message}, in the order
    of _iceberg_maint_healthy_arguments. figures: what _iceberg_maint_healthy_figures read; a
    figure it did not need to read (the summary bounds it) is absent and cannot be violated.
    A table that does not exist or is not Iceberg is one row (check table_exists or
    iceberg_table): there is no health to read, and the test must not pass silently.
    Days since compaction: the newest of the newest rewrite_data_files snapshot (any tool's
    compaction) and the table property dbt-iceberg-maint.checked-at.rewrite_data_files (maintain()
    or iceberg_maintenance ran it, or found it not due); with neither, the age of the oldest
    retained snapshot (no compaction in that history). Days since expiry: expire_snapshots
    commits no snapshot, so only its checked-at property, else the oldest retained snapshot's age.
    A table without snapshots has no age: those checks pass. -#}
{% macro _iceberg_maint_health_violations(table, thresholds, figures) %}
  {%- set rows = [] -%}
  {%- if not figures.get('exists', true) -%}
    {{ return([{'table': table, 'check': 'table_exists', 'value': none, 'threshold': none,
        'message': table ~ ' does not exist (or is not a table): there is no health to check'}]) }}
  {%- endif -%}
  {%- if not figures.get('iceberg', true) -%}
    {{ return([{'table': table, 'check': 'iceberg_table', 'value': none, 'threshold': none,
        'message': table ~ ' is not an Iceberg table (format ' ~ (figures.get('format') or 'unknown')
          ~ '): iceberg_healthy reads Iceberg metadata tables'}]) }}
  {%- endif -%}
  {%- set small = figures.get('small_file_threshold_bytes') -%}
  {%- set counts = {
        'max_small_files': ['small_files', 'small data files (under ' ~ small ~ ' bytes)',
          'rewrite_data_files (compaction) merges them'],
        'max_small_files_in_partition': ['max_small_files_in_partition',
          'small data files (under ' ~ small ~ ' bytes) in its worst partition', 'rewrite_data_files (compaction) merges them'],
        'max_snapshots': ['snapshots', 'snapshots', 'expire_snapshots removes old ones'],
        'max_delete_files': ['delete_files', 'delete files', 'rewrite_data_files or rewrite_position_delete_files applies them'],
        'max_manifests': ['manifests', 'manifests', 'rewrite_manifests merges them'],
        'max_data_manifests': ['data_manifests', 'data manifests', 'rewrite_manifests merges them']} -%}
  {%- for name, kind in dbt_iceberg_maint._iceberg_maint_healthy_arguments().items()
        if thresholds.get(name) is not none -%}
    {%- set limit = thresholds[name] -%}
    {%- if name == 'max_backlog_operations' -%}
      {%- do rows.extend(dbt_iceberg_maint._iceberg_maint_backlog_violations(table, limit, figures)) -%}
    {%- elif kind == 'count' -%}
      {%- set figure, noun, fix = counts[name] -%}
      {%- set value = figures.get(figure) -%}
      {%- if value is not none and value > limit -%}
        {%- do rows.append({'table': table, 'check': name, 'value': value, 'threshold': limit,
              'message': table ~ ' has ' ~ value ~ ' ' ~ noun ~ ', more than ' ~ limit ~ ' (' ~ fix ~ ')'}) -%}
      {%- endif -%}
    {%- else -%}
      {%- set operation = 'rewrite_data_files' if name.endswith('compaction') else 'expire_snapshots' -%}
      {%- set checked = (figures.get('checked_hours_ago') or {}).get(operation) -%}
      {%- set rewrite = figures.get('hours_since_rewrite_data_files') if operation == 'rewrite_data_files' else none -%}
      {%- set known = [checked, rewrite] | reject('none') | list -%}
      {%- set hours = known | min if known else figures.get('oldest_snapshot_age_hours') -%}
      {%- set per = 24 if kind == 'days' else 1 -%}
      {%- if hours is not none and hours > limit * per -%}
        {%- set value = (hours / per) | round(2) -%}
        {%- set ago = value ~ ' ' ~ kind -%}
        {%- if not known -%}
          {%- set what = 'no ' ~ operation ~ ' recorded (no compaction snapshot in its history, ' if operation == 'rewrite_data_files'
                else 'no ' ~ operation ~ ' recorded (' -%}
          {%- set detail = what ~ 'no dbt-iceberg-maint.checked-at.' ~ operation ~ ' property) while its oldest snapshot is '
                ~ ago ~ ' old' -%}
        {%- elif checked is not none and checked == hours -%}
          {%- set detail = 'maintenance last ran or checked ' ~ operation ~ ' ' ~ ago ~ ' ago (property dbt-iceberg-maint.checked-at.'
                ~ operation ~ ')' -%}
        {%- else -%}
          {%- set detail = 'its last compaction (a rewrite_data_files snapshot) was ' ~ ago ~ ' ago' -%}
        {%- endif -%}
        {%- do rows.append({'table': table, 'check': name, 'value': value, 'threshold': limit,
              'message': table ~ ': ' ~ detail ~ ', more than ' ~ limit ~ ' ' ~ kind}) -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(rows) }}
{% endmacro %}


{#- Pure: the test's SELECT over the rows (literals); no rows is a SELECT that returns none with
    the same columns. The column names are backquoted: `table` and `check` are SQL keywords. -#}
{% macro _iceberg_maint_health_rows_sql(rows) %}
  {%- set literal = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {%- set number = 'cast(null as double)' -%}
  {%- if not rows -%}
    {{ return('select cast(null as string) as `table`, cast(null as string) as `check`, ' ~ number ~ ' as `value`, '
        ~ number ~ ' as `threshold`, cast(null as string) as `message` where false') }}
  {%- endif -%}
  {%- set selects = [] -%}
  {%- for row in rows -%}
    {%- do selects.append('select ' ~ literal(row.table) ~ ' as `table`, ' ~ literal(row.check) ~ ' as `check`, '
          ~ (number if row.value is none else 'cast(' ~ row.value ~ ' as double)') ~ ' as `value`, '
          ~ (number if row.threshold is none else 'cast(' ~ row.threshold ~ ' as double)') ~ ' as `threshold`, '
          ~ literal(row.message) ~ ' as `message`') -%}
  {%- endfor -%}
  {{ return(selects | join('\nunion all\n')) }}
{% endmacro %}


{#- The backlog the last maintenance run left on `table`, read from the maintenance history
    (docs/history.md): the run is the newest run_id with a row for the table in the last 7 days
    (the history is partitioned by day); its backlog, the operations whose latest row in that run
    is a skip whose reason starts with the protocol's backlog prefix (the fleet engine's budget
    closed before they started; a resumed run, same run id, that did them ends it). With no
    history table the figure is unknown, which fails the threshold (a check that can never fire
    would pass silently). -#}
{% macro _iceberg_maint_backlog_figures(table) %}
  {%- set history = dbt_iceberg_maint._iceberg_maint_history_settings() -%}
  {%- if not dbt_iceberg_maint._iceberg_maint_table_exists(history.relation) -%}
    {{ return({'backlog_history_missing': history.relation}) }}
  {%- endif -%}
  {%- set rows = run_query(dbt_iceberg_maint._iceberg_maint_backlog_sql(history.relation, table)).rows -%}
  {%- if not rows or rows[0][0] is none -%}
    {{ return({'backlog_operations': 0, 'backlog_run_id': none}) }}
  {%- endif -%}
  {{ return({'backlog_run_id': rows[0][0], 'backlog_operations': rows[0][1] | int,
      'backlog_list': rows[0][2] or ''}) }}
{% endmacro %}


{#- Pure: one row (run_id, backlog count, the backlog's operations) for the newest run that
    recorded `table` in the history `relation` within 7 days; no row when none did. -#}
{% macro _iceberg_maint_backlog_sql(relation, table) %}
  {%- set literal = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {%- set backlog = "status = 'skipped' and reason like "
        ~ literal(dbt_iceberg_maint._iceberg_maint_protocol().backlog_reason_prefix ~ '%') -%}
  {{ return("with steps as (
  select run_id, operation, started_at, case when " ~ backlog ~ " then 1 else 0 end as backlog
  from " ~ relation ~ "
  where lower(table_name) = " ~ literal(table | lower) ~ " and started_at >= current_timestamp() - interval 7 days
),
latest as (select max_by(run_id, started_at) as run_id from steps),
operations as (
  select s.run_id, s.operation, max_by(s.backlog, s.started_at) as backlog
  from steps s join latest l on s.run_id = l.run_id group by s.run_id, s.operation
)
select run_id, sum(backlog) as backlog,
       concat_ws(', ', sort_array(collect_list(case when backlog = 1 then operation end))) as operations
from operations group by run_id") }}
{% endmacro %}


{#- Pure: the max_backlog_operations row, if violated. -#}
{% macro _iceberg_maint_backlog_violations(table, limit, figures) %}
  {%- if figures.get('backlog_history_missing') -%}
    {{ return([{'table': table, 'check': 'max_backlog_operations', 'value': none, 'threshold': limit,
        'message': table ~ ': no maintenance history (table ' ~ figures.backlog_history_missing ~ ' does not exist), '
          ~ 'so the backlog of its last maintenance run cannot be read'}]) }}
  {%- endif -%}
  {%- set value = figures.get('backlog_operations') -%}
  {%- if value is none or value <= limit -%}{{ return([]) }}{%- endif -%}
  {{ return([{'table': table, 'check': 'max_backlog_operations', 'value': value, 'threshold': limit,
      'message': table ~ ': the last maintenance run (' ~ figures.backlog_run_id ~ ') left ' ~ value
        ~ ' operation(s) as backlog (' ~ figures.backlog_list ~ '), more than ' ~ limit
        ~ ' (its budget closed before they started; a longer --budget or more --concurrency reaches them)'}]) }}
{% endmacro %}
