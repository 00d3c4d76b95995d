{#- Keep the package's own tables healthy: the lease logs of `schemas` (default: the schemas of
    the project's Iceberg models, plus the history table's) and the maintenance history. Both
    take a commit per lease event or flush, so they gather one-row files and snapshots fastest of
    all tables. Run it once per maintenance run, after the run (an on-run-end hook of the job that
    maintains, or a step of the nightly job: docs/getting-started.md).

    A lease log is never compacted: a rewrite gives the merged rows one sequence number, and the
    replay decides by commit order (docs/leases.md). Instead settled rows go: of each table's
    rows, the oldest ones in commit order up to a point where nobody held the lease, each
    written more than a lease TTL ago (_iceberg_maint_settled_lease_rows). That is a
    delete of whole one-row files (the surviving rows keep their commit's sequence number), and
    it cannot change any lease: the rows after the point replay from "nobody holds" with or
    without them, and a claim appended meanwhile carries a clock a TTL newer, so the delete's
    bounds leave it (docs/leases.md, "Growth").
    Then the log's snapshots older than a TTL are expired and its manifests merged (from two
    data manifests on); the history table is compacted when due, expired and its manifests
    merged likewise (maintain() with the policy below). older_than_hours: the snapshots' age
    limit (default: one lease TTL; nothing reads these tables' old snapshots). dry_run: plan only. Returns the result records (renders to nothing in a
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
  {%- set now_ms = dbt_iceberg_maint._iceberg_maint_lease_now_ms() -%}
  {%- set expiry = {'older_than_hours': leases.ttl_ms / 3600000 if older_than_hours is none else older_than_hours,
        'retain_last': 1} -%}
  {#- Manifests merged from two on, not from the default policy's five: the run's last lease rows
      and history rows land after this, and a table left just below the threshold crosses it with
      the next few appends. -#}
  {%- set own_policy = {'expire_snapshots': expiry, 'rewrite_manifests': {'min_manifests': 2}} -%}
  {%- set maintain = adapter.dispatch('maintain', 'dbt_iceberg_maint') -%}
  {%- set results = [] -%}
  {%- for namespace in namespaces if leases.enabled -%}
    {%- set log_table = dbt_iceberg_maint._iceberg_maint_lease_target(namespace ~ '.x', leases).log -%}
    {%- if dbt_iceberg_maint._iceberg_maint_relation_exists(log_table) -%}
      {#- Not committed to by this invocation yet: its cached copy may be stale. -#}
      {%- do dbt_iceberg_maint._iceberg_maint_lease_statement('refresh table ' ~ log_table) -%}
      {%- set settled = dbt_iceberg_maint._iceberg_maint_settled_lease_rows(
            dbt_iceberg_maint._iceberg_maint_lease_rows(log_table), now_ms - leases.ttl_ms, now_ms) -%}
      {%- if settled -%}
        {%- set count = settled.values() | map('length') | sum -%}
        {%- do log('dbt_iceberg_maint.maintain_own_tables: ' ~ log_table ~ ': ' ~ ('would remove' if dry_run
              else 'removing') ~ ' ' ~ count ~ ' settled row(s) of ' ~ settled | length ~ ' table(s) ('
              ~ settled.keys() | sort | join(', ') ~ ')', info=true) -%}
        {%- if not dry_run -%}
          {%- do dbt_iceberg_maint._iceberg_maint_lease_statement(
                dbt_iceberg_maint._iceberg_maint_settled_lease_delete_sql(log_table, settled, now_ms - leases.ttl_ms)) -%}
        {%- endif -%}
      {%- endif -%}
      {%- do results.extend(maintain(relation=log_table, operations=['expire_snapshots', 'rewrite_manifests'],
            dry_run=dry_run, force=false, policy=own_policy, as_of=none)) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if history.enabled and dbt_iceberg_maint._iceberg_maint_relation_exists(history.relation) -%}
    {%- do results.extend(maintain(relation=history.relation,
          operations=['rewrite_data_files', 'expire_snapshots', 'rewrite_manifests'], dry_run=dry_run, force=false,
          policy=own_policy, as_of=none)) -%}
  {%- endif -%}
  {%- set failed = results | selectattr('status', 'equalto', 'failed') | list -%}
  {%- if failed and dbt_iceberg_maint._iceberg_maint_is_run_operation('maintain_own_tables') -%}
    {{ exceptions.raise_compiler_error('maintain_own_tables: ' ~ failed | length ~ ' operation(s) failed: '
        ~ (failed | map(attribute='table') | join(', '))) }}
  {%- endif -%}
  {{ return(results) }}
{% endmacro %}


{#- Pure: the rows of a lease log ({key: rows}) that may go, as {key: [at_ms, ...]}. For each key,
    the longest commit-order prefix of its rows in which every row was written before
    written_before_ms (a TTL ago) and after which nobody holds the lease (released or broken),
    or all of the key's rows when every one is so old and every expiry they asked for is before
    expired_before_ms (now). The rows after such a prefix replay from "nobody holds" with or without it.
    Rows are named by their clock (exact in the files' metrics, so the delete removes whole
    one-row files and rewrites none); a key where a kept row shares a clock with a prefix row is
    left for another run. -#}
{% macro _iceberg_maint_settled_lease_rows(rows_by_key, written_before_ms, expired_before_ms) %}
  {%- set settled = {} -%}
  {%- for key, rows in rows_by_key.items() | sort -%}
    {%- set ordered = rows | sort(attribute='seq,at_ms,claim_id') -%}
    {%- set cut = namespace(length=0, old=true, expired=true) -%}
    {%- for row in ordered if cut.old -%}
      {%- set cut.old = row.at_ms < written_before_ms -%}
      {%- set cut.expired = cut.expired and row.expires_ms < expired_before_ms -%}
      {#- After a release or a break the claims' expiries no longer matter; a key cleared whole
          may end with an unreleased lease, which must have expired. -#}
      {%- if cut.old and ((loop.index == ordered | length and cut.expired)
            or dbt_iceberg_maint._iceberg_maint_lease_state(ordered[:loop.index]).holder is none) -%}
        {%- set cut.length = loop.index -%}
      {%- endif -%}
    {%- endfor -%}
    {%- set clocks = ordered[:cut.length] | map(attribute='at_ms') | unique | sort | list -%}
    {%- set kept = ordered[cut.length:] | map(attribute='at_ms') | select('in', clocks) | list -%}
    {%- if clocks and not kept -%}
      {%- do settled.update({key: clocks}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(settled) }}
{% endmacro %}


{#- Pure: the delete of settled rows ({key: [at_ms, ...]}). The bound repeats the settled test,
    so a claim appended after the rows were read (a current clock, a TTL after
    written_before_ms) is never among the deleted rows. -#}
{% macro _iceberg_maint_settled_lease_delete_sql(log, settled, written_before_ms) %}
  {%- set terms = [] -%}
  {%- for key, clocks in settled.items() | sort -%}
    {%- do terms.append('(table_name = ' ~ dbt_iceberg_maint._iceberg_maint_string_literal(key) ~ ' and at_ms in ('
          ~ clocks | join(', ') ~ '))') -%}
  {%- endfor -%}
  {{ return('delete from ' ~ log ~ ' where at_ms < ' ~ written_before_ms ~ ' and (' ~ terms | join(' or ') ~ ')') }}
{% endmacro %}
