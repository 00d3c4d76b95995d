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
  {%- set results = dbt_iceberg_maint._iceberg_maint_execute_steps(steps, dry_run, progress=false) -%}
  {%- if not dry_run and not force and steps -%}
    {%- set node = dbt_iceberg_maint._iceberg_maint_node_for_relation(relation) -%}
    {%- do dbt_iceberg_maint._iceberg_maint_record_checks(steps[0].table, dbt_iceberg_maint._iceberg_maint_resolved_policy(
          dbt_iceberg_maint._iceberg_maint_model_policy(node), policy), steps, results) -%}
  {%- endif -%}
  {{ return(results) }}
{% endmacro %}
