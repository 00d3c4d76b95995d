{#- Fuzzed input (lab/fuzz.py, issues 14 and 22): many cases in one dbt invocation. Jinja cannot
    catch a compiler error, so each case first runs the checks the public macro runs before it
    raises (the same validator macros); a case they accept then goes through the public macro
    itself with dry_run=true (it renders and logs, it never executes), or through its `get_*_sql`
    twin (kind 'twin': rendered only). `torture_fuzz_one` runs a single case through the public
    macro (or the twin) alone, so a refusal is the real compiler error. Each case logs
    `TORTURE_FUZZ {"id", "errors", "sql", "status", "properties_sql", "cold", "rendered_at"}`:
    `cold` is the cold-partition predicate of the policy's cold_partitions_hours (before and after
    the plan), `rendered_at` the UTC instant right after rendering (the oracle's clock). -#}

{% macro torture_fuzz_cases(cases, relation, cold_relation=none) %}
  {%- for case in cases -%}
    {%- do log('TORTURE_FUZZ ' ~ tojson(torture_fuzz_outcome(case, relation, cold_relation)), info=true) -%}
  {%- endfor -%}
{% endmacro %}

{#- The policy defaults the macros merge a model's policy over: the fuzz draws every key of it. -#}
{% macro torture_fuzz_policy_defaults(relation=none, cold_relation=none) %}
  {%- do log('TORTURE_FUZZ_DEFAULTS ' ~ tojson(dbt_iceberg_maint._iceberg_maint_policy_defaults()), info=true) -%}
{% endmacro %}

{% macro torture_fuzz_now() %}
  {{ return(modules.datetime.datetime.now(modules.pytz.utc).strftime('%Y-%m-%d %H:%M:%S.%f')) }}
{% endmacro %}

{#- A `get_*_sql` twin by its name (lab/fuzz.py finds them in the package's macro files). -#}
{% macro torture_fuzz_twin(name) %}
  {{ return(dbt_iceberg_maint[name]) }}
{% endmacro %}

{% macro torture_fuzz_one(case, relation, cold_relation=none) %}
  {%- set target = torture_fuzz_relation(case, cold_relation if case.get('target') == 'cold' else relation) -%}
  {%- if case.kind == 'steps' -%}
    {#- Through the public macro only when its checks refuse: an accepted step would really run. -#}
    {%- set outcome = torture_fuzz_outcome(case, relation, cold_relation) -%}
    {%- if outcome.errors -%}
      {%- do dbt_iceberg_maint.execute_maintenance_steps(**(case.get('kwargs') or {})) -%}
    {%- endif -%}
    {%- do log('TORTURE_FUZZ ' ~ tojson(outcome), info=true) -%}
    {{ return(none) }}
  {%- endif -%}
  {%- if case.kind == 'twin' -%}
    {%- set rendered = torture_fuzz_twin(case.twin)(**(case.get('kwargs') or {})) -%}
    {%- do log('TORTURE_FUZZ ' ~ tojson({'id': case.id, 'errors': [], 'sql': rendered, 'status': 'rendered',
          'rendered_at': torture_fuzz_now()}), info=true) -%}
    {{ return(none) }}
  {%- endif -%}
  {#- Never execute: a missing or false dry_run becomes true; any other value stays, to be refused. -#}
  {%- set kwargs = {} -%}
  {%- do kwargs.update(case.get('kwargs') or {}) -%}
  {%- if kwargs.get('dry_run') is none or kwargs.get('dry_run') is sameas false -%}
    {%- do kwargs.update({'dry_run': true}) -%}
  {%- endif -%}
  {%- if case.kind == 'procedure' -%}
    {%- set result = torture_fuzz_procedure(case.procedure)(relation=target, **kwargs) -%}
    {%- do log('TORTURE_FUZZ ' ~ tojson({'id': case.id, 'errors': [], 'sql': result.sql, 'status': result.status}),
          info=true) -%}
  {%- else -%}
    {%- set result = dbt_iceberg_maint.maintain(relation=target, policy=case.policy, dry_run=true,
          operations=case.get('operations'), force=case.get('operations') is not none) -%}
    {%- do log('TORTURE_FUZZ ' ~ tojson({'id': case.id, 'errors': [], 'status': 'dry_run'}), info=true) -%}
  {%- endif -%}
{% endmacro %}

{% macro torture_fuzz_relation(case, relation) %}
  {%- set name = case.get('relation') -%}
  {%- if name is none -%}{{ return(relation) }}{%- endif -%}
  {#- dbt-spark refuses a Relation with a database ("Cannot set database in spark!") before any
      macro runs; a dbt-spark user names a catalog in the 'catalog.schema.table' string instead. -#}
  {%- if name is mapping and name.get('database') -%}
    {{ return(name.get('database') ~ '.' ~ name.get('schema') ~ '.' ~ name.get('identifier')) }}
  {%- elif name is mapping -%}
    {{ return(api.Relation.create(schema=name.get('schema'), identifier=name.get('identifier'))) }}
  {%- endif -%}
  {{ return(name) }}
{% endmacro %}

{% macro torture_fuzz_procedure(name) %}
  {{ return({
      'rewrite_data_files': dbt_iceberg_maint.rewrite_data_files,
      'expire_snapshots': dbt_iceberg_maint.expire_snapshots,
      'remove_orphan_files': dbt_iceberg_maint.remove_orphan_files,
      'rewrite_manifests': dbt_iceberg_maint.rewrite_manifests,
      'rewrite_position_delete_files': dbt_iceberg_maint.rewrite_position_delete_files,
  }[name]) }}
{% endmacro %}

{% macro torture_fuzz_outcome(case, relation, cold_relation=none) %}
  {%- set kwargs = case.get('kwargs') or {} -%}
  {%- set relation = cold_relation if case.get('target') == 'cold' else relation -%}
  {%- set outcome = {'id': case.id, 'errors': [], 'sql': none, 'status': none, 'properties_sql': none, 'cold': [],
        'rendered_at': none} -%}
  {%- if case.kind == 'procedure' -%}
    {%- set validator = iceberg_maint_argument_validator(case.procedure) -%}
    {%- set arguments = {} -%}
    {%- for key, value in kwargs.items() if key != 'dry_run' or case.procedure == 'remove_orphan_files' -%}
      {%- do arguments.update({key: value}) -%}
    {%- endfor -%}
    {%- do outcome.errors.extend(dbt_iceberg_maint._iceberg_maint_check_boolean(case.procedure, 'dry_run',
          kwargs.get('dry_run'))) -%}
    {%- do outcome.errors.extend(validator(**arguments)) -%}
    {%- if case.procedure == 'remove_orphan_files' and not outcome.errors -%}
      {#- The public macro's own location check (it reads the table's location). -#}
      {%- do outcome.errors.extend(dbt_iceberg_maint._iceberg_maint_orphan_location_errors(relation,
            kwargs.get('location'))) -%}
    {%- endif -%}
    {%- if not outcome.errors -%}
      {%- do arguments.update({'dry_run': true}) -%}
      {%- set result = torture_fuzz_procedure(case.procedure)(relation=relation, **arguments) -%}
      {%- do outcome.update({'sql': result.sql, 'status': result.status, 'rendered_at': torture_fuzz_now()}) -%}
    {%- endif -%}
  {%- elif case.kind == 'steps' -%}
    {#- execute_maintenance_steps' own checks, in its order; an accepted plan is never executed. -#}
    {%- set steps, record = kwargs.get('steps'), kwargs.get('record') -%}
    {%- set check_boolean = dbt_iceberg_maint._iceberg_maint_check_boolean -%}
    {%- do outcome.errors.extend(dbt_iceberg_maint._iceberg_maint_step_errors(steps)
          + dbt_iceberg_maint._iceberg_maint_record_errors(record)
          + check_boolean('execute_maintenance_steps', 'history_checked', kwargs.get('history_checked', false))
          + check_boolean('execute_maintenance_steps', 'settled', kwargs.get('settled', false))
          + dbt_iceberg_maint._iceberg_maint_settled_errors(steps, record, kwargs.get('settled', false),
              kwargs.get('nodes'))
          + dbt_iceberg_maint._iceberg_maint_checked_errors(kwargs.get('checked'))
          + check_boolean('execute_maintenance_steps', 'keep_leases', kwargs.get('keep_leases', false))
          + check_boolean('execute_maintenance_steps', 'defer_history', kwargs.get('defer_history', false))
          + dbt_iceberg_maint._iceberg_maint_handed_lease_errors(steps, kwargs.get('leases'))) -%}
    {%- if not outcome.errors -%}
      {%- do outcome.update({'sql': steps | selectattr('status', 'equalto', 'planned') | map(attribute='sql') | list,
            'status': 'accepted', 'rendered_at': torture_fuzz_now()}) -%}
    {%- endif -%}
  {%- elif case.kind == 'twin' -%}
    {%- set procedure = case.twin[4:-4] -%}
    {%- if procedure in ['rewrite_data_files', 'expire_snapshots', 'remove_orphan_files', 'rewrite_manifests',
          'rewrite_position_delete_files'] -%}
      {%- set arguments = {} -%}
      {%- for key, value in kwargs.items() if key != 'relation' -%}{%- do arguments.update({key: value}) -%}{%- endfor -%}
      {%- do outcome.errors.extend(iceberg_maint_argument_validator(procedure)(**arguments)) -%}
    {%- endif -%}
    {%- if not outcome.errors -%}
      {%- set rendered = torture_fuzz_twin(case.twin)(**kwargs) -%}
      {%- do outcome.update({'sql': rendered, 'status': 'rendered', 'rendered_at': torture_fuzz_now()}) -%}
    {%- endif -%}
  {%- elif case.kind == 'policy' -%}
    {%- set policy = case.policy -%}
    {%- do outcome.errors.extend(dbt_iceberg_maint._iceberg_maint_policy_shape_errors(policy)) -%}
    {%- if not outcome.errors -%}
      {%- do outcome.errors.extend(dbt_iceberg_maint._iceberg_maint_policy_errors(
            dbt_iceberg_maint._iceberg_maint_resolved_policy(policy))) -%}
      {%- do outcome.errors.extend(dbt_iceberg_maint.table_properties_policy_errors(policy)) -%}
    {%- endif -%}
    {%- if not outcome.errors -%}
      {%- set compaction = dbt_iceberg_maint._iceberg_maint_resolved_policy(policy).compaction -%}
      {%- set hours = compaction.cold_partitions_hours if compaction.enabled else none -%}
      {%- if hours -%}
        {%- do outcome.cold.append(dbt_iceberg_maint.cold_partitions_where(relation, hours)) -%}
      {%- endif -%}
      {%- set steps = dbt_iceberg_maint.get_maintenance_plan(relation=relation, policy=policy, force=true,
            operations=case.get('operations')) -%}
      {%- do outcome.update({'status': steps | map(attribute='status') | join(','),
            'sql': steps | map(attribute='sql') | select | list, 'rendered_at': torture_fuzz_now()}) -%}
      {%- if hours -%}
        {%- do outcome.cold.append(dbt_iceberg_maint.cold_partitions_where(relation, hours)) -%}
      {%- endif -%}
      {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(relation) -%}
      {%- set declared = dbt_iceberg_maint.declared_table_properties(policy) -%}
      {%- if declared -%}
        {%- set current = dbt_iceberg_maint._iceberg_maint_table_properties(table) -%}
        {%- do outcome.update({'properties_sql': dbt_iceberg_maint.get_apply_table_properties_sql(table, declared,
              current)}) -%}
      {%- endif -%}
    {%- endif -%}
  {%- endif -%}
  {{ return(outcome) }}
{% endmacro %}
