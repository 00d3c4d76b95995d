{#- Keep the package's own tables healthy: the lease logs of `schemas` (default: the schemas of
    the project's Iceberg models, plus the history table's) and the maintenance history. Both
    take a commit per lease event or flush, so they gather one-row files and snapshots fastest of
    all tables. Run it once per maintenance run, after the run (an on-run-end hook of the job that
    maintains, or a step of the nightly job: docs/getting-started.md).

    A lease log is never compacted: a rewrite gives the merged rows one sequence number, and the
    replay decides by commit order (docs/leases.md). Instead the rows of settled leases go: every
    row of a table whose newest row, and every expiry, is older than one lease TTL. That is a
    delete of whole one-row files (the surviving rows keep their commit's sequence number), and
    it cannot change any lease: whatever those rows replay to had expired a TTL ago, and a claim
    appended meanwhile carries a newer clock, so the delete leaves it (docs/leases.md, "Growth").
    Then the log's snapshots older than a TTL are expired and its manifests merged when due; the
    history table is compacted, expired and its manifests merged when due (maintain() with
    the policy below). older_than_hours: the snapshots' age limit (default: one lease TTL;
    nothing reads these tables' old snapshots). dry_run: plan only. Returns the result records (renders to nothing in a
    hook); as a run-operation, a failed operation fails the invocation. -#}
{% macro maintain_own_tables(schemas=none, older_than_hours=none, dry_run=false) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_outside_node(adapter.dispatch('maintain_own_tables', 'dbt_iceberg_maint')(
      schemas=schemas, older_than_hours=older_than_hours, dry_run=dry_run))) }}
{% endmacro %}

{% macro default__maintain_own_tables(schemas, older_than_hours, dry_run) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.maintain_own_tables is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__maintain_own_tables(schemas, older_than_hours, dry_run) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(
        dbt_iceberg_maint._iceberg_maint_check_boolean('maintain_own_tables', 'dry_run', dry_run)
        + dbt_iceberg_maint._iceberg_maint_expire_snapshots_errors(older_than_hours=older_than_hours)
        | map('replace', 'expire_snapshots:', 'maintain_own_tables:') | list) -%}
  {%- set namespaces = dbt_iceberg_maint._iceberg_maint_lease_namespaces(schemas, 'maintain_own_tables') -%}
  {%- set leases = dbt_iceberg_maint._iceberg_maint_lease_settings() -%}
  {%- set history = dbt_iceberg_maint._iceberg_maint_history_settings() -%}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set history_namespace = history.relation.rsplit('.', 1)[0] -%}
  {%- if history.enabled and history_namespace not in namespaces -%}
    {%- do namespaces.append(history_namespace) -%}
  {%- endif -%}
  {%- set cutoff_ms = dbt_iceberg_maint._iceberg_maint_lease_now_ms() - leases.ttl_ms -%}
  {%- set expiry = {'older_than_hours': leases.ttl_ms / 3600000 if older_than_hours is none else older_than_hours,
        'retain_last': 1} -%}
  {%- set maintain = adapter.dispatch('maintain', 'dbt_iceberg_maint') -%}
  {%- set results = [] -%}
  {%- for namespace in namespaces if leases.enabled -%}
    {%- set log_table = dbt_iceberg_maint._iceberg_maint_lease_target(namespace ~ '.x', leases).log -%}
    {%- if dbt_iceberg_maint._iceberg_maint_relation_exists(log_table) -%}
      {#- Not committed to by this invocation yet: its cached copy may be stale. -#}
      {%- do dbt_iceberg_maint._iceberg_maint_lease_statement('refresh table ' ~ log_table) -%}
      {%- set keys = dbt_iceberg_maint._iceberg_maint_settled_lease_keys(
            dbt_iceberg_maint._iceberg_maint_lease_rows(log_table), cutoff_ms) -%}
      {%- if keys -%}
        {%- do log('dbt_iceberg_maint.maintain_own_tables: ' ~ log_table ~ ': ' ~ ('would remove' if dry_run
              else 'removing') ~ ' the rows of ' ~ keys | length ~ ' settled lease(s) (' ~ keys | join(', ') ~ ')',
              info=true) -%}
        {%- if not dry_run -%}
          {%- do dbt_iceberg_maint._iceberg_maint_lease_statement(
                dbt_iceberg_maint._iceberg_maint_settled_lease_delete_sql(log_table, keys, cutoff_ms)) -%}
        {%- endif -%}
      {%- endif -%}
      {%- do results.extend(maintain(relation=log_table, operations=['expire_snapshots', 'rewrite_manifests'],
            dry_run=dry_run, force=false, policy={'expire_snapshots': expiry}, as_of=none)) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if history.enabled and dbt_iceberg_maint._iceberg_maint_relation_exists(history.relation) -%}
    {%- do results.extend(maintain(relation=history.relation,
          operations=['rewrite_data_files', 'expire_snapshots', 'rewrite_manifests'], dry_run=dry_run, force=false,
          policy={'expire_snapshots': expiry}, as_of=none)) -%}
  {%- endif -%}
  {%- set failed = results | selectattr('status', 'equalto', 'failed') | list -%}
  {%- if failed and dbt_iceberg_maint._iceberg_maint_is_run_operation('maintain_own_tables') -%}
    {{ exceptions.raise_compiler_error('maintain_own_tables: ' ~ failed | length ~ ' operation(s) failed: '
        ~ (failed | map(attribute='table') | join(', '))) }}
  {%- endif -%}
  {{ return(results) }}
{% endmacro %}


{#- Pure: the keys ({key: rows} of a lease log) whose every row was written, and asks for an
    expiry, before cutoff_ms: their leases ended a TTL ago, however the rows replay. -#}
{% macro _iceberg_maint_settled_lease_keys(rows_by_key, cutoff_ms) %}
  {%- set keys = [] -%}
  {%- for key, rows in rows_by_key.items() | sort -%}
    {%- if rows and (rows | map(attribute='at_ms') | max) < cutoff_ms
          and (rows | map(attribute='expires_ms') | max) < cutoff_ms -%}
      {%- do keys.append(key) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(keys) }}
{% endmacro %}


{#- Pure: the delete of settled keys' rows. The time bounds repeat the settled test, so a claim
    appended after the rows were read (a current clock) is never among the deleted rows. -#}
{% macro _iceberg_maint_settled_lease_delete_sql(log, keys, cutoff_ms) %}
  {%- set literals = [] -%}
  {%- for key in keys -%}{%- do literals.append(dbt_iceberg_maint._iceberg_maint_string_literal(key)) -%}{%- endfor -%}
  {{ return('delete from ' ~ log ~ ' where table_name in (' ~ literals | join(', ') ~ ') and at_ms < '
      ~ cutoff_ms ~ ' and expires_ms < ' ~ cutoff_ms) }}
{% endmacro %}

