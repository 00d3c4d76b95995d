{#- Iceberg `rewrite_data_files`: compaction (binpack) or clustering (sort, zorder). Iceberg has
    no dry run for it, so dry_run=true renders the CALL and does not execute it. -#}

{% macro get_rewrite_data_files_sql(relation=none, where=none, strategy=none, sort_order=none, options=none) %}
  {{ return(adapter.dispatch('get_rewrite_data_files_sql', 'dbt_iceberg_maint')(relation if relation is not none else this, where, strategy, sort_order, options)) }}
{% endmacro %}

{% macro default__get_rewrite_data_files_sql(relation, where, strategy, sort_order, options) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.get_rewrite_data_files_sql is not implemented for adapter '" ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__get_rewrite_data_files_sql(relation, where, strategy, sort_order, options) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(
        dbt_iceberg_maint._iceberg_maint_rewrite_data_files_errors(where, strategy, sort_order, options)) -%}
  {%- set arguments = [['table', dbt_iceberg_maint._iceberg_maint_string_literal(dbt_iceberg_maint._iceberg_maint_table_name(relation))]] -%}
  {#- Iceberg infers `sort` when only sort_order is given; say so explicitly in the SQL. -#}
  {%- set effective_strategy = strategy if strategy is not none else ('sort' if sort_order is not none else none) -%}
  {%- if effective_strategy is not none -%}{%- do arguments.append(['strategy', dbt_iceberg_maint._iceberg_maint_string_literal(effective_strategy | lower)]) -%}{%- endif -%}
  {%- if sort_order is not none -%}{%- do arguments.append(['sort_order', dbt_iceberg_maint._iceberg_maint_string_literal(sort_order.strip())]) -%}{%- endif -%}
  {%- if options -%}{%- do arguments.append(['options', dbt_iceberg_maint._iceberg_maint_map_literal(options)]) -%}{%- endif -%}
  {%- if where is not none -%}{%- do arguments.append(['where', dbt_iceberg_maint._iceberg_maint_string_literal(where.strip())]) -%}{%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_call_sql(relation, 'rewrite_data_files', arguments)) }}
{% endmacro %}


{#- Every problem with the arguments, as messages (empty list when all is well). -#}
{% macro _iceberg_maint_rewrite_data_files_errors(where=none, strategy=none, sort_order=none, options=none) %}
  {%- set proc = 'rewrite_data_files' -%}
  {%- set errors = [] -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_sql_fragment(proc, 'where', where)) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_choice(proc, 'strategy', strategy, ['binpack', 'sort'])) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_string_map(proc, 'options', options)) -%}
  {%- if sort_order is not none -%}
    {%- set fragment_errors = dbt_iceberg_maint._iceberg_maint_check_sql_fragment(proc, 'sort_order', sort_order) -%}
    {%- do errors.extend(fragment_errors) -%}
    {%- if strategy is string and strategy | lower == 'binpack' -%}
      {%- do errors.append(proc ~ ": argument `sort_order` is '" ~ sort_order ~ "' but `strategy` is '" ~ strategy ~ "'; a sort order needs strategy 'sort' (or no strategy, which means sort)") -%}
    {%- elif not fragment_errors -%}
      {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_sort_order(proc, sort_order)) -%}
    {%- endif -%}
  {%- endif -%}
  {{ return(errors) }}
{% endmacro %}


{#- 'col [ASC|DESC] [NULLS FIRST|LAST], ...' or 'zorder(col, ...)'; Iceberg refuses to mix them. -#}
{% macro _iceberg_maint_check_sort_order(proc, sort_order) %}
  {%- set column = '[A-Za-z_][A-Za-z0-9_.]*' -%}
  {%- set zorder = '^\\s*zorder\\s*\\(\\s*' ~ column ~ '(\\s*,\\s*' ~ column ~ ')*\\s*\\)\\s*$' -%}
  {%- set term = '^\\s*' ~ column ~ '(\\s+(asc|desc))?(\\s+nulls\\s+(first|last))?\\s*$' -%}
  {%- if 'zorder' in sort_order | lower -%}
    {%- if not modules.re.match(zorder, sort_order, modules.re.IGNORECASE) -%}
      {{ return([proc ~ ": argument `sort_order` is '" ~ sort_order ~ "'; a z-order must be exactly 'zorder(col1, col2, ...)' and cannot be mixed with other sort columns"]) }}
    {%- endif -%}
  {%- else -%}
    {%- for item in sort_order.split(',') -%}
      {%- if not modules.re.match(term, item, modules.re.IGNORECASE) -%}
        {{ return([proc ~ ": argument `sort_order` is '" ~ sort_order ~ "'; expected 'col [ASC|DESC] [NULLS FIRST|LAST], ...' or 'zorder(col1, col2, ...)'"]) }}
      {%- endif -%}
    {%- endfor -%}
  {%- endif -%}
  {{ return([]) }}
{% endmacro %}


{% macro rewrite_data_files(relation=none, where=none, strategy=none, sort_order=none, options=none, dry_run=false) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_outside_node(adapter.dispatch('rewrite_data_files', 'dbt_iceberg_maint')(relation if relation is not none else this, where, strategy, sort_order, options, dry_run))) }}
{% endmacro %}

{% macro default__rewrite_data_files(relation, where, strategy, sort_order, options, dry_run) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.rewrite_data_files is not implemented for adapter '" ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__rewrite_data_files(relation, where, strategy, sort_order, options, dry_run) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_check_boolean('rewrite_data_files', 'dry_run', dry_run)) -%}
  {%- set sql = dbt_iceberg_maint.get_rewrite_data_files_sql(relation, where, strategy, sort_order, options) -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_run_procedure(relation, 'rewrite_data_files', sql, dry_run)) }}
{% endmacro %}
