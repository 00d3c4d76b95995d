{#- Check the maintenance policy (`meta.iceberg_maint`) of every model and snapshot this run will
    build, before any of them runs: a mistake found by the post-hook comes after dbt has already
    replaced the table. Recommended as the project's first on-run-start hook:
      on-run-start: ["{{ dbt_iceberg_maint.validate_policies() }}"]
    Every error reads as maintain() and apply_table_properties() would raise it; a mistake that
    many models inherit (a package-level +meta) is reported once, with the models that carry it.
    Views and ephemeral models are left out (the hooks do nothing there); so are nodes outside the
    run's selection. Renders to nothing, so dbt runs no SQL for it. -#}
{% macro validate_policies() %}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set selected = selected_resources if selected_resources is defined and selected_resources else none -%}
  {%- set nodes_by_error = {} -%}
  {%- set checked = namespace(count=0) -%}
  {%- for node in graph.nodes.values() | sort(attribute='unique_id')
        if node.resource_type in ['model', 'snapshot'] and (selected is none or node.unique_id in selected)
        and (node.config or {}).get('materialized') not in ['view', 'ephemeral', 'materialized_view'] -%}
    {%- set raw_policy = dbt_iceberg_maint._iceberg_maint_model_policy(node) -%}
    {%- if raw_policy != {} -%}
      {%- set checked.count = checked.count + 1 -%}
      {%- for error in dbt_iceberg_maint._iceberg_maint_node_policy_errors(raw_policy) -%}
        {%- do nodes_by_error.update({error: nodes_by_error.get(error, []) + [node.unique_id]}) -%}
      {%- endfor -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if nodes_by_error -%}
    {%- set lines = [] -%}
    {%- for error, nodes in nodes_by_error.items() -%}
      {%- set shown = nodes[:3] | join(', ') ~ (' and ' ~ (nodes | length - 3) ~ ' more' if nodes | length > 3 else '') -%}
      {%- do lines.append('- ' ~ error ~ ' (' ~ nodes | length ~ ' node(s): ' ~ shown ~ ')') -%}
    {%- endfor -%}
    {{ exceptions.raise_compiler_error("dbt_iceberg_maint.validate_policies: " ~ lines | length
          ~ " mistake(s) in meta.iceberg_maint, found before any model ran:\n" ~ lines | join('\n')) }}
  {%- endif -%}
  {%- do log('dbt_iceberg_maint.validate_policies: ' ~ checked.count ~ ' maintenance polic(ies) valid', info=false) -%}
  {{ return('') }}
{% endmacro %}


{#- Every mistake in a node's declared policy: its shape and values (what maintain() raises) and
    its table properties (what apply_table_properties() raises). -#}
{% macro _iceberg_maint_node_policy_errors(raw_policy) %}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_policy_shape_errors(raw_policy) -%}
  {%- if not errors -%}
    {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_policy_errors(
          dbt_iceberg_maint._iceberg_maint_resolved_policy(raw_policy))) -%}
  {%- endif -%}
  {%- if raw_policy is mapping -%}
    {#- Both check retain_metadata_files: its error once. -#}
    {%- for error in dbt_iceberg_maint.table_properties_policy_errors(raw_policy) if error not in errors -%}
      {%- do errors.append(error) -%}
    {%- endfor -%}
  {%- endif -%}
  {{ return(errors) }}
{% endmacro %}
