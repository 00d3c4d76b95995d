{#- Iceberg `rewrite_position_delete_files`: compact position delete files (merge-on-read
    tables) and drop dangling ones. -#}

{% macro get_rewrite_position_delete_files_sql(relation=none, where=none, options=none) %}
  {{ return(adapter.dispatch('get_rewrite_position_delete_files_sql', 'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, where=where, options=options)) }}
{% endmacro %}

{% macro default__get_rewrite_position_delete_files_sql(relation, where, options) %}
  {{ exceptions.raise_compiler_error(
        "dbt_iceberg_maint.get_rewrite_position_delete_files_sql is not implemented for adapter '" ~ adapter.type()
        ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__get_rewrite_position_delete_files_sql(relation, where, options) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(
        dbt_iceberg_maint._iceberg_maint_rewrite_position_delete_files_errors(where, options)) -%}
  {%- set arguments = [['table',
        dbt_iceberg_maint._iceberg_maint_string_literal(dbt_iceberg_maint._iceberg_maint_table_name(relation))]] -%}
  {%- if options -%}{%- do arguments.append(['options',
        dbt_iceberg_maint._iceberg_maint_map_literal(options)]) -%}{%- endif -%}
  {%- if where is not none -%}{%- do arguments.append(['where',
        dbt_iceberg_maint._iceberg_maint_string_literal(where.strip())]) -%}{%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_call_sql(relation, 'rewrite_position_delete_files', arguments)) }}
{% endmacro %}


{% macro _iceberg_maint_rewrite_position_delete_files_errors(where=none, options=none) %}
  {%- set proc = 'rewrite_position_delete_files' -%}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_check_where(proc, 'where', where) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_string_map(proc, 'options', options)) -%}
  {{ return(errors) }}
{% endmacro %}


{% macro rewrite_position_delete_files(relation=none, where=none, options=none, dry_run=false) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_outside_node(adapter.dispatch('rewrite_position_delete_files',
        'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, where=where, options=options, dry_run=dry_run))) }}
{% endmacro %}

{% macro default__rewrite_position_delete_files(relation, where, options, dry_run) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.rewrite_position_delete_files is not implemented for adapter '"
        ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__rewrite_position_delete_files(relation, where, options, dry_run) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_check_boolean(
        'rewrite_position_delete_files', 'dry_run', dry_run)) -%}
  {%- set sql = dbt_iceberg_maint.get_rewrite_position_delete_files_sql(relation, where, options) -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_run_procedure(relation, 'rewrite_position_delete_files', sql, dry_run)) }}
{% endmacro %}


{#- ---- As a maintenance step (get_maintenance_plan) ---------------------------------------- -#}

{% macro _iceberg_maint_rewrite_position_delete_files_defaults() %}
  {{ return({'enabled': true, 'min_input_files': 5, 'where': none, 'options': {},
             'interval_hours': none}) }}
{% endmacro %}

{% macro _iceberg_maint_rewrite_position_delete_files_policy_errors(section) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_check_positive_number('policy rewrite_position_delete_files',
      'min_input_files', section.min_input_files, integer=true)
      + dbt_iceberg_maint._iceberg_maint_rewrite_position_delete_files_errors(section.where, section.options)) }}
{% endmacro %}

{#- Deletion vectors (format v3, Puffin; health.deletion_vectors) are not rewritten by
    rewrite_position_delete_files (Iceberg 1.10 returns nothing once every delete is one): only the
    other delete files count. Twin: policy/operations.py `_position_deletes_due`. -#}
{% macro _iceberg_maint_rewrite_position_delete_files_due(section, health) %}
  {%- set threshold = section.min_input_files -%}
  {%- set vectors = (health.get('deletion_vectors') or 0) | int -%}
  {%- if vectors > 0 -%}
    {%- set count = (health.delete_files or 0) | int - vectors -%}
    {%- if count >= threshold -%}
      {{ return({'due': true, 'reason': count ~ ' delete files besides ' ~ vectors ~ ' deletion vectors, >= threshold of '
          ~ threshold}) }}
    {%- elif count <= 0 -%}
      {{ return({'due': false, 'reason': 'only deletion vectors (' ~ vectors ~ '), which need no rewrite: '
          ~ 'rewrite_data_files applies them'}) }}
    {%- endif -%}
    {{ return({'due': false, 'reason': 'only ' ~ count ~ ' delete files besides ' ~ vectors
        ~ ' deletion vectors (which need no rewrite), below threshold of ' ~ threshold}) }}
  {%- endif -%}
  {%- set count = health.delete_files | int -%}
  {%- if count >= threshold -%}
    {{ return({'due': true, 'reason': count ~ ' delete files, >= threshold of ' ~ threshold}) }}
  {%- endif -%}
  {{ return({'due': false, 'reason': 'only ' ~ count ~ ' delete files, below threshold of ' ~ threshold}) }}
{% endmacro %}

{% macro _iceberg_maint_rewrite_position_delete_files_planned_sql(relation, section, context={}) %}
  {%- set options = {'min-input-files': '1' if context.get('force') else section.min_input_files | string} -%}
  {%- do options.update(section.options or {}) -%}
  {{ return({'sql': dbt_iceberg_maint.get_rewrite_position_delete_files_sql(relation=relation, where=section.where,
      options=options), 'reason': none}) }}
{% endmacro %}
