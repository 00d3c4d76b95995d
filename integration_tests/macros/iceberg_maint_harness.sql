{#- Test harness (used by tests/unit/test_procedure_sql.py): render many cases in one dbt
    invocation without touching Spark. Each case logs one line
    `ICEBERG_MAINT_CASE {"id": ..., "sql": ..., "errors": [...], "value": ...}`. -#}

{#- The checks a procedure macro runs on its arguments before it raises (lists of messages). -#}
{% macro iceberg_maint_argument_validator(procedure) %}
  {{ return({
      'rewrite_data_files': dbt_iceberg_maint._iceberg_maint_rewrite_data_files_errors,
      'expire_snapshots': dbt_iceberg_maint._iceberg_maint_expire_snapshots_errors,
      'remove_orphan_files': dbt_iceberg_maint._iceberg_maint_remove_orphan_files_errors,
      'rewrite_manifests': dbt_iceberg_maint._iceberg_maint_rewrite_manifests_errors,
      'rewrite_position_delete_files': dbt_iceberg_maint._iceberg_maint_rewrite_position_delete_files_errors,
      'compute_table_stats': dbt_iceberg_maint._iceberg_maint_compute_table_stats_errors,
      'compute_partition_stats': dbt_iceberg_maint._iceberg_maint_compute_partition_stats_errors,
  }[procedure]) }}
{% endmacro %}

{% macro iceberg_maint_render_cases(cases) %}
  {%- for case in cases -%}
    {%- set kwargs = case.get('kwargs') or {} -%}
    {%- set kind = case.get('kind', 'sql') -%}
    {%- set outcome = {'id': case.id} -%}
    {%- if kind == 'sql' -%}
      {%- set getter = {
          'rewrite_data_files': dbt_iceberg_maint.get_rewrite_data_files_sql,
          'expire_snapshots': dbt_iceberg_maint.get_expire_snapshots_sql,
          'remove_orphan_files': dbt_iceberg_maint.get_remove_orphan_files_sql,
          'rewrite_manifests': dbt_iceberg_maint.get_rewrite_manifests_sql,
          'rewrite_position_delete_files': dbt_iceberg_maint.get_rewrite_position_delete_files_sql,
          'compute_table_stats': dbt_iceberg_maint.get_compute_table_stats_sql,
          'compute_partition_stats': dbt_iceberg_maint.get_compute_partition_stats_sql,
      }[case.procedure] -%}
      {%- do outcome.update({'sql': getter(**kwargs)}) -%}
    {%- elif kind == 'errors' -%}
      {%- do outcome.update({'errors': iceberg_maint_argument_validator(case.procedure)(**kwargs)}) -%}
    {%- elif kind == 'due' -%}
      {%- set policy = dbt_iceberg_maint._iceberg_maint_resolved_policy(kwargs.get('policy') or {}) -%}
      {%- do outcome.update({'value': dbt_iceberg_maint._iceberg_maint_due(kwargs.operation, policy,
            kwargs.health)}) -%}
    {%- elif kind == 'policy_errors' -%}
      {%- set resolved = dbt_iceberg_maint._iceberg_maint_resolved_policy(kwargs.policy) -%}
      {%- do outcome.update({'errors': dbt_iceberg_maint._iceberg_maint_policy_shape_errors(kwargs.policy)
            + dbt_iceberg_maint._iceberg_maint_policy_errors(resolved)}) -%}
    {%- elif kind == 'planned' -%}
      {%- set policy = dbt_iceberg_maint._iceberg_maint_resolved_policy(kwargs.get('policy') or {}) -%}
      {%- do outcome.update({'sql': dbt_iceberg_maint._iceberg_maint_planned_sql(kwargs.relation, kwargs.operation,
            policy, cold_scope=kwargs.get('cold_scope')).sql}) -%}
    {%- elif kind == 'policy' -%}
      {%- do outcome.update({'value': dbt_iceberg_maint._iceberg_maint_resolved_policy(kwargs.get('policy'),
            kwargs.get('overrides'))}) -%}
    {%- elif kind == 'compaction_options' -%}
      {%- set policy = dbt_iceberg_maint._iceberg_maint_resolved_policy(kwargs.get('policy') or {}) -%}
      {%- do outcome.update({'value': dbt_iceberg_maint._iceberg_maint_compaction_options(policy.compaction,
            dbt_iceberg_maint._iceberg_maint_uses_partial_progress(policy.compaction, kwargs.get('table_bytes')))}) -%}
    {%- elif kind == 'names' -%}
      {%- do outcome.update({'value': [
          dbt_iceberg_maint._iceberg_maint_table_name(kwargs.relation),
          dbt_iceberg_maint._iceberg_maint_qualified_name(kwargs.relation),
          dbt_iceberg_maint._iceberg_maint_procedure_namespace(kwargs.relation)]}) -%}
    {%- elif kind == 'plan_case' -%}
      {%- do outcome.update(iceberg_maint_plan_case(case)) -%}
    {%- elif kind == 'step_errors' -%}
      {%- do outcome.update({'errors': dbt_iceberg_maint._iceberg_maint_step_errors(kwargs.steps)}) -%}
    {%- elif kind == 'settled_errors' -%}
      {%- do outcome.update({'errors': dbt_iceberg_maint._iceberg_maint_settled_errors(kwargs.steps,
            kwargs.get('record'), kwargs.get('settled', false), kwargs.get('nodes'))}) -%}
    {%- elif kind == 'protocol' -%}
      {%- do outcome.update({'value': dbt_iceberg_maint._iceberg_maint_protocol()}) -%}
    {%- elif kind == 'log_marker' -%}
      {%- do dbt_iceberg_maint._iceberg_maint_log_marker(kwargs.marker, kwargs.payload) -%}
    {%- elif kind == 'shard' -%}
      {%- set parsed = dbt_iceberg_maint._iceberg_maint_parse_shard('iceberg_maintenance', kwargs.shard) -%}
      {%- set shards = [] -%}
      {%- for table in kwargs.get('tables', []) -%}
        {%- do shards.append(dbt_iceberg_maint._iceberg_maint_shard_of(table, kwargs.n)) -%}
      {%- endfor -%}
      {%- do outcome.update({'value': {'parsed': parsed.value, 'shards': shards}, 'errors': parsed.errors}) -%}
    {%- elif kind == 'unchanged_since' -%}
      {%- set lineage = {} -%}
      {%- for row in kwargs.lineage -%}
        {%- do lineage.update({row[0]: {'parent': row[1], 'operation': row[2]}}) -%}
      {%- endfor -%}
      {%- do outcome.update({'value': dbt_iceberg_maint._iceberg_maint_unchanged_since(kwargs.checked, kwargs.current,
            lineage)}) -%}
    {%- elif kind == 'statistics_file_snapshot' -%}
      {%- do outcome.update({'value': dbt_iceberg_maint._iceberg_maint_statistics_file_snapshot(kwargs.metrics)}) -%}
    {%- elif kind == 'context' -%}
      {%- do outcome.update({'value': (model.get('resource_type') if model is mapping else none) | string}) -%}
    {%- elif kind == 'selection' -%}
      {%- do outcome.update({'value': dbt_iceberg_maint._iceberg_maint_selected_models(kwargs.get('select')) | map(
            attribute='name') | list}) -%}
    {%- endif -%}
    {%- do log('ICEBERG_MAINT_CASE ' ~ tojson(outcome), info=true) -%}
  {%- endfor -%}
{% endmacro %}


{#- The SQL of each procedure for `ref()` and `source()` relations (relation objects, not strings). -#}
{% macro iceberg_maint_render_relation_cases() %}
  {%- set relations = {'ref': ref('events'), 'source': source('landing', 'raw_events')} -%}
  {%- for id, relation in relations.items() -%}
    {%- do log('ICEBERG_MAINT_CASE ' ~ tojson({'id': id, 'sql': [
          dbt_iceberg_maint.get_rewrite_data_files_sql(relation),
          dbt_iceberg_maint.get_expire_snapshots_sql(relation),
          dbt_iceberg_maint.get_remove_orphan_files_sql(relation),
          dbt_iceberg_maint.get_rewrite_manifests_sql(relation),
          dbt_iceberg_maint.get_rewrite_position_delete_files_sql(relation)]}), info=true) -%}
  {%- endfor -%}
{% endmacro %}


{#- Call one public macro of the package with keyword arguments and log what it returns as
    `ICEBERG_MAINT_CASE {"id": "return", "value": ...}` (tests check the returned dict). -#}
{% macro iceberg_maint_call(macro_name, kwargs={}) %}
  {%- set macros = {
      'rewrite_data_files': dbt_iceberg_maint.rewrite_data_files,
      'expire_snapshots': dbt_iceberg_maint.expire_snapshots,
      'remove_orphan_files': dbt_iceberg_maint.remove_orphan_files,
      'rewrite_manifests': dbt_iceberg_maint.rewrite_manifests,
      'rewrite_position_delete_files': dbt_iceberg_maint.rewrite_position_delete_files,
      'compute_table_stats': dbt_iceberg_maint.compute_table_stats,
      'compute_partition_stats': dbt_iceberg_maint.compute_partition_stats,
      'maintain': dbt_iceberg_maint.maintain,
      'table_health': dbt_iceberg_maint.table_health,
      'find_left_behind_locations': dbt_iceberg_maint.find_left_behind_locations,
      'remove_left_behind_locations': dbt_iceberg_maint.remove_left_behind_locations,
      'get_remove_left_behind_locations_sql': dbt_iceberg_maint.get_remove_left_behind_locations_sql,
  } -%}
  {%- set returned = macros[macro_name](**kwargs) -%}
  {%- do log('ICEBERG_MAINT_CASE ' ~ tojson({'id': 'return',
        'value': dbt_iceberg_maint._iceberg_maint_json_safe(returned)}), info=true) -%}
{% endmacro %}


{#- One case of the shared policy case table (tests/policy_cases.yml): the policy's errors, or
    the steps `_iceberg_maint_plan_steps` decides from the case's table facts. -#}
{% macro iceberg_maint_plan_case(case) %}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_policy_shape_errors(case.get('policy'))
        + dbt_iceberg_maint._iceberg_maint_policy_shape_errors(case.get('overrides'), 'maintain: argument `policy`') -%}
  {%- if errors -%}{{ return({'errors': errors}) }}{%- endif -%}
  {%- set resolved = dbt_iceberg_maint._iceberg_maint_resolved_policy(case.get('policy'), case.get('overrides')) -%}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_policy_errors(resolved) -%}
  {%- if errors -%}{{ return({'errors': errors}) }}{%- endif -%}
  {%- set as_of = dbt_iceberg_maint._iceberg_maint_parse_instant('get_maintenance_plan', 'as_of', case.get('as_of')) -%}
  {%- set steps = dbt_iceberg_maint._iceberg_maint_plan_steps(case.get('table', 'analytics.events'),
        dbt_iceberg_maint._iceberg_maint_requested_operations(case.get('operations')), resolved, case.facts,
        case.get('force', false), as_of.value) -%}
  {{ return({'steps': steps, 'now': dbt_iceberg_maint._iceberg_maint_now().isoformat()}) }}
{% endmacro %}
