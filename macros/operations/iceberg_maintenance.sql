{#- `dbt run-operation iceberg_maintenance`: maintain every Iceberg model of the project (or the
    selected ones) per its policy. Plans every selected table first (get_maintenance_plan),
    logs the whole plan once (one ICEBERG_MAINT_PLAN line), then executes it step by step with
    "i of N" progress over the steps that run, one result line per operation and a summary; a
    dry run renders the plan. Fails the invocation when any operation failed. -#}

{% macro iceberg_maintenance(select=none, operations=none, dry_run=false, force=false, as_of=none) %}
  {{ return(adapter.dispatch('iceberg_maintenance', 'dbt_iceberg_maint')(
      select=select, operations=operations, dry_run=dry_run, force=force, as_of=as_of)) }}
{% endmacro %}

{% macro default__iceberg_maintenance(select, operations, dry_run, force, as_of=none) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.iceberg_maintenance is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__iceberg_maintenance(select, operations, dry_run, force, as_of=none) %}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {#- Validate everything before the first statement runs. -#}
  {%- set requested = dbt_iceberg_maint._iceberg_maint_requested_operations(operations) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(
        dbt_iceberg_maint._iceberg_maint_check_boolean('iceberg_maintenance', 'dry_run', dry_run)
        + dbt_iceberg_maint._iceberg_maint_check_boolean('iceberg_maintenance', 'force', force)
        + dbt_iceberg_maint._iceberg_maint_parse_instant('iceberg_maintenance', 'as_of', as_of).errors) -%}
  {%- set nodes = dbt_iceberg_maint._iceberg_maint_selected_models(select) -%}
  {%- for node in nodes -%}
    {%- set raw_policy = dbt_iceberg_maint._iceberg_maint_model_policy(node) -%}
    {%- set errors = dbt_iceberg_maint._iceberg_maint_policy_shape_errors(raw_policy)
          + dbt_iceberg_maint._iceberg_maint_policy_errors(dbt_iceberg_maint._iceberg_maint_resolved_policy(
              raw_policy)) -%}
    {%- if errors -%}
      {{ exceptions.raise_compiler_error("iceberg_maintenance: model " ~ node.name
            ~ " has an invalid meta.iceberg_maint policy: " ~ errors | join('; ')) }}
    {%- endif -%}
  {%- endfor -%}

  {%- set mode = ' (dry run: nothing is executed)' if dry_run else '' -%}
  {%- do log('iceberg_maintenance: ' ~ nodes | length ~ ' Iceberg model(s), operations ' ~ requested | join(', ')
        ~ mode, info=true) -%}
  {%- set named = dbt_iceberg_maint._iceberg_maint_named_models(select) -%}
  {%- set tables = [] -%}
  {%- for node in nodes -%}
    {%- set relation = api.Relation.create(schema=node.schema, identifier=node.alias or node.name) -%}
    {%- do tables.append({'model': node.package_name ~ '.' ~ node.name,
                          'table': dbt_iceberg_maint._iceberg_maint_qualified_name(relation), 'relation': relation,
                          'policy': dbt_iceberg_maint._iceberg_maint_resolved_policy(
                              dbt_iceberg_maint._iceberg_maint_model_policy(node)),
                          'required': node.name in named or (node.package_name ~ '.' ~ node.name) in named}) -%}
  {%- endfor -%}
  {%- set selection = [] -%}
  {%- for entry in tables -%}{%- do selection.append({'model': entry.model, 'table': entry.table}) -%}{%- endfor -%}
  {#- What a caller around dbt (dbt-iceberg-maint maintain) needs when planning one table fails
      at run time: the tables selected, and (START, operation null) which one was being planned. -#}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('selection', {'tables': selection, 'operations': requested},
        info=false) -%}
  {%- set steps = [] -%}
  {%- for entry in tables -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_marker('start', {'table': entry.table, 'operation': none},
          info=false) -%}
    {#- A model named in `select` must have its table; one picked by tag or by default may not be
        built yet (skipped). -#}
    {%- do steps.extend(dbt_iceberg_maint.get_maintenance_plan(relation=entry.relation, operations=requested,
          force=force, as_of=as_of, required=entry.required)) -%}
  {%- endfor -%}
  {#- The whole plan, machine-readable: dbt-iceberg-maint maintain replays its remaining steps
      when a statement Spark rejects stops this macro. -#}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('plan', {'tables': selection, 'operations': requested,
        'as_of': as_of, 'steps': steps}) -%}
  {%- set results = dbt_iceberg_maint._iceberg_maint_execute_steps(steps, dry_run, path='iceberg_maintenance') -%}
  {%- if not dry_run and not force -%}
    {%- for entry in tables -%}
      {%- set own = namespace(steps=[], results=[]) -%}
      {%- for step in steps if step.table == entry.table -%}
        {%- set own.steps = own.steps + [step] -%}
      {%- endfor -%}
      {%- for result in results if result.table == entry.table -%}
        {%- set own.results = own.results + [result] -%}
      {%- endfor -%}
      {%- do dbt_iceberg_maint._iceberg_maint_record_checks(entry.table, entry.policy, own.steps, own.results) -%}
    {%- endfor -%}
  {%- endif -%}

  {%- set counts = {'success': 0, 'skipped': 0, 'dry_run': 0, 'failed': 0} -%}
  {%- set failures = [] -%}
  {%- for result in results -%}
    {%- do counts.update({result.status: counts.get(result.status, 0) + 1}) -%}
    {%- if result.status == 'failed' -%}{%- do failures.append(result.table ~ ' ' ~ result.operation ~ ': '
          ~ result.reason) -%}{%- endif -%}
  {%- endfor -%}
  {%- do log('iceberg_maintenance summary: ' ~ nodes | length ~ ' table(s), ' ~ results | length ~ ' operation(s): '
        ~ counts.success ~ ' success, ' ~ counts.skipped ~ ' skipped, ' ~ counts.dry_run ~ ' dry_run, ' ~ counts.failed
            ~ ' failed', info=true) -%}
  {%- if failures -%}
    {{ exceptions.raise_compiler_error("iceberg_maintenance: " ~ failures | length ~ " operation(s) failed: "
          ~ failures | join(' | ')) }}
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
    {{ exceptions.raise_compiler_error("iceberg_maintenance: argument `select` is " ~ select
          ~ "; expected a model name, 'tag:<tag>', or a list of them") }}
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
      {{ exceptions.raise_compiler_error("iceberg_maintenance: argument `select` contains '" ~ selector
            ~ "', which is not an enabled Iceberg model (file_format iceberg, materialized table or incremental);"
            ~ " Iceberg models: " ~ candidates | map(attribute='name') | join(', ')) }}
    {%- endif -%}
  {%- endfor -%}
  {{ return(chosen) }}
{% endmacro %}


{#- The model names (and package.name) that `select` names directly, not through 'tag:'. -#}
{% macro _iceberg_maint_named_models(select=none) %}
  {%- set named = [] -%}
  {%- for selector in ([] if select is none else ([select] if select is string else select)) -%}
    {%- set selector = selector | string | trim -%}
    {%- if not selector.startswith('tag:') -%}{%- do named.append(selector) -%}{%- endif -%}
  {%- endfor -%}
  {{ return(named) }}
{% endmacro %}
