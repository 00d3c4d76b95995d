{#- Iceberg `expire_snapshots`: drop snapshots older than `older_than_hours` while keeping at
    least `retain_last`, and delete the files only they referenced. -#}

{% macro get_expire_snapshots_sql(relation=none, older_than_hours=none, retain_last=none, max_concurrent_deletes=none,
                                  stream_results=none, snapshot_ids=none, clean_expired_metadata=none,
                                      older_than=none) %}
  {{ return(adapter.dispatch('get_expire_snapshots_sql', 'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, older_than_hours=older_than_hours, retain_last=retain_last,
      max_concurrent_deletes=max_concurrent_deletes, stream_results=stream_results, snapshot_ids=snapshot_ids,
      clean_expired_metadata=clean_expired_metadata, older_than=older_than)) }}
{% endmacro %}

{% macro default__get_expire_snapshots_sql(relation, older_than_hours, retain_last, max_concurrent_deletes,
      stream_results,
                                           snapshot_ids, clean_expired_metadata, older_than=none) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.get_expire_snapshots_sql is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{#- older_than (an absolute UTC instant) or older_than_hours (before now); older_than_hours 0
    means now, i.e. no age limit: every snapshot but the newest retain_last expires. It renders
    as the latest instant Spark knows, so a step planned before a compaction and executed after
    it also expires the compaction's own snapshots (a cut-off of "now" taken at planning time
    would keep them). -#}
{% macro spark__get_expire_snapshots_sql(relation, older_than_hours, retain_last, max_concurrent_deletes,
      stream_results,
                                         snapshot_ids, clean_expired_metadata, older_than=none) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_expire_snapshots_errors(
        older_than_hours=older_than_hours, retain_last=retain_last, max_concurrent_deletes=max_concurrent_deletes,
        stream_results=stream_results, snapshot_ids=snapshot_ids, clean_expired_metadata=clean_expired_metadata,
        older_than=older_than)) -%}
  {%- set lit = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {%- set arguments = [['table', lit(dbt_iceberg_maint._iceberg_maint_table_name(relation))]] -%}
  {%- if older_than is not none -%}
    {%- set instant = dbt_iceberg_maint._iceberg_maint_parse_instant('expire_snapshots', 'older_than',
          older_than).value -%}
    {%- do arguments.append(['older_than', dbt_iceberg_maint._iceberg_maint_timestamp_literal(instant)]) -%}
  {%- elif older_than_hours is not none and older_than_hours == 0 -%}
    {%- do arguments.append(['older_than', dbt_iceberg_maint._iceberg_maint_no_age_limit()]) -%}
  {%- elif older_than_hours is not none -%}
    {%- do arguments.append(['older_than', dbt_iceberg_maint._iceberg_maint_timestamp_hours_ago(older_than_hours)]) -%}
  {%- endif -%}
  {%- if retain_last is not none -%}{%- do arguments.append(['retain_last', retain_last | string]) -%}{%- endif -%}
  {%- if max_concurrent_deletes is not none -%}
    {%- do arguments.append(['max_concurrent_deletes', max_concurrent_deletes | string]) -%}
  {%- endif -%}
  {%- if stream_results is not none -%}
    {%- do arguments.append(['stream_results', dbt_iceberg_maint._iceberg_maint_boolean_literal(stream_results)]) -%}
  {%- endif -%}
  {#- Iceberg declares array<bigint>; the L suffix keeps small ids from typing the array as int. -#}
  {%- if snapshot_ids is not none -%}
    {%- do arguments.append(['snapshot_ids', 'array(' ~ snapshot_ids | map('string') | join('L, ') ~ 'L)']) -%}
  {%- endif -%}
  {%- if clean_expired_metadata is not none -%}
    {%- do arguments.append(['clean_expired_metadata',
          dbt_iceberg_maint._iceberg_maint_boolean_literal(clean_expired_metadata)]) -%}
  {%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_call_sql(relation, 'expire_snapshots', arguments)) }}
{% endmacro %}


{#- older_than_hours 0: no age limit (Spark's latest timestamp). -#}
{% macro _iceberg_maint_no_age_limit() %}
  {{ return("TIMESTAMP '9999-12-31 23:59:59Z'") }}
{% endmacro %}


{% macro _iceberg_maint_expire_snapshots_errors(older_than_hours=none, retain_last=none, max_concurrent_deletes=none,
                                                stream_results=none, snapshot_ids=none, clean_expired_metadata=none,
                                                older_than=none) %}
  {%- set proc = 'expire_snapshots' -%}
  {%- set errors = [] -%}
  {%- if older_than_hours is not none and (older_than_hours is boolean or older_than_hours is not number) -%}
    {%- do errors.append(proc ~ ": argument `older_than_hours` is " ~ older_than_hours
          ~ "; expected a number of hours >= 0 (0 means now: every snapshot but the newest retain_last)") -%}
  {%- elif older_than_hours is not none and older_than_hours < 0 -%}
    {%- do errors.append(proc ~ ": argument `older_than_hours` is " ~ older_than_hours
          ~ "; it must be 0 or more (0 means now: every snapshot but the newest retain_last)") -%}
  {%- endif -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_hours_bound(proc, 'older_than_hours', older_than_hours)) -%}
  {%- set instant_errors = dbt_iceberg_maint._iceberg_maint_parse_instant(proc, 'older_than', older_than).errors -%}
  {%- do errors.extend(instant_errors) -%}
  {%- if older_than is not none and older_than_hours is not none and not instant_errors -%}
    {%- do errors.append(proc ~ ": arguments `older_than` (" ~ older_than ~ ") and `older_than_hours` ("
          ~ older_than_hours ~ ") are both given; give one cut-off") -%}
  {%- endif -%}
  {%- if retain_last is not none and (retain_last is boolean or retain_last is not integer or retain_last < 1) -%}
    {%- do errors.append(proc ~ ": argument `retain_last` is " ~ retain_last
          ~ "; it must be a whole number of at least 1 (Iceberg always keeps the current snapshot)") -%}
  {%- endif -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_positive_number(proc, 'max_concurrent_deletes',
        max_concurrent_deletes, integer=true)) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_boolean(proc, 'stream_results', stream_results)) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_boolean(proc, 'clean_expired_metadata',
        clean_expired_metadata)) -%}
  {%- if snapshot_ids is not none -%}
    {%- set valid = snapshot_ids is iterable and snapshot_ids is not string and snapshot_ids is not mapping
          and snapshot_ids | length > 0 -%}
    {%- if valid -%}
      {%- for snapshot_id in snapshot_ids -%}
        {%- if snapshot_id is boolean
              or snapshot_id is not integer -%}{%- set valid = false -%}{%- do errors.append(proc
              ~ ": argument `snapshot_ids` contains " ~ snapshot_id
              ~ "; snapshot ids are whole numbers") -%}{%- endif -%}
      {%- endfor -%}
    {%- else -%}
      {%- do errors.append(proc ~ ": argument `snapshot_ids` is " ~ snapshot_ids
            ~ "; expected a non-empty list of snapshot ids") -%}
    {%- endif -%}
  {%- endif -%}
  {{ return(errors) }}
{% endmacro %}


{% macro expire_snapshots(relation=none, older_than_hours=none, retain_last=none, max_concurrent_deletes=none,
                          stream_results=none, snapshot_ids=none, clean_expired_metadata=none, dry_run=false,
                          older_than=none) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_outside_node(adapter.dispatch('expire_snapshots', 'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, older_than_hours=older_than_hours, retain_last=retain_last,
      max_concurrent_deletes=max_concurrent_deletes, stream_results=stream_results, snapshot_ids=snapshot_ids,
      clean_expired_metadata=clean_expired_metadata, dry_run=dry_run, older_than=older_than))) }}
{% endmacro %}

{% macro default__expire_snapshots(relation, older_than_hours, retain_last, max_concurrent_deletes, stream_results,
                                   snapshot_ids, clean_expired_metadata, dry_run, older_than=none) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.expire_snapshots is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__expire_snapshots(relation, older_than_hours, retain_last, max_concurrent_deletes, stream_results,
                                 snapshot_ids, clean_expired_metadata, dry_run, older_than=none) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(
        dbt_iceberg_maint._iceberg_maint_check_boolean('expire_snapshots', 'dry_run', dry_run)) -%}
  {%- set sql = dbt_iceberg_maint.get_expire_snapshots_sql(relation=relation, older_than_hours=older_than_hours,
        retain_last=retain_last, max_concurrent_deletes=max_concurrent_deletes, stream_results=stream_results,
        snapshot_ids=snapshot_ids, clean_expired_metadata=clean_expired_metadata, older_than=older_than) -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_run_procedure(relation, 'expire_snapshots', sql, dry_run)) }}
{% endmacro %}


{#- ---- As a maintenance step (get_maintenance_plan) ---------------------------------------- -#}

{% macro _iceberg_maint_expire_snapshots_defaults() %}
  {{ return({'enabled': true, 'older_than_hours': 168, 'older_than': none, 'retain_last': 5,
             'clean_expired_metadata': none, 'max_concurrent_deletes': none, 'stream_results': none,
             'retain_metadata_files': none, 'interval_hours': none}) }}
{% endmacro %}

{#- An absolute older_than in the policy wins over older_than_hours (which has a default).
    retain_metadata_files is the policy's own (no procedure argument): _iceberg_maint_metadata_retention. -#}
{% macro _iceberg_maint_expire_snapshots_policy_errors(section) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_expire_snapshots_errors(
      older_than_hours=section.older_than_hours if section.older_than is none else none,
      retain_last=section.retain_last, max_concurrent_deletes=section.max_concurrent_deletes,
      stream_results=section.stream_results, clean_expired_metadata=section.clean_expired_metadata,
      older_than=section.older_than)
      + dbt_iceberg_maint._iceberg_maint_retain_metadata_files_errors(section.retain_metadata_files)) }}
{% endmacro %}

{#- Iceberg reads write.metadata.previous-versions-max as a Java int: a larger value would fail
    the ALTER TABLE after the expiry had run. Twin: policy/operations.py retain_metadata_files_errors. -#}
{% macro _iceberg_maint_retain_metadata_files_errors(value) %}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_check_positive_number('expire_snapshots', 'retain_metadata_files',
        value, integer=true) -%}
  {%- if not errors and value is not none and value > 2147483647 -%}
    {%- do errors.append("expire_snapshots: argument `retain_metadata_files` is " ~ value
          ~ "; it must be at most 2147483647 (Iceberg reads write.metadata.previous-versions-max as an int)") -%}
  {%- endif -%}
  {{ return(errors) }}
{% endmacro %}

{#- Pure: the table properties an expiry that ran sets when the policy's `retain_metadata_files` is N:
    Iceberg then keeps the N newest previous metadata files and deletes older ones at each commit
    (this one first), which expire_snapshots never deletes. A reader misses the metadata file it
    found only if more than N commits come before it reads it. {} when unset. -#}
{% macro _iceberg_maint_metadata_retention(section) %}
  {%- if section.get('retain_metadata_files') is none -%}{{ return({}) }}{%- endif -%}
  {{ return({'write.metadata.delete-after-commit.enabled': 'true',
      'write.metadata.previous-versions-max': section.retain_metadata_files | string}) }}
{% endmacro %}

{#- Due when more than retain_last snapshots exist and the oldest is past the cut-off:
    older_than_hours before the plan's reference time, or the absolute `older_than`
    (health.hours_since_older_than, computed by the plan). older_than_hours 0 has no age limit,
    and a rewrite planned before it (health.rewrites_planned) makes it due even at retain_last
    snapshots: the rewrite's own commits add snapshots it then expires. -#}
{% macro _iceberg_maint_expire_snapshots_due(section, health) %}
  {%- set keep = section.retain_last -%}
  {%- set count = health.snapshots | int -%}
  {%- set age = health.oldest_snapshot_age_hours -%}
  {%- if section.older_than is not none -%}
    {%- set hours = health.get('hours_since_older_than', 0) -%}
    {%- set limit = 'older_than ' ~ section.older_than -%}
  {%- else -%}
    {%- set hours = section.older_than_hours -%}
    {%- set limit = hours ~ ' h' -%}
  {%- endif -%}
  {%- set no_age_limit = section.older_than is none and hours == 0 -%}
  {%- if count <= keep and no_age_limit and health.get('rewrites_planned') -%}
    {{ return({'due': true, 'reason': count ~ ' snapshots plus those ' ~ health.rewrites_planned | join(' and ')
        ~ ' commits first (older_than_hours 0: only the newest retain_last ' ~ keep ~ ' stay)'}) }}
  {%- elif count <= keep -%}
    {{ return({'due': false, 'reason': 'only ' ~ count ~ ' snapshots, not more than retain_last ' ~ keep}) }}
  {%- elif no_age_limit -%}
    {{ return({'due': true, 'reason': count ~ ' snapshots (> retain_last ' ~ keep
          ~ '), older_than_hours 0: no age limit'}) }}
  {%- elif age is none or age <= hours -%}
    {{ return({'due': false, 'reason': 'oldest snapshot is ' ~ (age if age is not none else 0)
          ~ ' h old, not older than '
        ~ limit}) }}
  {%- endif -%}
  {{ return({'due': true, 'reason': count ~ ' snapshots (> retain_last ' ~ keep ~ '), oldest ' ~ age ~ ' h old (> '
      ~ limit ~ ')'}) }}
{% endmacro %}

{#- The cut-off is fixed in the plan: older_than_hours before the plan's reference time
    (context.reference, from as_of), else before now; 0 stays "no age limit". -#}
{% macro _iceberg_maint_expire_snapshots_planned_sql(relation, section, context={}) %}
  {%- set hours, older_than, reference = section.older_than_hours, section.older_than, context.get('reference') -%}
  {%- if older_than is not none -%}
    {%- set hours = none -%}
  {%- elif reference is not none and hours -%}
    {%- set hours, older_than = none,
          (reference - modules.datetime.timedelta(hours=hours)).strftime('%Y-%m-%d %H:%M:%S') -%}
  {%- endif -%}
  {{ return({'sql': dbt_iceberg_maint.get_expire_snapshots_sql(relation=relation, older_than_hours=hours,
      retain_last=section.retain_last, max_concurrent_deletes=section.max_concurrent_deletes,
      stream_results=section.stream_results, clean_expired_metadata=section.clean_expired_metadata,
      older_than=older_than), 'reason': none}) }}
{% endmacro %}
