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
