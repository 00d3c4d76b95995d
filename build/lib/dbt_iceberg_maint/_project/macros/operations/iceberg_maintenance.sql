{#- `dbt run-operation iceberg_maintenance`: maintain every Iceberg model of the project (or the
    selected ones) per its policy, log "i of N" progress, one result line per operation and a
    summary, and fail the invocation when any operation failed. -#}

{% macro iceberg_maintenance(select=none, operations=none, dry_run=false, force=false) %}
  {{ return(adapter.dispatch('iceberg_maintenance', 'dbt_iceberg_maint')(select, operations, dry_run, force)) }}
{% endmacro %}

{% macro default__iceberg_maintenance(select, operations, dry_run, force) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.iceberg_maintenance is not implemented for adapter '" ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__iceberg_maintenance(select, operations, dry_run, force) %}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {#- Validate everything before the first statement runs. -#}
  {%- set requested = dbt_iceberg_maint._iceberg_maint_requested_operations(operations) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(
        dbt_iceberg_maint._iceberg_maint_check_boolean('iceberg_maintenance', 'dry_run', dry_run)
        + dbt_iceberg_maint._iceberg_maint_check_boolean('iceberg_maintenance', 'force', force)) -%}
  {%- set nodes = dbt_iceberg_maint._iceberg_maint_selected_models(select) -%}
  {%- for node in nodes -%}
    {%- set raw_policy = dbt_iceberg_maint._iceberg_maint_model_policy(node) -%}
    {%- set errors = dbt_iceberg_maint._iceberg_maint_policy_shape_errors(raw_policy)
          + dbt_iceberg_maint._iceberg_maint_policy_errors(dbt_iceberg_maint._iceberg_maint_resolved_policy(raw_policy)) -%}
    {%- if errors -%}
      {{ exceptions.raise_compiler_error("iceberg_maintenance: model " ~ node.name ~ " has an invalid meta.iceberg_maint policy: " ~ errors | join('; ')) }}
    {%- endif -%}
  {%- endfor -%}

  {%- set mode = ' (dry run: nothing is executed)' if dry_run else '' -%}
  {%- do log('iceberg_maintenance: ' ~ nodes | length ~ ' Iceberg model(s), operations ' ~ requested | join(', ') ~ mode, info=true) -%}
  {%- set relations = [] -%}
  {%- set planned = [] -%}
  {%- for node in nodes -%}
    {%- set relation = api.Relation.create(schema=node.schema, identifier=node.alias or node.name) -%}
    {%- do relations.append(relation) -%}
    {%- do planned.append({'model': node.package_name ~ '.' ~ node.name, 'table': dbt_iceberg_maint._iceberg_maint_qualified_name(relation)}) -%}
  {%- endfor -%}
  {#- The plan, machine-readable: what a caller around dbt (dbt-iceberg-maint maintain) needs to
      resume after a statement Spark rejects stops this macro. -#}
  {%- do log('ICEBERG_MAINT_PLAN ' ~ tojson({'tables': planned, 'operations': requested}), info=true) -%}
  {%- set results = [] -%}
  {%- for node in nodes -%}
    {%- do log(loop.index ~ ' of ' ~ loop.length ~ ' ' ~ node.name ~ ' (' ~ planned[loop.index0].table ~ ')', info=true) -%}
    {%- do results.extend(dbt_iceberg_maint.maintain(relations[loop.index0], requested, dry_run, force)) -%}
  {%- endfor -%}

  {%- set counts = {'success': 0, 'skipped': 0, 'dry_run': 0, 'failed': 0} -%}
  {%- set failures = [] -%}
  {%- for result in results -%}
    {%- do counts.update({result.status: counts.get(result.status, 0) + 1}) -%}
    {%- if result.status == 'failed' -%}{%- do failures.append(result.table ~ ' ' ~ result.operation ~ ': ' ~ result.reason) -%}{%- endif -%}
  {%- endfor -%}
  {%- do log('iceberg_maintenance summary: ' ~ nodes | length ~ ' table(s), ' ~ results | length ~ ' operation(s): '
        ~ counts.success ~ ' success, ' ~ counts.skipped ~ ' skipped, ' ~ counts.dry_run ~ ' dry_run, ' ~ counts.failed ~ ' failed', info=true) -%}
  {%- if failures -%}
    {{ exceptions.raise_compiler_error("iceberg_maintenance: " ~ failures | length ~ " operation(s) failed: " ~ failures | join(' | ')) }}
  {%- endif -%}
  {{ return(results) }}
{% endmacro %}


{#- The project's enabled Iceberg models (file_format iceberg, materialized table or
    incremental), optionally narrowed by `select`: a model name, 'tag:<tag>', or a list of
    them (union). An explicit name that is not such a model is an error. -#}
{% macro _iceberg_maint_selected_models(select=none) %}
  {%- set candidates = [] -%}
  {%- for node in graph.nodes.values() | sort(attribute='unique_id') -%}
    {%- set config = node.config or {} -%}
    {%- if node.resource_type == 'model' and config.get('enabled', true)
          and (config.get('file_format') or '') | lower == 'iceberg'
          and config.get('materialized') in ['table', 'incremental'] -%}
      {%- do candidates.append(node) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if select is none -%}{{ return(candidates) }}{%- endif -%}
  {%- set selectors = [select] if select is string else select -%}
  {%- if selectors is not iterable or selectors is mapping -%}
    {{ exceptions.raise_compiler_error("iceberg_maintenance: argument `select` is " ~ select ~ "; expected a model name, 'tag:<tag>', or a list of them") }}
  {%- endif -%}
  {%- set chosen = [] -%}
  {%- for selector in selectors -%}
    {%- set selector = selector | string | trim -%}
    {%- set matched = [] -%}
    {%- for node in candidates -%}
      {%- if (selector.startswith('tag:') and selector[4:] in (node.tags or []))
            or (not selector.startswith('tag:') and selector in [node.name, node.package_name ~ '.' ~ node.name]) -%}
        {%- do matched.append(node) -%}
        {%- if node not in chosen -%}{%- do chosen.append(node) -%}{%- endif -%}
      {%- endif -%}
    {%- endfor -%}
    {%- if not matched and not selector.startswith('tag:') -%}
      {{ exceptions.raise_compiler_error("iceberg_maintenance: argument `select` contains '" ~ selector ~ "', which is not an enabled Iceberg model (file_format iceberg, materialized table or incremental); Iceberg models: " ~ candidates | map(attribute='name') | join(', ')) }}
    {%- endif -%}
  {%- endfor -%}
  {{ return(chosen) }}
{% endmacro %}
