{#- Maintain one table per its model's policy (`meta.iceberg_maint`, merged over the defaults and
    `policy`): get_maintenance_plan, then execute it (due operations only; force: every
    requested operation, thresholds ignored), in the canonical order, one ICEBERG_MAINT_RESULT
    line per operation. Returns the list of result records; inside a node's hooks it renders to
    nothing (dbt would run the rendered text as SQL), so `{{ dbt_iceberg_maint.maintain() }}`
    works as a post-hook. as_of: the reference time for cold partitions and snapshot ages. -#}

{% macro maintain(relation=none, operations=none, dry_run=false, force=false, policy=none, as_of=none) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_outside_node(adapter.dispatch('maintain', 'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, operations=operations, dry_run=dry_run, force=force,
      policy=policy, as_of=as_of))) }}
{% endmacro %}

{% macro default__maintain(relation, operations, dry_run, force, policy, as_of=none) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.maintain is not implemented for adapter '" ~ adapter.type()
      ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__maintain(relation, operations, dry_run, force, policy, as_of=none) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(
        dbt_iceberg_maint._iceberg_maint_check_boolean('maintain', 'dry_run', dry_run)
        + dbt_iceberg_maint._iceberg_maint_check_boolean('maintain', 'force', force)) -%}
  {%- set steps = dbt_iceberg_maint.get_maintenance_plan(relation=relation, operations=operations, force=force,
        policy=policy, as_of=as_of) -%}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_execute_steps(steps, dry_run, progress=false)) }}
{% endmacro %}


{#- {'sql': CALL text or none, 'reason': why there is nothing to run}. Compaction with
    cold_partitions_hours is scoped to the cold partitions (an explicit `where` is ANDed with
    that filter); no cold partition means nothing to compact. -#}
{% macro _iceberg_maint_planned_sql(relation, operation, policy, dry_run=false, cold_scope=none, reference=none) %}
  {%- if operation == 'rewrite_data_files' -%}
    {%- set section = policy.compaction -%}
    {%- set where = section.where -%}
    {%- if section.cold_partitions_hours -%}
      {%- set cold = cold_scope.where if cold_scope is not none else dbt_iceberg_maint.cold_partitions_where(relation, section.cold_partitions_hours) -%}
      {%- if cold is none or not (cold | string).strip() -%}
        {{ return({'sql': none, 'reason': 'no partition has been quiet for ' ~ section.cold_partitions_hours ~ ' h (cold_partitions_hours), nothing cold to compact'}) }}
      {%- endif -%}
      {%- set where = ('(' ~ where ~ ') and (' ~ cold ~ ')') if where else cold -%}
    {%- endif -%}
    {%- set options = dbt_iceberg_maint._iceberg_maint_compaction_options(
          section, serial_group_commits=section.partial_progress and dbt_iceberg_maint._iceberg_maint_is_hadoop_catalog(relation)) -%}
    {{ return({'sql': dbt_iceberg_maint.get_rewrite_data_files_sql(relation, where, section.strategy, section.sort_order, options), 'reason': none}) }}
  {%- elif operation == 'rewrite_position_delete_files' -%}
    {%- set section = policy.rewrite_position_delete_files -%}
    {%- set options = {'min-input-files': section.min_input_files | string} -%}
    {%- do options.update(section.options or {}) -%}
    {{ return({'sql': dbt_iceberg_maint.get_rewrite_position_delete_files_sql(relation, section.where, options), 'reason': none}) }}
  {%- elif operation == 'expire_snapshots' -%}
    {%- set section = policy.expire_snapshots -%}
    {#- The cut-off is fixed in the plan: older_than_hours before the plan's reference time (as_of). -#}
    {%- set hours, older_than = section.older_than_hours, section.older_than -%}
    {%- if older_than is none and reference is not none and hours -%}
      {%- set hours, older_than = none, (reference - modules.datetime.timedelta(hours=hours)).strftime('%Y-%m-%d %H:%M:%S') -%}
    {%- elif older_than is not none -%}
      {%- set hours = none -%}
    {%- endif -%}
    {{ return({'sql': dbt_iceberg_maint.get_expire_snapshots_sql(relation=relation, older_than_hours=hours,
          retain_last=section.retain_last, max_concurrent_deletes=section.max_concurrent_deletes,
          stream_results=section.stream_results, clean_expired_metadata=section.clean_expired_metadata,
          older_than=older_than), 'reason': none}) }}
  {%- elif operation == 'remove_orphan_files' -%}
    {%- set section = policy.remove_orphan_files -%}
    {{ return({'sql': dbt_iceberg_maint.get_remove_orphan_files_sql(relation, section.older_than_hours,
          location=section.location, max_concurrent_deletes=section.max_concurrent_deletes,
          equal_schemes=section.equal_schemes, equal_authorities=section.equal_authorities,
          prefix_mismatch_mode=section.prefix_mismatch_mode, prefix_listing=section.prefix_listing), 'reason': none}) }}
  {%- else -%}
    {{ return({'sql': dbt_iceberg_maint.get_rewrite_manifests_sql(relation, use_caching=policy.rewrite_manifests.use_caching), 'reason': none}) }}
  {%- endif -%}
{% endmacro %}


{#- Whether the relation's Iceberg catalog is a HadoopCatalog (read from the session's catalog
    configuration with SET, so it works over any connection). -#}
{% macro _iceberg_maint_is_hadoop_catalog(relation) %}
  {%- set catalog = dbt_iceberg_maint._iceberg_maint_relation_parts(relation).catalog
        or run_query('select current_catalog()').columns[0].values()[0] -%}
  {%- set prefix = 'spark.sql.catalog.' ~ catalog -%}
  {%- set catalog_type = run_query('set `' ~ prefix ~ '.type`').columns[1].values()[0] | string -%}
  {%- set catalog_impl = run_query('set `' ~ prefix ~ '.catalog-impl`').columns[1].values()[0] | string -%}
  {{ return(catalog_type | lower == 'hadoop' or catalog_impl.endswith('.HadoopCatalog')) }}
{% endmacro %}


{#- Whether the table exists: dbt's relation cache for the current catalog, SHOW statements for
    a named one (SHOW TABLES IN a missing namespace would fail, so the namespace comes first). -#}
{% macro _iceberg_maint_table_exists(relation) %}
  {%- set parts = dbt_iceberg_maint._iceberg_maint_relation_parts(relation) -%}
  {%- if parts.catalog is none -%}
    {{ return(adapter.get_relation(database=none, schema=parts.schema, identifier=parts.identifier) is not none) }}
  {%- endif -%}
  {%- set literal = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {%- if run_query('show namespaces in ' ~ parts.catalog ~ ' like ' ~ literal(parts.schema)).rows | length == 0 -%}
    {{ return(false) }}
  {%- endif -%}
  {#- LIKE takes a pattern; compare names exactly and leave out temporary views. -#}
  {%- for row in run_query('show tables in ' ~ parts.catalog ~ '.' ~ parts.schema ~ ' like ' ~ literal(parts.identifier)) -%}
    {%- if (row['tableName'] | lower) == (parts.identifier | lower) and not row['isTemporary'] -%}{{ return(true) }}{%- endif -%}
  {%- endfor -%}
  {{ return(false) }}
{% endmacro %}


{#- Table properties as a dict (SHOW TBLPROPERTIES). -#}
{% macro _iceberg_maint_table_properties(table) %}
  {%- set properties = {} -%}
  {%- for row in run_query('show tblproperties ' ~ table) -%}
    {%- do properties.update({row[0] | string: row[1] | string}) -%}
  {%- endfor -%}
  {{ return(properties) }}
{% endmacro %}
