{#- Reconcile a model's declared Iceberg table properties (meta.iceberg_maint.isolation_level,
    commit_retry, properties) onto the existing table: one ALTER TABLE ... SET TBLPROPERTIES with
    only the keys whose current value differs, or nothing at all.

    As a post-hook:  +post-hook: "{{ dbt_iceberg_maint.apply_table_properties() }}"
      (at project or package level too: it does nothing, debug log only, on nodes that built no
      Iceberg table: on-run-start operations, tests, seeds, views, ephemeral models)
    From run-operation: dbt run-operation dbt_iceberg_maint.apply_table_properties
                          --args '{relation: analytics.events}'
    (the policy then comes from the graph node of the model whose schema/alias match). -#}

{% macro apply_table_properties(relation=none, policy=none) %}
  {%- if dbt_iceberg_maint._iceberg_maint_hook_skip_reason('apply_table_properties', relation) is not none -%}
    {{ return('') }}
  {%- endif -%}
  {{ return(adapter.dispatch('apply_table_properties', 'dbt_iceberg_maint')(relation=relation, policy=policy)) }}
{% endmacro %}

{% macro default__apply_table_properties(relation=none, policy=none) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.apply_table_properties is not implemented for adapter '"
        ~ adapter.type() ~ "'; it supports spark") }}
{% endmacro %}

{% macro spark__apply_table_properties(relation=none, policy=none) %}
  {#- Hooks are rendered at parse time too; only act when dbt executes. -#}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {#- Outside a model (run-operation) there is no `this`: the relation must be given. -#}
  {%- set target_relation = relation if relation is not none else (this if this is defined else none) -%}
  {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(target_relation) -%}
  {#- The var switches everything off (docs/macros.md): not even the table's properties are read. -#}
  {%- if not var('dbt_iceberg_maint_enabled', true) -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_result(table, 'apply_table_properties', 'skipped',
         reason='maintenance disabled by var dbt_iceberg_maint_enabled: false', metrics={'changed': {}}) -%}
    {{ return('') }}
  {%- endif -%}
  {%- set declared_policy = policy if policy is not none else dbt_iceberg_maint._iceberg_maint_declared_policy(
        relation) -%}
  {#- Validate before touching the table: bad input changes nothing. -#}
  {%- set declared = dbt_iceberg_maint.declared_table_properties(declared_policy) -%}
  {%- set started = dbt_iceberg_maint._iceberg_maint_now() -%}
  {%- if declared | length == 0 -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_result(table, 'apply_table_properties', 'skipped',
         reason='no isolation_level, commit_retry or properties declared', metrics={'changed': {}},
         duration_ms=dbt_iceberg_maint._iceberg_maint_elapsed_ms(started)) -%}
    {{ return('') }}
  {%- endif -%}
  {%- set current = dbt_iceberg_maint._iceberg_maint_table_properties(table) -%}
  {#- Iceberg's properties mean nothing on another format's table (a Hive table in the session
      catalog): a post-hook says so at debug level, a run-operation in its result line. -#}
  {%- set table_format = dbt_iceberg_maint._iceberg_maint_non_iceberg_format('', current) -%}
  {%- if table_format -%}
    {%- set reason = 'not an Iceberg table (' ~ table_format ~ ')' -%}
    {%- if dbt_iceberg_maint._iceberg_maint_in_node() -%}
      {%- do dbt_iceberg_maint._iceberg_maint_log_hook_skip('apply_table_properties', reason) -%}
    {%- else -%}
      {%- do dbt_iceberg_maint._iceberg_maint_log_result(table, 'apply_table_properties', 'skipped', reason=reason,
           metrics={'changed': {}}, duration_ms=dbt_iceberg_maint._iceberg_maint_elapsed_ms(started)) -%}
    {%- endif -%}
    {{ return('') }}
  {%- endif -%}
  {%- set changes = dbt_iceberg_maint.table_property_changes(declared, current) -%}
  {%- set sql = dbt_iceberg_maint.get_apply_table_properties_sql(table, declared, current) -%}
  {%- if sql -%}
    {#- No result set: over thrift, run_query (fetch) fails on a statement that returns none. -#}
    {%- call statement('apply_table_properties', fetch_result=False) -%}{{ sql }}{%- endcall -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_result(table, 'apply_table_properties', 'success', sql=sql,
         metrics={'changed': changes, 'declared': declared | length},
         duration_ms=dbt_iceberg_maint._iceberg_maint_elapsed_ms(started)) -%}
  {%- else -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_result(table, 'apply_table_properties', 'skipped',
         reason='table properties already match the declared policy',
         metrics={'changed': {}, 'declared': declared | length},
         duration_ms=dbt_iceberg_maint._iceberg_maint_elapsed_ms(started)) -%}
  {%- endif -%}
  {{ return('') }}
{% endmacro %}
