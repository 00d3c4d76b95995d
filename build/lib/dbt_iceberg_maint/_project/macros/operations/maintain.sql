{#- Maintain one table per its model's policy (`meta.iceberg_maint`, merged over the defaults and
    `policy`): due operations only (force: every requested operation, thresholds ignored), in
    the canonical order, one ICEBERG_MAINT_RESULT line per operation. Returns the list of
    result records; inside a node's hooks it renders to nothing (dbt would run the rendered
    text as SQL), so `{{ dbt_iceberg_maint.maintain() }}` works as a post-hook. -#}

{% macro maintain(relation=none, operations=none, dry_run=false, force=false, policy=none) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_outside_node(adapter.dispatch('maintain', 'dbt_iceberg_maint')(relation if relation is not none else this, operations, dry_run, force, policy))) }}
{% endmacro %}

{% macro default__maintain(relation, operations, dry_run, force, policy) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.maintain is not implemented for adapter '" ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__maintain(relation, operations, dry_run, force, policy) %}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(relation) -%}
  {%- set requested = dbt_iceberg_maint._iceberg_maint_requested_operations(operations) -%}
  {%- set arg_errors = dbt_iceberg_maint._iceberg_maint_check_boolean('maintain', 'dry_run', dry_run) + dbt_iceberg_maint._iceberg_maint_check_boolean('maintain', 'force', force) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(arg_errors) -%}
  {%- set node = dbt_iceberg_maint._iceberg_maint_node_for_relation(relation) -%}
  {%- set raw_policy = dbt_iceberg_maint._iceberg_maint_model_policy(node) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(
        dbt_iceberg_maint._iceberg_maint_policy_shape_errors(raw_policy)
        + dbt_iceberg_maint._iceberg_maint_policy_shape_errors(policy, 'maintain: argument `policy`')) -%}
  {%- set resolved = dbt_iceberg_maint._iceberg_maint_resolved_policy(raw_policy, policy) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_policy_errors(resolved)) -%}
  {%- set results = [] -%}
  {%- set log_result = dbt_iceberg_maint._iceberg_maint_log_result -%}

  {#- Kill switches: the project var, then the model's policy. -#}
  {%- set blocked = none -%}
  {%- if not var('dbt_iceberg_maint_enabled', true) -%}
    {%- set blocked = 'maintenance disabled by var dbt_iceberg_maint_enabled: false' -%}
  {%- elif not resolved.enabled -%}
    {%- set blocked = 'maintenance disabled by meta.iceberg_maint.enabled: false' -%}
  {%- endif -%}
  {%- if blocked is none -%}
    {%- if not dbt_iceberg_maint._iceberg_maint_table_exists(relation) -%}
      {%- set blocked = 'table does not exist (model not built yet?)' -%}
    {%- endif -%}
  {%- endif -%}
  {%- if blocked is not none -%}
    {%- for operation in requested -%}
      {%- do results.append(log_result(table, operation, 'skipped', blocked, none, {}, 0)) -%}
    {%- endfor -%}
    {{ return(results) }}
  {%- endif -%}

  {%- set properties = dbt_iceberg_maint._iceberg_maint_table_properties(table) -%}
  {%- set health = none -%}
  {%- if not force -%}
    {%- set target_bytes = ((resolved.compaction.target_file_size_mb * 1024 * 1024) | int) if resolved.compaction.target_file_size_mb else none -%}
    {#- The implementation, not the public macro: that one renders to '' inside a node's hooks. -#}
    {%- set health = adapter.dispatch('table_health', 'dbt_iceberg_maint')(relation, target_bytes, false) -%}
  {%- endif -%}

  {%- for operation in requested -%}
    {#- At debug level (not shown on the console): which operation a statement Spark rejects
        belongs to, for a caller around dbt that resumes the run (dbt-iceberg-maint maintain). -#}
    {%- do log('ICEBERG_MAINT_START ' ~ tojson({'table': table, 'operation': operation})) -%}
    {%- set section = resolved[dbt_iceberg_maint._iceberg_maint_policy_section(operation)] -%}
    {#- Compaction scoped to cold partitions: due only for the small files it may touch. -#}
    {%- set scope = none -%}
    {%- if operation == 'rewrite_data_files' and section.enabled and section.cold_partitions_hours -%}
      {%- set scope = dbt_iceberg_maint._iceberg_maint_cold_scope(relation, section.cold_partitions_hours, none,
            health.small_file_threshold_bytes if health else none) -%}
    {%- endif -%}
    {%- set decision = {'due': true, 'reason': 'forced (thresholds ignored)'} -%}
    {%- if not force -%}
      {%- set checked = health.copy() -%}
      {%- if scope is not none -%}{%- do checked.update({'cold_scope': scope}) -%}{%- endif -%}
      {%- set decision = dbt_iceberg_maint._iceberg_maint_due(operation, resolved, checked) -%}
    {%- endif -%}
    {%- if not section.enabled -%}
      {%- do results.append(log_result(table, operation, 'skipped', 'disabled by meta.iceberg_maint.' ~ dbt_iceberg_maint._iceberg_maint_policy_section(operation) ~ '.enabled: false', none, {}, 0)) -%}
    {%- elif not decision.due -%}
      {%- do results.append(log_result(table, operation, 'skipped', decision.reason, none, {}, 0)) -%}
    {%- elif operation in ['expire_snapshots', 'remove_orphan_files'] and (properties.get('gc.enabled', 'true') | lower) == 'false' -%}
      {#- Iceberg refuses both when gc.enabled=false; report it without running the CALL so
          the following operations still run. -#}
      {%- set verb = 'expire snapshots' if operation == 'expire_snapshots' else 'delete orphan files' -%}
      {%- do results.append(log_result(table, operation, 'failed', 'Cannot ' ~ verb ~ ': GC is disabled (deleting files may corrupt other tables); table property gc.enabled=false', none, {}, 0)) -%}
    {%- else -%}
      {%- set planned = dbt_iceberg_maint._iceberg_maint_planned_sql(relation, operation, resolved, dry_run, scope) -%}
      {%- if planned.sql is none -%}
        {%- do results.append(log_result(table, operation, 'skipped', planned.reason, none, {}, 0)) -%}
      {%- else -%}
        {%- set reason = ('dry run: ' ~ decision.reason) if dry_run else decision.reason -%}
        {%- do results.append(dbt_iceberg_maint._iceberg_maint_execute_logged(relation, operation, planned.sql, dry_run, operation == 'remove_orphan_files', 'success', reason)) -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(results) }}
{% endmacro %}


{#- {'sql': CALL text or none, 'reason': why there is nothing to run}. Compaction with
    cold_partitions_hours is scoped to the cold partitions (an explicit `where` is ANDed with
    that filter); no cold partition means nothing to compact. -#}
{% macro _iceberg_maint_planned_sql(relation, operation, policy, dry_run=false, cold_scope=none) %}
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
    {{ return({'sql': dbt_iceberg_maint.get_expire_snapshots_sql(relation, section.older_than_hours, section.retain_last,
          max_concurrent_deletes=section.max_concurrent_deletes, stream_results=section.stream_results,
          clean_expired_metadata=section.clean_expired_metadata), 'reason': none}) }}
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
