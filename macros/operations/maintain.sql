{#- Maintain one table per its model's policy (`meta.iceberg_maint`, merged over the defaults and
    `policy`): get_maintenance_plan, then execute it (due operations only; force: every
    requested operation, thresholds ignored), in the canonical order, one ICEBERG_MAINT_RESULT
    line per operation. A table that does not exist fails every operation; run as
    `dbt run-operation dbt_iceberg_maint.maintain`, any failed operation fails the invocation.
    Returns the list of result records; inside a node's hooks it renders to nothing (dbt would
    run the rendered text as SQL), so `{{ dbt_iceberg_maint.maintain() }}` works as a
    post-hook, set at project or package level too: without a relation it does nothing (debug
    log only) on nodes that built no Iceberg table (on-run-start operations, tests, seeds,
    views, ephemeral models, other file formats). as_of: the reference time for cold partitions and snapshot ages. -#}

{% macro maintain(relation=none, operations=none, dry_run=false, force=false, policy=none, as_of=none) %}
  {%- if dbt_iceberg_maint._iceberg_maint_hook_skip_reason('maintain', relation) is not none -%}{{ return('') }}{%- endif -%}
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
  {%- set plan = dbt_iceberg_maint._iceberg_maint_plan_table(relation, operations, force, policy, as_of) -%}
  {%- set steps = plan.steps -%}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {#- A post-hook on a table the model's file_format did not tell apart (e.g. a Hive table in the
      session catalog): nothing to maintain, said at debug level; elsewhere the skipped lines say it. -#}
  {%- if plan.table_format and dbt_iceberg_maint._iceberg_maint_in_node() -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_hook_skip('maintain', 'not an Iceberg table (' ~ plan.table_format ~ ')') -%}
    {{ return([]) }}
  {%- endif -%}
  {%- set node = dbt_iceberg_maint._iceberg_maint_node_for_relation(relation) -%}
  {%- set tables = {} -%}
  {%- if steps -%}
    {%- do tables.update({steps[0].table: {'health': plan.health,
          'node': none if node is none else dbt_iceberg_maint._iceberg_maint_node_label(node)}}) -%}
  {%- endif -%}
  {%- set results = dbt_iceberg_maint._iceberg_maint_execute_steps(steps, dry_run, progress=false, path='maintain',
        tables=tables) -%}
  {%- if not dry_run and not force and steps -%}
    {%- do dbt_iceberg_maint._iceberg_maint_record_checks(steps[0].table, dbt_iceberg_maint._iceberg_maint_resolved_policy(
          dbt_iceberg_maint._iceberg_maint_model_policy(node), policy), steps, results, plan.snapshot_id) -%}
  {%- endif -%}
  {%- set failed = results | selectattr('status', 'equalto', 'failed') | list -%}
  {#- As the run-operation itself, a failed operation fails the invocation (its exit code says
      so); a macro that calls maintain() gets the records, a post-hook the result lines. -#}
  {%- if failed and dbt_iceberg_maint._iceberg_maint_is_run_operation('maintain') -%}
    {%- set by_reason = {} -%}
    {%- for result in failed -%}
      {%- do by_reason.update({result.reason: by_reason.get(result.reason, []) + [result.operation]}) -%}
    {%- endfor -%}
    {%- set lines = [] -%}
    {%- for reason, operations in by_reason.items() -%}
      {%- do lines.append(operations | join(', ') ~ ': ' ~ reason) -%}
    {%- endfor -%}
    {{ exceptions.raise_compiler_error("maintain: " ~ failed | length ~ " operation(s) failed on "
          ~ failed[0].table ~ ": " ~ lines | join(' | ')) }}
  {%- endif -%}
  {{ return(results) }}
{% endmacro %}
