{#- Iceberg `compute_partition_stats`: compute per-partition statistics (record and file counts,
    last update) of a snapshot into a partition statistics file attached to the table. Commits
    table metadata, never a snapshot. A table without snapshots gets no file (no output row). -#}

{% macro get_compute_partition_stats_sql(relation=none, snapshot_id=none) %}
  {{ return(adapter.dispatch('get_compute_partition_stats_sql', 'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, snapshot_id=snapshot_id)) }}
{% endmacro %}

{% macro default__get_compute_partition_stats_sql(relation, snapshot_id) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.get_compute_partition_stats_sql is not implemented for adapter '"
        ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__get_compute_partition_stats_sql(relation, snapshot_id) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_compute_partition_stats_errors(
        snapshot_id)) -%}
  {%- set arguments = [['table',
        dbt_iceberg_maint._iceberg_maint_string_literal(dbt_iceberg_maint._iceberg_maint_table_name(relation))]] -%}
  {%- if snapshot_id is not none -%}{%- do arguments.append(['snapshot_id', snapshot_id | string]) -%}{%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_call_sql(relation, 'compute_partition_stats', arguments)) }}
{% endmacro %}


{% macro _iceberg_maint_compute_partition_stats_errors(snapshot_id=none) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_check_snapshot_id('compute_partition_stats', snapshot_id)) }}
{% endmacro %}


{% macro compute_partition_stats(relation=none, snapshot_id=none, dry_run=false) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_outside_node(adapter.dispatch('compute_partition_stats', 'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, snapshot_id=snapshot_id, dry_run=dry_run))) }}
{% endmacro %}

{% macro default__compute_partition_stats(relation, snapshot_id, dry_run) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.compute_partition_stats is not implemented for adapter '"
        ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__compute_partition_stats(relation, snapshot_id, dry_run) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_check_boolean(
        'compute_partition_stats', 'dry_run', dry_run)) -%}
  {%- set sql = dbt_iceberg_maint.get_compute_partition_stats_sql(relation, snapshot_id) -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_run_procedure(relation, 'compute_partition_stats', sql, dry_run)) }}
{% endmacro %}


{#- ---- As a maintenance step (get_maintenance_plan) ---------------------------------------- -#}

{#- Not a default operation (request it: operations: [..., compute_partition_stats]). It reads
    manifests, not data: no interval by default. -#}
{% macro _iceberg_maint_compute_partition_stats_defaults() %}
  {{ return({'enabled': true, 'interval_hours': none}) }}
{% endmacro %}

{% macro _iceberg_maint_compute_partition_stats_policy_errors(section) %}
  {{ return([]) }}
{% endmacro %}

{#- Iceberg refuses an unpartitioned table ("Table must be partitioned"): health.partitioned
    false (the plan reads it from the partitions metadata table's columns) is never due. -#}
{% macro _iceberg_maint_compute_partition_stats_due(section, health) %}
  {%- if health.get('partitioned') is sameas false -%}
    {{ return({'due': false, 'reason': 'the table is unpartitioned: Iceberg computes partition statistics only for '
        ~ 'a partitioned table'}) }}
  {%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_statistics_due(health, 'partition_statistics_snapshot_id',
      'partition statistics')) }}
{% endmacro %}

{% macro _iceberg_maint_compute_partition_stats_planned_sql(relation, section, context={}) %}
  {{ return({'sql': dbt_iceberg_maint.get_compute_partition_stats_sql(relation=relation), 'reason': none}) }}
{% endmacro %}
