{#- `dbt run-operation iceberg_maintenance`: maintain every Iceberg model of the project (or the
    selected ones) per its policy. Plans every selected table first (get_maintenance_plan),
    logs the whole plan once (one ICEBERG_MAINT_PLAN line), then executes it step by step with
    "i of N" progress over the steps that run, one result line per operation and a summary; a
    dry run renders the plan. Fails the invocation when any operation failed. -#}

{% macro iceberg_maintenance(select=none, operations=none, dry_run=false, force=false, as_of=none, shard=none) %}
  {{ return(adapter.dispatch('iceberg_maintenance', 'dbt_iceberg_maint')(
      select=select, operations=operations, dry_run=dry_run, force=force, as_of=as_of, shard=shard)) }}
{% endmacro %}

{% macro default__iceberg_maintenance(select, operations, dry_run, force, as_of=none, shard=none) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.iceberg_maintenance is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__iceberg_maintenance(select, operations, dry_run, force, as_of=none, shard=none) %}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {#- Validate everything before the first statement runs. -#}
  {%- set requested = dbt_iceberg_maint._iceberg_maint_requested_operations(operations) -%}
  {%- set sharding = dbt_iceberg_maint._iceberg_maint_parse_shard('iceberg_maintenance', shard) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(
        dbt_iceberg_maint._iceberg_maint_check_boolean('iceberg_maintenance', 'dry_run', dry_run)
        + dbt_iceberg_maint._iceberg_maint_check_boolean('iceberg_maintenance', 'force', force)
        + dbt_iceberg_maint._iceberg_maint_parse_instant('iceberg_maintenance', 'as_of', as_of).errors
        + sharding.errors) -%}
  {%- set nodes = [] -%}
  {%- for node in dbt_iceberg_maint._iceberg_maint_selected_models(select) -%}
    {%- set relation = dbt_iceberg_maint._iceberg_maint_node_relation(node) -%}
    {%- if sharding.value is none or dbt_iceberg_maint._iceberg_maint_shard_of(relation, sharding.value.n)
          == sharding.value.k -%}
      {%- do nodes.append(node) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- for node in nodes -%}
    {%- set raw_policy = dbt_iceberg_maint._iceberg_maint_model_policy(node) -%}
    {%- set errors = dbt_iceberg_maint._iceberg_maint_policy_shape_errors(raw_policy)
          + dbt_iceberg_maint._iceberg_maint_policy_errors(dbt_iceberg_maint._iceberg_maint_resolved_policy(
              raw_policy)) -%}
    {%- if errors -%}
      {{ exceptions.raise_compiler_error("iceberg_maintenance: " ~ dbt_iceberg_maint._iceberg_maint_node_label(node)
            ~ " has an invalid meta.iceberg_maint policy: " ~ errors | join('; ')) }}
    {%- endif -%}
  {%- endfor -%}

  {%- set mode = ' (dry run: nothing is executed)' if dry_run else '' -%}
  {%- set of_shard = ' (shard ' ~ shard ~ ')' if sharding.value is not none else '' -%}
  {%- do log('iceberg_maintenance: ' ~ nodes | length ~ ' Iceberg table(s)' ~ of_shard ~ ', operations '
        ~ requested | join(', ') ~ mode, info=true) -%}
  {%- if select is none -%}
    {%- set others = dbt_iceberg_maint._iceberg_maint_non_iceberg_models() -%}
    {%- if others -%}
      {%- do log('iceberg_maintenance: ' ~ others | length ~ ' table model(s) not built as Iceberg, never maintained: '
            ~ others | join(', '), info=true) -%}
    {%- endif -%}
  {%- endif -%}
  {%- set named = dbt_iceberg_maint._iceberg_maint_named_models(select) -%}
  {%- set tables = [] -%}
  {%- for node in nodes -%}
    {%- set relation = dbt_iceberg_maint._iceberg_maint_node_relation(node) -%}
    {%- set label = dbt_iceberg_maint._iceberg_maint_node_label(node) -%}
    {%- do tables.append({'model': label, 'node': node,
                          'table': dbt_iceberg_maint._iceberg_maint_qualified_name(relation), 'relation': relation,
                          'policy': dbt_iceberg_maint._iceberg_maint_resolved_policy(
                              dbt_iceberg_maint._iceberg_maint_model_policy(node)),
                          'required': label in named or (node.resource_type == 'model' and node.name in named)}) -%}
  {%- endfor -%}
  {%- set selection = [] -%}
  {%- for entry in tables -%}{%- do selection.append({'model': entry.model, 'table': entry.table}) -%}{%- endfor -%}
  {#- What a caller around dbt (dbt-iceberg-maint maintain) needs when planning one table fails
      at run time: the tables selected, and (START, operation null) which one was being planned. -#}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('selection', {'tables': selection, 'operations': requested},
        info=false) -%}
  {#- Which tables exist: one listing per schema (and catalog) that holds several of the tables
      to check (enabled policies), instead of two statements per table; a lone table is looked up
      by name (a large schema is not listed for it). -#}
  {%- set by_schema = {} -%}
  {%- for entry in tables if entry.policy.enabled and var('dbt_iceberg_maint_enabled', true) -%}
    {%- set parts = dbt_iceberg_maint._iceberg_maint_relation_parts(entry.relation) -%}
    {%- set key = (parts.catalog or '') ~ '.' ~ parts.schema -%}
    {%- do by_schema.update({key: by_schema.get(key, []) + [(entry, parts)]}) -%}
  {%- endfor -%}
  {%- for group in by_schema.values() if group | length > 1 -%}
    {%- set names = dbt_iceberg_maint._iceberg_maint_schema_tables(group[0][1].catalog, group[0][1].schema) -%}
    {%- for entry, parts in group -%}{%- do entry.update({'exists': (parts.identifier | lower) in names}) -%}{%- endfor -%}
  {%- endfor -%}
  {%- do dbt_iceberg_maint._iceberg_maint_plan_prefetch(tables, requested, force, as_of) -%}
  {%- set steps = [] -%}
  {%- for entry in tables -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_marker('start', {'table': entry.table, 'operation': none},
          info=false) -%}
    {#- A model named in `select` must have its table; one picked by tag or by default may not be
        built yet (skipped). -#}
    {%- set plan = dbt_iceberg_maint._iceberg_maint_plan_table(entry.relation, requested, force, none, as_of,
          entry.required, entry.get('exists'), entry.get('known')) -%}
    {%- do entry.update({'snapshot_id': plan.snapshot_id, 'health': plan.health}) -%}
    {%- do steps.extend(plan.steps) -%}
  {%- endfor -%}
  {#- The whole plan, machine-readable: dbt-iceberg-maint maintain replays its remaining steps
      when a statement Spark rejects stops this macro. -#}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('plan', {'tables': selection, 'operations': requested,
        'as_of': as_of, 'steps': steps}) -%}
  {%- set known = {} -%}
  {%- for entry in tables -%}
    {%- do known.update({entry.table: {'node': entry.model, 'health': entry.health}}) -%}
  {%- endfor -%}
  {%- set results = dbt_iceberg_maint._iceberg_maint_execute_steps(steps, dry_run, path='iceberg_maintenance',
        tables=known) -%}
  {%- if not dry_run and not force -%}
    {%- for entry in tables -%}
      {%- set own = namespace(steps=[], results=[]) -%}
      {%- for step in steps if step.table == entry.table -%}
        {%- set own.steps = own.steps + [step] -%}
      {%- endfor -%}
      {%- for result in results if result.table == entry.table -%}
        {%- set own.results = own.results + [result] -%}
      {%- endfor -%}
      {%- do dbt_iceberg_maint._iceberg_maint_record_checks(entry.table, entry.policy, own.steps, own.results,
            entry.snapshot_id) -%}
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


{#- What iceberg_maintenance maintains: the project's enabled Iceberg models (file_format iceberg,
    materialized table or incremental) and its enabled sources that declare meta.iceberg_maint
    (tables ingestion writes), optionally narrowed by `select`: a model name (or package.name),
    'tag:<tag>', 'source:<source>' (that source's tables that declare meta.iceberg_maint),
    'source:<source>.<table>' (that table, declared or not), or a list of them (union). A
    selector that names or selects nothing (a tag no Iceberg model has, too) is an error. -#}
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
  {%- set sources = [] -%}
  {%- for node in graph.sources.values() | sort(attribute='unique_id') if (node.config or {}).get('enabled', true) -%}
    {%- do sources.append(node) -%}
  {%- endfor -%}
  {%- set declared = dbt_iceberg_maint._iceberg_maint_declares_policy -%}
  {%- if select is none -%}
    {%- for node in sources if declared(node) -%}{%- do candidates.append(node) -%}{%- endfor -%}
    {{ return(candidates) }}
  {%- endif -%}
  {%- set selectors = [select] if select is string else select -%}
  {%- if selectors is not iterable or selectors is mapping -%}
    {{ exceptions.raise_compiler_error("iceberg_maintenance: argument `select` is " ~ select
          ~ "; expected a model name, 'tag:<tag>', 'source:<source>[.<table>]', or a list of them") }}
  {%- endif -%}
  {%- set chosen = [] -%}
  {%- for selector in selectors -%}
    {%- set selector = selector | string | trim -%}
    {%- set matched = [] -%}
    {%- if selector.startswith('source:') -%}
      {%- set source_name, dot, table_name = selector[7:].partition('.') -%}
      {%- for node in sources if node.source_name == source_name
            and (node.name == table_name if dot else declared(node)) -%}
        {%- do matched.append(node) -%}
      {%- endfor -%}
      {%- if not matched -%}
        {{ exceptions.raise_compiler_error("iceberg_maintenance: argument `select` contains '" ~ selector
              ~ "', which names no enabled source table" ~ ('' if dot else ' that declares meta.iceberg_maint')
              ~ "; sources: " ~ sources | map(attribute='source_name') | unique | join(', ')) }}
      {%- endif -%}
    {%- else -%}
      {%- for node in candidates -%}
        {%- if (selector.startswith('tag:') and selector[4:] in (node.tags or []))
              or (not selector.startswith('tag:') and selector in [node.name, node.package_name ~ '.' ~ node.name]) -%}
          {%- do matched.append(node) -%}
        {%- endif -%}
      {%- endfor -%}
      {%- if not matched and selector.startswith('tag:') -%}
        {{ exceptions.raise_compiler_error("iceberg_maintenance: argument `select` contains '" ~ selector
              ~ "', which selects no enabled Iceberg model (no Iceberg model has that tag); Iceberg models: "
              ~ candidates | map(attribute='name') | join(', ')) }}
      {%- elif not matched -%}
        {{ exceptions.raise_compiler_error("iceberg_maintenance: argument `select` contains '" ~ selector
              ~ "', which is not an enabled Iceberg model (file_format iceberg, materialized table or incremental);"
              ~ " Iceberg models: " ~ candidates | map(attribute='name') | join(', ')) }}
      {%- endif -%}
    {%- endif -%}
    {%- for node in matched if node not in chosen -%}{%- do chosen.append(node) -%}{%- endfor -%}
  {%- endfor -%}
  {{ return(chosen) }}
{% endmacro %}


{#- The enabled table and incremental models whose file_format is not iceberg (Hive tables beside
    the Iceberg ones), as 'name (file_format X)'. -#}
{% macro _iceberg_maint_non_iceberg_models() %}
  {%- set found = [] -%}
  {%- for node in graph.nodes.values() | sort(attribute='unique_id') -%}
    {%- set config = node.config or {} -%}
    {%- set file_format = (config.get('file_format') or '') | lower -%}
    {%- if node.resource_type == 'model' and config.get('enabled', true) and file_format != 'iceberg'
          and config.get('materialized') in ['table', 'incremental'] -%}
      {%- do found.append(node.name ~ ' (file_format ' ~ (file_format or 'not set') ~ ')') -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(found) }}
{% endmacro %}


{#- The relation of a selected model (its alias) or source table (its identifier). -#}
{% macro _iceberg_maint_node_relation(node) %}
  {%- set identifier = node.identifier if node.resource_type == 'source' else node.alias -%}
  {{ return(api.Relation.create(schema=node.schema, identifier=identifier or node.name)) }}
{% endmacro %}


{#- `shard` of iceberg_maintenance: none, or 'K/N' with whole numbers 1 <= K <= N, as
    {'value': {'k', 'n'} or none, 'errors': [...]}. -#}
{% macro _iceberg_maint_parse_shard(owner, shard) %}
  {%- if shard is none -%}{{ return({'value': none, 'errors': []}) }}{%- endif -%}
  {%- set match = modules.re.fullmatch('\\s*(\\d+)\\s*/\\s*(\\d+)\\s*', shard) if shard is string else none -%}
  {%- if match and 1 <= match.group(1) | int <= match.group(2) | int -%}
    {{ return({'value': {'k': match.group(1) | int, 'n': match.group(2) | int}, 'errors': []}) }}
  {%- endif -%}
  {{ return({'value': none, 'errors': [owner ~ ": argument `shard` is " ~ tojson(shard)
      ~ "; expected 'K/N' with whole numbers 1 <= K <= N, e.g. '2/4'"]}) }}
{% endmacro %}

{#- The shard (1..n) a table belongs to: the first 8 hex digits of the md5 of its lower-case
    schema.table, modulo n, plus one. The same for every project and job that names the table,
    whatever catalog prefix they use (policy/selection.py computes it the same way). -#}
{% macro _iceberg_maint_shard_of(relation, n) %}
  {%- set parts = dbt_iceberg_maint._iceberg_maint_relation_parts(relation) -%}
  {{ return((local_md5((parts.schema ~ '.' ~ parts.identifier) | lower)[:8] | int(base=16)) % n + 1) }}
{% endmacro %}


{#- Whether a node (a source table) declares meta.iceberg_maint (in its config or its meta), even
    as an empty mapping (the defaults) or false. -#}
{% macro _iceberg_maint_declares_policy(node) %}
  {{ return(((node.config or {}).get('meta') or {}).get('iceberg_maint') is not none
      or (node.meta or {}).get('iceberg_maint') is not none) }}
{% endmacro %}


{#- The selector that names exactly this node: package.name for a model, source:<source>.<table>
    for a source (what dbt-iceberg-maint maintain re-selects a table by). -#}
{% macro _iceberg_maint_node_label(node) %}
  {{ return('source:' ~ node.source_name ~ '.' ~ node.name if node.resource_type == 'source'
      else node.package_name ~ '.' ~ node.name) }}
{% endmacro %}


{#- The selectors that `select` names directly (models, package.name, source:<source>.<table>),
    not through 'tag:' or a whole source. -#}
{% macro _iceberg_maint_named_models(select=none) %}
  {%- set named = [] -%}
  {%- for selector in ([] if select is none else ([select] if select is string else select)) -%}
    {%- set selector = selector | string | trim -%}
    {%- if not selector.startswith('tag:') and (not selector.startswith('source:') or '.' in selector) -%}
      {%- do named.append(selector) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(named) }}
{% endmacro %}
