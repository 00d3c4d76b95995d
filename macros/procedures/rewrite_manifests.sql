{#- Iceberg `rewrite_manifests`: consolidate many small manifests into few. -#}

{% macro get_rewrite_manifests_sql(relation=none, use_caching=none, spec_id=none) %}
  {{ return(adapter.dispatch('get_rewrite_manifests_sql', 'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, use_caching=use_caching, spec_id=spec_id)) }}
{% endmacro %}

{% macro default__get_rewrite_manifests_sql(relation, use_caching, spec_id) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.get_rewrite_manifests_sql is not implemented for adapter '"
        ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__get_rewrite_manifests_sql(relation, use_caching, spec_id) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_rewrite_manifests_errors(
        use_caching, spec_id)) -%}
  {%- set arguments = [['table',
        dbt_iceberg_maint._iceberg_maint_string_literal(dbt_iceberg_maint._iceberg_maint_table_name(relation))]] -%}
  {%- if use_caching is not none -%}{%- do arguments.append(['use_caching',
        dbt_iceberg_maint._iceberg_maint_boolean_literal(use_caching)]) -%}{%- endif -%}
  {%- if spec_id is not none -%}{%- do arguments.append(['spec_id', spec_id | string]) -%}{%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_call_sql(relation, 'rewrite_manifests', arguments)) }}
{% endmacro %}


{% macro _iceberg_maint_rewrite_manifests_errors(use_caching=none, spec_id=none) %}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_check_boolean('rewrite_manifests', 'use_caching', use_caching) -%}
  {%- if spec_id is not none and (spec_id is boolean or spec_id is not integer or spec_id < 0) -%}
    {%- do errors.append("rewrite_manifests: argument `spec_id` is " ~ spec_id
          ~ "; expected a partition spec id, a whole number >= 0") -%}
  {%- endif -%}
  {{ return(errors) }}
{% endmacro %}


{% macro rewrite_manifests(relation=none, use_caching=none, spec_id=none, dry_run=false) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_outside_node(adapter.dispatch('rewrite_manifests', 'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, use_caching=use_caching, spec_id=spec_id,
          dry_run=dry_run))) }}
{% endmacro %}

{% macro default__rewrite_manifests(relation, use_caching, spec_id, dry_run) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.rewrite_manifests is not implemented for adapter '"
        ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__rewrite_manifests(relation, use_caching, spec_id, dry_run) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_check_boolean(
        'rewrite_manifests', 'dry_run', dry_run)) -%}
  {%- set sql = dbt_iceberg_maint.get_rewrite_manifests_sql(relation, use_caching, spec_id) -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_run_procedure(relation, 'rewrite_manifests', sql, dry_run)) }}
{% endmacro %}


{#- ---- As a maintenance step (get_maintenance_plan) ---------------------------------------- -#}

{% macro _iceberg_maint_rewrite_manifests_defaults() %}
  {{ return({'enabled': true, 'min_manifests': 5, 'use_caching': none, 'interval_hours': none}) }}
{% endmacro %}

{% macro _iceberg_maint_rewrite_manifests_policy_errors(section) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_check_positive_number('policy rewrite_manifests', 'min_manifests',
      section.min_manifests, integer=true)
      + dbt_iceberg_maint._iceberg_maint_rewrite_manifests_errors(use_caching=section.use_caching)) }}
{% endmacro %}

{% macro _iceberg_maint_rewrite_manifests_due(section, health) %}
  {%- set threshold = section.min_manifests -%}
  {%- set count = health.data_manifests | int -%}
  {%- if count >= threshold -%}
    {{ return({'due': true, 'reason': count ~ ' data manifests, >= threshold of ' ~ threshold}) }}
  {%- endif -%}
  {{ return({'due': false, 'reason': 'only ' ~ count ~ ' data manifests, below threshold of ' ~ threshold}) }}
{% endmacro %}

{% macro _iceberg_maint_rewrite_manifests_planned_sql(relation, section, context={}) %}
  {{ return({'sql': dbt_iceberg_maint.get_rewrite_manifests_sql(relation=relation, use_caching=section.use_caching),
      'reason': none}) }}
{% endmacro %}
