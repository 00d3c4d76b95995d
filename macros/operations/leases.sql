{#- The lease admin: `dbt run-operation dbt_iceberg_maint.list_leases` logs the current leases
    (one ICEBERG_MAINT_LEASES line: [{table, holder, acquired_at, expires_at, path, claim_id}]) of
    the lease logs in `schemas` (default: the schemas of the project's Iceberg models);
    `break_lease` ends the current lease of one table. `dbt-iceberg-maint leases` runs both.
    `create_lease_logs` creates the logs up front. -#}

{% macro list_leases(schemas=none) %}
  {{ return(adapter.dispatch('list_leases', 'dbt_iceberg_maint')(schemas=schemas)) }}
{% endmacro %}

{% macro default__list_leases(schemas) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.list_leases is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__list_leases(schemas) %}
  {%- set namespaces = dbt_iceberg_maint._iceberg_maint_lease_namespaces(schemas) -%}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set settings = dbt_iceberg_maint._iceberg_maint_lease_settings() -%}
  {%- set now_ms = dbt_iceberg_maint._iceberg_maint_lease_now_ms() -%}
  {%- set leases = [] -%}
  {%- for namespace in namespaces -%}
    {%- set log_table = dbt_iceberg_maint._iceberg_maint_lease_target(namespace ~ '.x', settings).log -%}
    {%- for key, rows in dbt_iceberg_maint._iceberg_maint_lease_log_rows(log_table).items() | sort -%}
      {%- set holder = dbt_iceberg_maint._iceberg_maint_lease_state(rows).holder -%}
      {%- if holder is not none and holder.expires_ms > now_ms -%}
        {%- do leases.append(dbt_iceberg_maint._iceberg_maint_lease_record(namespace ~ '.' ~ key, holder)) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('leases', leases) -%}
  {{ return(leases) }}
{% endmacro %}


{#- Create the lease logs of `schemas` (default: the schemas of the project's Iceberg models)
    before jobs that share a namespace start at once: creating a log is the one lease statement
    that can fail a run when it races (Iceberg's JDBC catalog on PostgreSQL reports the lost
    creation as an unknown failure, docs/leases.md). Nothing with leases disabled. Logs
    ICEBERG_MAINT_LEASES with the logs' names. The maintenance history table, which the same jobs
    append to, is created too (create_history_table; nothing with history disabled), so the
    fleet engine, which runs this before its workers start, never races to create it. Also logs
    the logs as checked (ICEBERG_MAINT_CHECKED, debug level): the engine's steps do not create
    them again. -#}
{% macro create_lease_logs(schemas=none) %}
  {{ return(adapter.dispatch('create_lease_logs', 'dbt_iceberg_maint')(schemas=schemas)) }}
{% endmacro %}

{% macro default__create_lease_logs(schemas) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.create_lease_logs is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__create_lease_logs(schemas) %}
  {%- set namespaces = dbt_iceberg_maint._iceberg_maint_lease_namespaces(schemas, 'create_lease_logs') -%}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set settings = dbt_iceberg_maint._iceberg_maint_lease_settings() -%}
  {%- set logs = [] -%}
  {%- for namespace in namespaces if settings.enabled -%}
    {%- set log_table = dbt_iceberg_maint._iceberg_maint_lease_target(namespace ~ '.x', settings).log -%}
    {%- do dbt_iceberg_maint._iceberg_maint_lease_statement(
          dbt_iceberg_maint._iceberg_maint_lease_create_sql(log_table)) -%}
    {%- do logs.append(log_table) -%}
  {%- endfor -%}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('leases', logs) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('checked', {'lease_logs': logs, 'catalogs': []}, info=false) -%}
  {%- do dbt_iceberg_maint.create_history_table() -%}
  {{ return(logs) }}
{% endmacro %}


{#- `dbt run-operation dbt_iceberg_maint.claim_leases --args '{tables: [...], release: [...]}'`:
    the fleet engine's leases in batches. First ends `release` (leases an ICEBERG_MAINT_KEPT line of
    this run handed over, kept after their tables' last steps: one INSERT of release rows per log),
    then claims the leases of `tables` ('[catalog.]schema.table' names: one INSERT of claim rows
    and one read per log, _iceberg_maint_lease_claim_many) and logs those it holds in an
    ICEBERG_MAINT_KEPT line (debug level), for the tables' steps to take up
    (execute_maintenance_steps' `leases`). A table another job holds is left out (its step claims
    for itself and is skipped naming the holder). `checked` as execute_maintenance_steps takes it;
    the logs it found are logged as checked. Nothing with leases disabled. Last, it writes
    `history_rows` (the history rows the run's steps deferred, as their ICEBERG_MAINT_HISTORY_ROWS
    lines logged them) in one INSERT, without the history table's checks when `history_checked`
    (as execute_maintenance_steps takes it). Bad input changes nothing. -#}
{% macro claim_leases(tables=[], release=none, checked=none, history_rows=none, history_checked=false) %}
  {{ return(adapter.dispatch('claim_leases', 'dbt_iceberg_maint')(tables=tables, release=release,
      checked=checked, history_rows=history_rows, history_checked=history_checked)) }}
{% endmacro %}

{% macro default__claim_leases(tables=[], release=none, checked=none, history_rows=none, history_checked=false) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.claim_leases is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__claim_leases(tables=[], release=none, checked=none, history_rows=none, history_checked=false) %}
  {%- set given = dbt_iceberg_maint._iceberg_maint_history_rows_given('claim_leases', history_rows) -%}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_lease_handover_errors(release,
        'claim_leases: argument `release`') + dbt_iceberg_maint._iceberg_maint_checked_errors(checked)
        | map('replace', 'execute_maintenance_steps:', 'claim_leases:') | list
        + given.errors + dbt_iceberg_maint._iceberg_maint_check_boolean('claim_leases', 'history_checked',
          history_checked) -%}
  {%- set names = [] -%}
  {%- if tables is string or tables is mapping or tables is not iterable -%}
    {%- do errors.append('claim_leases: argument `tables` is ' ~ tojson(tables)
          ~ '; expected a list of table names (schema.table or catalog.schema.table)') -%}
  {%- else -%}
    {%- for table in tables -%}
      {%- set parts = table.split('.') if table is string else [] -%}
      {%- set check = namespace(valid=parts | length in [2, 3]) -%}
      {%- for part in parts if not dbt_iceberg_maint._iceberg_maint_is_identifier(part) -%}
        {%- set check.valid = false -%}
      {%- endfor -%}
      {%- if not check.valid or table in names -%}
        {%- do errors.append('claim_leases: argument `tables` contains ' ~ tojson(table) ~ '; expected distinct '
              ~ 'table names (schema.table or catalog.schema.table) made of letters, digits and underscores') -%}
      {%- else -%}
        {%- do names.append(table) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- endif -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(errors) -%}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set checks = {'lease_logs': (checked or {}).get('lease_logs', []) | list, 'catalogs': []} -%}
  {%- set released = [] -%}
  {%- for lease in release or [] if dbt_iceberg_maint._iceberg_maint_lease_settings().enabled -%}
    {%- do released.append(dict(lease, enabled=true, held=true)) -%}
  {%- endfor -%}
  {%- do dbt_iceberg_maint._iceberg_maint_lease_release_many(released) -%}
  {%- set kept = [] -%}
  {%- for lease in dbt_iceberg_maint._iceberg_maint_lease_claim_many(names, 'claim_leases', checks) -%}
    {%- do kept.append(dbt_iceberg_maint._iceberg_maint_lease_handover(lease)) -%}
  {%- endfor -%}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('kept', {'leases': kept}, info=false) -%}
  {%- if checks.lease_logs -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_marker('checked', checks, info=false) -%}
  {%- endif -%}
  {#- Last: the leases are settled (and logged) whatever happens to the history's INSERT. -#}
  {%- if given.rows -%}
    {%- set history = dbt_iceberg_maint._iceberg_maint_history_open('claim_leases') -%}
    {%- if history_checked -%}{%- do history.state.update({'ready': true}) -%}{%- endif -%}
    {%- do history.pending.extend(given.rows) -%}
    {%- do dbt_iceberg_maint._iceberg_maint_history_flush(history) -%}
  {%- endif -%}
  {{ return(kept) }}
{% endmacro %}


{#- End the current lease of `relation`'s table (a holder that still runs notices at its next
    renewal and skips its remaining steps). With `holder` (a run id), only a lease that run holds
    is ended: how a job gives back the lease a step Spark rejected left taken. Logs
    ICEBERG_MAINT_LEASES with the broken lease, or an empty list when the table had none. -#}
{% macro break_lease(relation, holder=none) %}
  {{ return(adapter.dispatch('break_lease', 'dbt_iceberg_maint')(relation=relation, holder=holder)) }}
{% endmacro %}

{% macro default__break_lease(relation, holder=none) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.break_lease is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__break_lease(relation, holder=none) %}
  {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(relation) -%}
  {%- if holder is not none and (holder is not string or not holder) -%}
    {{ exceptions.raise_compiler_error("break_lease: argument `holder` is " ~ tojson(holder)
          ~ "; expected a run id (a non-empty string), or none for whoever holds the lease") }}
  {%- endif -%}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set settings = dbt_iceberg_maint._iceberg_maint_lease_settings() -%}
  {%- set target = dbt_iceberg_maint._iceberg_maint_lease_target(table, settings) -%}
  {%- set now_ms = dbt_iceberg_maint._iceberg_maint_lease_now_ms() -%}
  {%- set current = dbt_iceberg_maint._iceberg_maint_lease_state(
        dbt_iceberg_maint._iceberg_maint_lease_log_rows(target.log).get(target.key, [])).holder -%}
  {%- set broken = [] -%}
  {%- if current is not none and current.expires_ms > now_ms and holder in [none, current.holder] -%}
    {#- The break names the claim it ends: a lease taken since by someone else stays. -#}
    {%- do dbt_iceberg_maint._iceberg_maint_lease_append({'log': target.log, 'key': target.key,
          'claim_id': current.claim_id, 'holder': settings.run_id, 'path': 'break_lease'}, 'break', now_ms, now_ms) -%}
    {%- do broken.append(dbt_iceberg_maint._iceberg_maint_lease_record(table, current)) -%}
  {%- endif -%}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('leases', broken) -%}
  {{ return(broken) }}
{% endmacro %}


{#- The namespaces whose lease logs the admin reads: `schemas` (a name or a list, 'schema' or
    'catalog.schema'), else those of the project's Iceberg models (with the catalog var). -#}
{% macro _iceberg_maint_lease_namespaces(schemas=none, owner='list_leases') %}
  {%- set catalog = var('dbt_iceberg_maint_catalog', none) -%}
  {%- set names = [] -%}
  {%- if schemas is none -%}
    {%- for node in dbt_iceberg_maint._iceberg_maint_selected_models() -%}
      {%- set name = ((catalog ~ '.') if catalog else '') ~ node.schema -%}
      {%- if name not in names -%}{%- do names.append(name) -%}{%- endif -%}
    {%- endfor -%}
    {{ return(names) }}
  {%- endif -%}
  {%- for name in ([schemas] if schemas is string else schemas) -%}
    {%- set parts = (name | string).split('.') -%}
    {%- set check = namespace(valid=name is string and parts | length <= 2) -%}
    {%- for part in parts if not dbt_iceberg_maint._iceberg_maint_is_identifier(part) -%}
      {%- set check.valid = false -%}
    {%- endfor -%}
    {%- if not check.valid -%}
      {{ exceptions.raise_compiler_error(owner ~ ": argument `schemas` contains " ~ tojson(name)
            ~ "; expected 'schema' or 'catalog.schema' made of letters, digits and underscores") }}
    {%- endif -%}
    {%- set name = (catalog ~ '.' ~ name) if catalog and parts | length == 1 else name -%}
    {%- if name not in names -%}{%- do names.append(name) -%}{%- endif -%}
  {%- endfor -%}
  {{ return(names) }}
{% endmacro %}


{#- {key: rows} of a lease log, or {} when it does not exist. The admin has not committed to the
    log, so its cached copy may be stale: REFRESH TABLE first. -#}
{% macro _iceberg_maint_lease_log_rows(log_table) %}
  {%- if not dbt_iceberg_maint._iceberg_maint_relation_exists(log_table) -%}
    {{ return({}) }}
  {%- endif -%}
  {%- do dbt_iceberg_maint._iceberg_maint_lease_statement('refresh table ' ~ log_table) -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_lease_rows(log_table)) }}
{% endmacro %}


{% macro _iceberg_maint_lease_record(table, holder) %}
  {%- set text = dbt_iceberg_maint._iceberg_maint_lease_time_text -%}
  {{ return({'table': table, 'holder': holder.holder, 'acquired_at': text(holder.since_ms),
      'expires_at': text(holder.expires_ms), 'path': holder.path, 'claim_id': holder.claim_id}) }}
{% endmacro %}
