{#- The maintenance plan as a value: the ordered steps {table, operation, status, reason, sql}
    one table's policy implies, decided from its metadata without running anything.
    status: planned (sql runs when the step executes), skipped (not due, disabled, nothing to
    do), failed (known to fail without running, e.g. gc.enabled=false). maintain() executes
    the plan; iceberg_maintenance plans every selected table first, logs the whole plan once,
    then executes it step by step; a dry run renders it. required: the caller named this table,
    so its absence fails every operation ('table ... does not exist'); false (a model selected
    by tag or by default, maybe not built yet) skips them. -#}

{% macro get_maintenance_plan(relation=none, operations=none, force=false, policy=none, as_of=none, required=true) %}
  {{ return(adapter.dispatch('get_maintenance_plan', 'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, operations=operations, force=force, policy=policy,
      as_of=as_of, required=required)) }}
{% endmacro %}

{% macro default__get_maintenance_plan(relation, operations, force, policy, as_of, required=true) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.get_maintenance_plan is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__get_maintenance_plan(relation, operations, force, policy, as_of, required=true) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_plan_table(relation, operations, force, policy, as_of, required).steps) }}
{% endmacro %}

{#- get_maintenance_plan's steps, and the table's current snapshot when the plan read it (none
    when it read none): maintain() and iceberg_maintenance record it as the snapshot each
    operation was checked at; `health`: the summary figures the plan read (none when it read
    none), the history's health before. exists: whether the table exists, when the caller knows (none:
    ask the catalog). known: what _iceberg_maint_plan_prefetch read for it ({properties, summary}). -#}
{% macro _iceberg_maint_plan_table(relation, operations, force, policy, as_of, required=true, exists=none,
    known=none) %}
  {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(relation) -%}
  {%- set requested = dbt_iceberg_maint._iceberg_maint_requested_operations(operations) -%}
  {%- set instant = dbt_iceberg_maint._iceberg_maint_parse_instant('get_maintenance_plan', 'as_of', as_of) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(
        dbt_iceberg_maint._iceberg_maint_check_boolean('get_maintenance_plan', 'force', force)
        + dbt_iceberg_maint._iceberg_maint_check_boolean('get_maintenance_plan', 'required', required)
        + instant.errors) -%}
  {%- set node = dbt_iceberg_maint._iceberg_maint_node_for_relation(relation) -%}
  {%- set raw_policy = dbt_iceberg_maint._iceberg_maint_model_policy(node) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(
        dbt_iceberg_maint._iceberg_maint_policy_shape_errors(raw_policy)
        + dbt_iceberg_maint._iceberg_maint_policy_shape_errors(policy, 'maintain: argument `policy`')) -%}
  {%- set resolved = dbt_iceberg_maint._iceberg_maint_resolved_policy(raw_policy, policy) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_policy_errors(resolved)) -%}
  {%- if not execute -%}{{ return({'steps': [], 'snapshot_id': none, 'health': none, 'table_format': none}) }}{%- endif -%}
  {%- set facts = {'project_enabled': var('dbt_iceberg_maint_enabled', true), 'exists': false,
        'required': required} -%}
  {%- if facts.project_enabled and resolved.enabled -%}
    {%- do facts.update({'exists': exists if exists is not none
          else dbt_iceberg_maint._iceberg_maint_table_exists(relation)}) -%}
  {%- endif -%}
  {#- Is it Iceberg? A model's file_format says so without a statement (dbt built the table with it);
      a source, a model without file_format or a relation named directly costs the table's
      properties, which the plan then reuses. -#}
  {%- set file_format = dbt_iceberg_maint._iceberg_maint_node_file_format(node) -%}
  {%- set properties = (known or {}).get('properties') -%}
  {%- if facts.exists and not file_format and properties is none -%}
    {%- set properties = dbt_iceberg_maint._iceberg_maint_table_properties(
          dbt_iceberg_maint._iceberg_maint_qualified_name(relation)) -%}
  {%- endif -%}
  {%- if facts.exists -%}
    {%- do facts.update({'table_format': dbt_iceberg_maint._iceberg_maint_non_iceberg_format(file_format,
          properties)}) -%}
  {%- endif -%}
  {%- if facts.exists and not facts.table_format -%}
    {%- do facts.update(dbt_iceberg_maint._iceberg_maint_plan_facts(relation, requested, resolved, force,
          instant.value, properties, (known or {}).get('summary'))) -%}
  {%- endif -%}
  {{ return({'steps': dbt_iceberg_maint._iceberg_maint_plan_steps(table, requested, resolved, facts, force,
      instant.value), 'snapshot_id': facts.get('snapshot_id'), 'health': facts.get('health'),
      'table_format': facts.get('table_format')}) }}
{% endmacro %}


{#- The file_format a model was built with ('' for a source, a model without one, or no node). -#}
{% macro _iceberg_maint_node_file_format(node) %}
  {{ return(((node.config or {}).get('file_format') or '') | lower
      if node is not none and node.resource_type == 'model' else '') }}
{% endmacro %}


{#- iceberg_maintenance's first tier for many tables at once: for each table that exists (its
    schema's listing said so) and is to be planned, its properties, read as its plan would read
    them, then the summaries of those whose plan reads one, in one statement per 25 tables
    (_iceberg_maint_summary_figures_many) instead of one per table, and likewise the data
    manifests of those whose plan still decides rewrite_manifests. Each entry gets `known`
    ({properties, summary}) for _iceberg_maint_plan_table, which decides from them exactly as it
    would from its own reads (the same macros decide what to read). A table's reads follow its
    START marker, as its planning's do, so a failing SHOW TBLPROPERTIES names its table. -#}
{% macro _iceberg_maint_plan_prefetch(tables, requested, force, as_of) %}
  {%- if force or not var('dbt_iceberg_maint_enabled', true) -%}{{ return(none) }}{%- endif -%}
  {%- set instant = dbt_iceberg_maint._iceberg_maint_parse_instant('iceberg_maintenance', 'as_of', as_of).value -%}
  {%- set requests = [] -%}
  {%- for entry in tables if entry.get('exists') and entry.policy.enabled -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_marker('start', {'table': entry.table, 'operation': none},
          info=false) -%}
    {%- set file_format = dbt_iceberg_maint._iceberg_maint_node_file_format(entry.node) -%}
    {%- set properties = dbt_iceberg_maint._iceberg_maint_table_properties(entry.table) if not file_format
          or dbt_iceberg_maint._iceberg_maint_plan_needs_properties(requested, entry.policy, force) else none -%}
    {%- if dbt_iceberg_maint._iceberg_maint_non_iceberg_format(file_format, properties or {}) is none -%}
      {%- set first = dbt_iceberg_maint._iceberg_maint_plan_first_tier(requested, entry.policy, force, instant,
            properties) -%}
      {%- do entry.update({'known': {'properties': properties}}) -%}
      {%- if first.reads_summary -%}
        {%- do requests.append({'entry': entry, 'table': entry.table, 'properties': properties,
              'as_of': first.as_of_text, 'table_bytes': first.sized, 'lineage_of': first.recorded.values() | list,
              'deciding': first.deciding, 'recorded': first.recorded}) -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- for figures in dbt_iceberg_maint._iceberg_maint_summary_figures_many(requests) -%}
    {%- do requests[loop.index0].entry.known.update({'summary': figures}) -%}
  {%- endfor -%}
  {#- The second tier's data manifests likewise, for the tables whose plan still decides
      rewrite_manifests after its summary (nothing skipped it as unchanged since its check). -#}
  {%- set counting = [] -%}
  {%- for request in requests if 'rewrite_manifests' in request.deciding -%}
    {%- set summary = request.entry.known.summary -%}
    {%- if 'rewrite_manifests' not in dbt_iceberg_maint._iceberg_maint_unchanged_operations(request.recorded,
          summary.snapshot_id, summary.get('lineage') or {}) -%}
      {%- do counting.append(request) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- for count in dbt_iceberg_maint._iceberg_maint_data_manifests_many(counting | map(attribute='table') | list) -%}
    {%- do counting[loop.index0].entry.known.summary.update({'data_manifests': count}) -%}
  {%- endfor -%}
{% endmacro %}


{#- Pure: none when the existing table is an Iceberg table, else what it is instead (a Hive table
    beside Iceberg ones in Spark's session catalog), from the model's file_format when it has one,
    else from the table's properties (an Iceberg table reports format=iceberg/<file format>).
    Twin: metadata/catalog.py `load` (TableNotIcebergError, engine.UNKNOWN_NON_ICEBERG_FORMAT). -#}
{% macro _iceberg_maint_non_iceberg_format(file_format, properties) %}
  {%- if file_format -%}{{ return(none if file_format == 'iceberg' else file_format) }}{%- endif -%}
  {{ return(none if ((properties.get('format') or '') | lower).startswith('iceberg')
      else (properties.get('provider') or properties.get('format') or 'no Iceberg metadata')) }}
{% endmacro %}


{#- Whether the plan reads the table's properties (gc.enabled, the intervals' and the checks'
    records, the statistics' snapshots) for `requested` under `resolved`. Pure. -#}
{% macro _iceberg_maint_plan_needs_properties(requested, resolved, force) %}
  {%- set section_of = dbt_iceberg_maint._iceberg_maint_policy_section -%}
  {%- set needs = namespace(value=requested | select('in', ['expire_snapshots', 'remove_orphan_files',
        'compute_table_stats', 'compute_partition_stats']) | list | length > 0) -%}
  {%- for operation in requested -%}
    {%- if resolved[section_of(operation)].interval_hours
          or (not force and dbt_iceberg_maint._iceberg_maint_skipped_when_unchanged(operation, resolved)) -%}
      {%- set needs.value = true -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(needs.value) }}
{% endmacro %}


{#- What the plan decides from the properties alone, and what its first tier then reads: `checked`
    (hours since each operation's check), `deciding` (the operations whose due decision must be made
    now: requested, enabled, outside their interval), `as_of_text`, `sized` (the table's size decides
    `partial_progress: auto`, forced or not), `recorded` (the checks recorded for operations only new
    data can change: the summary's one scan also reads the lineage that tells whether anything was
    written since), `reads_summary`. Pure: iceberg_maintenance asks it for many tables before it
    reads their summaries in one statement (_iceberg_maint_plan_prefetch). -#}
{% macro _iceberg_maint_plan_first_tier(requested, resolved, force, as_of, properties) %}
  {%- set checked = dbt_iceberg_maint._iceberg_maint_checked_hours_ago(properties or {}) -%}
  {%- set deciding = [] -%}
  {%- for operation in requested -%}
    {%- set section = resolved[dbt_iceberg_maint._iceberg_maint_policy_section(operation)] -%}
    {%- if section.enabled and (force or dbt_iceberg_maint._iceberg_maint_interval_reason(section,
          checked.get(operation)) is none) -%}
      {%- do deciding.append(operation) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return({'checked': checked, 'deciding': deciding,
      'as_of_text': as_of.strftime('%Y-%m-%d %H:%M:%S.%f') if as_of is not none else none,
      'sized': 'rewrite_data_files' in deciding and resolved.compaction.partial_progress == 'auto',
      'recorded': dbt_iceberg_maint._iceberg_maint_recorded_checks([] if force else deciding, resolved,
          properties or {}),
      'reads_summary': not force and (deciding | reject('equalto', 'remove_orphan_files') | list | length > 0)}) }}
{% endmacro %}


{#- What the plan reads about an existing table, tier by tier, each at most once (its Python twin
    is metadata/planner.py's _LazyTable):
    - its properties: gc.enabled for expire_snapshots and remove_orphan_files, the snapshot the
      statistics were last computed for (compute_table_stats, compute_partition_stats), when each operation
      with an interval_hours was last checked and at which snapshot the operations only new data
      can change were, the target file size when small files are counted and the policy sets none
      (a forced compaction, or one scoped to cold partitions, without an interval sends no SHOW
      TBLPROPERTIES);
    - the snapshot summary (metadata only: the snapshot count and oldest age, the current
      snapshot's data and delete file counts) when an operation other than orphan removal is to be
      decided, i.e. requested, enabled and outside its interval (a post-hook in steady state reads
      nothing);
    - deeper figures only for the operations the summary leaves undecided: small files per
      partition or the cold scope for a compaction (not when the table has fewer data files than
      min_input_files), data manifests for rewrite_manifests, delete files when the summary has
      no count;
    - the snapshot list when a cost gate is set.
    Forced, it reads no figures, only the cold scope for the compaction's `where` and, under
    `partial_progress: auto`, the table's size (the summary's total-files-size).
    known_properties, known_summary: the table's properties and first tier when the caller has read
    them already (_iceberg_maint_plan_prefetch; its summary may hold the data manifests too). -#}
{% macro _iceberg_maint_plan_facts(relation, requested, resolved, force, as_of, known_properties=none,
    known_summary=none) %}
  {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(relation) -%}
  {%- set properties = known_properties if known_properties is not none
        else dbt_iceberg_maint._iceberg_maint_table_properties(table)
          if dbt_iceberg_maint._iceberg_maint_plan_needs_properties(requested, resolved, force) else none -%}
  {%- set first = dbt_iceberg_maint._iceberg_maint_plan_first_tier(requested, resolved, force, as_of, properties) -%}
  {%- set checked, deciding, as_of_text = first.checked, first.deciding, first.as_of_text -%}
  {#- A table never swept for orphans: its age, since one younger than the window cannot hold a
      file old enough to remove (the first builds' post-hooks skip the listing). -#}
  {%- set table_age = dbt_iceberg_maint._iceberg_maint_table_age_hours(table)
        if not force and 'remove_orphan_files' in deciding and checked.get('remove_orphan_files') is none
          and resolved.remove_orphan_files.location is none else none -%}
  {%- set compaction = resolved.compaction -%}
  {%- set health = none -%}
  {%- set sized, recorded = first.sized, first.recorded -%}
  {%- set lineage = none -%}
  {%- if first.reads_summary -%}
    {%- set health = known_summary if known_summary is not none
          else dbt_iceberg_maint._iceberg_maint_summary_figures(table, as_of_text, table_bytes=sized,
            properties=properties, lineage_of=recorded.values() | list) -%}
    {%- set lineage = health.pop('lineage', none) -%}
  {%- endif -%}
  {%- set table_bytes = (health.pop('table_bytes') if health is not none else
        dbt_iceberg_maint._iceberg_maint_summary_figures(table, table_bytes=true, properties=properties).table_bytes)
        if sized else none -%}
  {#- Operations nothing was written for since their last check skip before any deeper read. -#}
  {%- set unchanged = dbt_iceberg_maint._iceberg_maint_unchanged_operations(recorded,
        health.snapshot_id if health is not none else none, lineage or {}) -%}
  {%- set deciding = deciding | reject('in', unchanged.keys() | list) | list -%}
  {%- set data_files = health.data_files if health is not none else none -%}
  {%- set delete_files = health.delete_files if health is not none else none -%}
  {%- set compacting = 'rewrite_data_files' in deciding and (force or dbt_iceberg_maint._iceberg_maint_too_few_data_files(
        compaction, data_files, delete_files) is none) -%}
  {%- set threshold = none -%}
  {%- if compacting and not force -%}
    {%- set mb = compaction.target_file_size_mb -%}
    {%- if mb -%}
      {%- set target = (mb * 1024 * 1024) | int -%}
    {%- else -%}
      {%- set properties = properties if properties is not none
            else dbt_iceberg_maint._iceberg_maint_table_properties(table) -%}
      {%- set target = properties.get('write.target-file-size-bytes', 536870912) | int -%}
    {%- endif -%}
    {%- set threshold = (target * 0.75) | int -%}
  {%- endif -%}
  {%- set scope = dbt_iceberg_maint._iceberg_maint_cold_scope(relation, compaction.cold_partitions_hours, as_of_text,
        threshold, delete_ratio=delete_files != 0) if compacting and compaction.cold_partitions_hours else none -%}
  {%- if health is not none -%}
    {#- Deletion vectors only when the summary counts delete files (or has no count): the delete
        manifests are read then only. -#}
    {%- set deletes = delete_files != 0 -%}
    {%- do health.update(dbt_iceberg_maint._iceberg_maint_deep_figures(table,
          threshold if compacting and scope is none else none,
          'rewrite_manifests' in deciding and 'data_manifests' not in health,
          'rewrite_position_delete_files' in deciding and delete_files is none,
          deletion_vectors='rewrite_position_delete_files' in deciding and deletes,
          delete_ratio=compacting and not force and scope is none and deletes)) -%}
  {%- endif -%}
  {#- The snapshot each kind of statistics was last computed for, as the plan recorded it. -#}
  {%- set statistics = {} -%}
  {%- for operation, key in dbt_iceberg_maint._iceberg_maint_statistics_keys().items() if operation in deciding -%}
    {%- set text = (properties or {}).get(dbt_iceberg_maint._iceberg_maint_statistics_snapshot_property(operation)) -%}
    {%- do statistics.update({key: text | int if text is string and text.isdigit() else none}) -%}
  {%- endfor -%}
  {#- Partition statistics need a partitioned table: the partitions metadata table has a
      `partition` column then (limit 0: Spark reads no manifest). -#}
  {%- if 'compute_partition_stats' in deciding and not force -%}
    {%- do statistics.update({'partitioned': 'partition' in run_query('select * from ' ~ table
          ~ '.partitions limit 0').column_names}) -%}
  {%- endif -%}
  {%- set gated = not force and deciding and dbt_iceberg_maint._iceberg_maint_cost_gate_set(resolved.cost_gate) -%}
  {%- set snapshots = dbt_iceberg_maint._iceberg_maint_gate_snapshots(relation, as_of) if gated
        else {'rows': [], 'now_ms': none} -%}
  {{ return({'gc_enabled': ((properties or {}).get('gc.enabled', 'true') | lower) != 'false', 'health': health,
      'data_files': data_files, 'delete_files': delete_files, 'table_bytes': table_bytes, 'cold_scope': scope,
      'unchanged_since_checked': unchanged,
      'snapshot_id': health.snapshot_id if health is not none else none,
      'snapshots': snapshots.rows, 'now_ms': snapshots.now_ms, 'checked_hours_ago': checked,
      'statistics': statistics, 'table_age_hours': table_age}) }}
{% endmacro %}


{#- The table's age in hours from its first metadata file, while the metadata log still names
    it (version 0 of a metastore-backed catalog, `00000-<uuid>`; v1 of a Hadoop catalog); none
    once write.metadata.previous-versions-max has dropped it: unknown counts as old. Twin:
    policy/engine.py first_metadata_age_hours. -#}
{% macro _iceberg_maint_table_age_hours(table) %}
  {%- set rows = run_query("select file, (unix_millis(current_timestamp()) - unix_millis(timestamp)) as age_ms from "
        ~ table ~ ".metadata_log_entries order by timestamp limit 1").rows -%}
  {%- if rows and modules.re.search('(^|/)(v1(\\.[a-z0-9]+)?|00000-[^/]*)\\.metadata\\.json$', rows[0][0] | string) -%}
    {{ return(((rows[0][1] | int) / 3600000.0) | round(3)) }}
  {%- endif -%}
  {{ return(none) }}
{% endmacro %}


{#- The plan's first tier, from metadata only (no manifest is read): the snapshot count and the
    oldest snapshot's age (at as_of, UTC text, else now), the current snapshot's id and its summary
    counts of data and delete files (none when its summary has none; 0 for a table without
    snapshots). rewrite_age: also `hours_since_rewrite_data_files`, the age of the newest `replace`
    snapshot that removed data files (a rewrite_data_files commit; rewrite_manifests and
    rewrite_position_delete_files remove none), none when the retained history has none.
    table_bytes: also the summary's total-files-size (none when it has none), which decides
    `partial_progress: auto` (_iceberg_maint_uses_partial_progress). properties: the table's
    properties as the caller has just read them (_iceberg_maint_table_properties), else none.
    lineage_of: snapshot ids of recorded checks; when given, `lineage` ({id: {parent, operation}})
    holds the snapshots _iceberg_maint_unchanged_since can walk from the current one to them:
    every `replace` snapshot, the given ones and the current one (any other snapshot ends the
    walk as a snapshot outside the lineage does).

    The current snapshot is the one Iceberg's Spark table names in its `current-snapshot-id`
    property ('none' without one): read from `properties`, else with one SHOW TBLPROPERTIES (a
    driver-side command). Joining the `refs` metadata table instead cost the query a second Spark
    job, about half its time. -#}
{% macro _iceberg_maint_summary_figures(table, as_of=none, rewrite_age=false, table_bytes=false, properties=none,
    lineage_of=none) %}
  {%- set snapshot_id = dbt_iceberg_maint._iceberg_maint_current_snapshot_id(table, properties) -%}
  {%- set given = ('s.snapshot_id in (' ~ lineage_of | map('int') | join(', ') ~ ')') if lineage_of else 'false' -%}
  {%- set row = run_query(dbt_iceberg_maint._iceberg_maint_summary_select(table ~ '.snapshots s',
        ('s.snapshot_id = ' ~ snapshot_id) if snapshot_id is not none else 'false', given, as_of, rewrite_age,
        table_bytes, true if lineage_of else false)).rows[0] -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_summary_parse(row, snapshot_id, rewrite_age, table_bytes, lineage_of)) }}
{% endmacro %}


{#- _iceberg_maint_summary_figures for many tables, in one statement per `chunk` of them: their
    snapshots metadata tables (read from the metadata files) in one UNION ALL, aggregated once,
    grouped by table, so Spark runs one job for them all: iceberg_maintenance's plan sends one
    statement for 25 tables' first tier instead of one per table (docs/health-and-plans.md). On a
    local session a table's summary alone took 60 ms, in unions of 8 18 ms a table, of 50 27-30
    ms and of 100 34 ms: Spark's analysis of a union grows faster than the union.
    requests: [{table, properties, as_of, table_bytes, lineage_of}] as _iceberg_maint_summary_figures
    takes them (one as_of for all); returns their figures in order. -#}
{% macro _iceberg_maint_summary_figures_many(requests, chunk=25) %}
  {%- set figures = [] -%}
  {%- for batch in requests | batch(chunk) -%}
    {%- set current = [] -%}
    {%- set branches = [] -%}
    {%- for request in batch -%}
      {%- set snapshot_id = dbt_iceberg_maint._iceberg_maint_current_snapshot_id(request.table, request.properties) -%}
      {%- do current.append(snapshot_id) -%}
      {%- do branches.append('select ' ~ loop.index0 ~ ' as request_index, '
            ~ (('snapshot_id = ' ~ snapshot_id) if snapshot_id is not none else 'false') ~ ' as is_current, '
            ~ (('snapshot_id in (' ~ request.lineage_of | map('int') | join(', ') ~ ')') if request.lineage_of
               else 'false') ~ ' as given, snapshot_id, parent_id, operation, committed_at, summary from '
            ~ request.table ~ '.snapshots') -%}
    {%- endfor -%}
    {%- set rows = {} -%}
    {%- if batch -%}
      {%- set sql = dbt_iceberg_maint._iceberg_maint_summary_select('(' ~ branches | join(' union all ') ~ ') s',
            's.is_current', 's.given', batch[0].as_of, false, true, true, grouped=true) -%}
      {%- for row in run_query(sql).rows -%}{%- do rows.update({row['request_index'] | int: row}) -%}{%- endfor -%}
    {%- endif -%}
    {%- for request in batch -%}
      {#- A table without snapshots has no row in the grouped result. -#}
      {%- set row = rows.get(loop.index0) or {'snapshots': 0, 'oldest_snapshot_age_hours': none, 'data_files': none,
            'delete_files': none, 'table_bytes': none, 'lineage': none} -%}
      {%- do figures.append(dbt_iceberg_maint._iceberg_maint_summary_parse(row, current[loop.index0], false,
            request.table_bytes, request.lineage_of)) -%}
    {%- endfor -%}
  {%- endfor -%}
  {{ return(figures) }}
{% endmacro %}


{#- The data manifests (manifests with content 0, the current snapshot's) of many tables, in one
    statement per `chunk` of them: their manifests metadata tables (read from the manifest lists)
    in one UNION ALL, counted per table, as _iceberg_maint_summary_figures_many reads summaries.
    Returns the counts in the tables' order. -#}
{% macro _iceberg_maint_data_manifests_many(tables, chunk=25) %}
  {%- set counts = [] -%}
  {%- for batch in tables | batch(chunk) -%}
    {%- set branches = [] -%}
    {%- for table in batch -%}
      {%- do branches.append('select ' ~ loop.index0 ~ ' as request_index from ' ~ table ~ '.manifests where content = 0') -%}
    {%- endfor -%}
    {%- set rows = {} -%}
    {%- for row in run_query('select m.request_index, count(*) as data_manifests from (' ~ branches | join(' union all ')
          ~ ') m group by m.request_index').rows -%}
      {%- do rows.update({row['request_index'] | int: row['data_manifests'] | int}) -%}
    {%- endfor -%}
    {#- A table without data manifests has no row. -#}
    {%- for table in batch -%}{%- do counts.append(rows.get(loop.index0, 0)) -%}{%- endfor -%}
  {%- endfor -%}
  {{ return(counts) }}
{% endmacro %}


{#- The table's current snapshot id, none without one: Iceberg's Spark table names it in its
    `current-snapshot-id` property ('none' without one), read from `properties` when the caller
    has them, else with one SHOW TBLPROPERTIES (a driver-side command). -#}
{% macro _iceberg_maint_current_snapshot_id(table, properties=none) %}
  {%- set current = (properties or {}).get('current-snapshot-id') -%}
  {%- if current is none -%}
    {%- set rows = run_query("show tblproperties " ~ table ~ " ('current-snapshot-id')").rows -%}
    {%- set current = (rows[0][1] | string) if rows else '' -%}
  {%- endif -%}
  {{ return(current | int if current is string and current.isdigit() else none) }}
{% endmacro %}


{#- The first tier's query (see _iceberg_maint_summary_figures) over `source`, snapshots as `s`;
    is_current, given: boolean SQL for the current snapshot and the lineage's given ones; lineage:
    whether to read it; grouped: per request_index (_iceberg_maint_summary_figures_many). Pure. -#}
{% macro _iceberg_maint_summary_select(source, is_current, given, as_of=none, rewrite_age=false, table_bytes=false,
    lineage=false, grouped=false) %}
  {#- As text ('id:parent:operation,...'): complex values reach dbt differently per connection method. -#}
  {%- set lineage_sql = (", concat_ws(',', collect_list(if(s.operation = 'replace' or " ~ is_current ~ " or " ~ given
        ~ ", concat_ws(':', cast(s.snapshot_id as string), coalesce(cast(s.parent_id as string), ''), s.operation), "
        ~ "null))) as lineage") if lineage else '' -%}
  {%- set reference = 'current_timestamp()' if as_of is none else "timestamp '" ~ as_of ~ "+00:00'" -%}
  {%- set rewrite_sql = (", (unix_micros(" ~ reference ~ ") - unix_micros(max(if(s.operation = 'replace' and "
        ~ "cast(s.summary['deleted-data-files'] as bigint) > 0, s.committed_at, null)))) / 3600000000.0 "
        ~ "as hours_since_rewrite_data_files") if rewrite_age else '' -%}
  {{ return("select " ~ ("s.request_index, " if grouped else "") ~ "count(*) as snapshots, (unix_micros(" ~ reference
        ~ ") - unix_micros(min(s.committed_at))) / 3600000000.0 as oldest_snapshot_age_hours, "
        ~ "max(if(" ~ is_current ~ ", cast(s.summary['total-data-files'] as bigint), null)) as data_files, "
        ~ "max(if(" ~ is_current ~ ", cast(s.summary['total-delete-files'] as bigint), null)) as delete_files"
        ~ ((", max(if(" ~ is_current ~ ", cast(s.summary['total-files-size'] as bigint), null)) as table_bytes")
           if table_bytes else "")
        ~ rewrite_sql ~ lineage_sql ~ " from " ~ source ~ (" group by s.request_index" if grouped else "")) }}
{% endmacro %}


{#- The figures of one _iceberg_maint_summary_select row, the ones asked for. Pure. -#}
{% macro _iceberg_maint_summary_parse(row, snapshot_id, rewrite_age=false, table_bytes=false, lineage_of=none) %}
  {%- set snapshots = row['snapshots'] | int -%}
  {%- set age = row['oldest_snapshot_age_hours'] -%}
  {%- set figures = {'snapshots': snapshots, 'oldest_snapshot_age_hours': none if age is none else ((age | float) | round(3)),
        'snapshot_id': snapshot_id} -%}
  {%- if rewrite_age -%}
    {%- set rewrite = row['hours_since_rewrite_data_files'] -%}
    {%- do figures.update({'hours_since_rewrite_data_files': none if rewrite is none else ((rewrite | float) | round(3))}) -%}
  {%- endif -%}
  {%- for name in ['data_files', 'delete_files'] + (['table_bytes'] if table_bytes else []) -%}
    {%- do figures.update({name: 0 if snapshots == 0 else (none if row[name] is none else row[name] | int)}) -%}
  {%- endfor -%}
  {%- if lineage_of -%}
    {%- set lineage = {} -%}
    {%- for entry in ((row['lineage'] or '') | string).split(',') if entry -%}
      {%- set parts = entry.split(':') -%}
      {%- do lineage.update({parts[0] | int: {'parent': parts[1] | int if parts[1] else none,
            'operation': parts[2]}}) -%}
    {%- endfor -%}
    {%- do figures.update({'lineage': lineage}) -%}
  {%- endif -%}
  {{ return(figures) }}
{% endmacro %}

{#- The plan's deeper figures, in one query, only those asked for: the most small files (below
    small_file_threshold_bytes) in one partition, the data manifests, the delete files; for the
    iceberg_healthy test also the table's small files (below small_files_below bytes) and all its
    manifests; deletion_vectors: the Puffin delete files; delete_ratio: max_partition_delete_ratio. -#}
{% macro _iceberg_maint_deep_figures(table, small_file_threshold_bytes, data_manifests, delete_files,
    small_files_below=none, manifests=false, deletion_vectors=false, delete_ratio=false) %}
  {%- set columns = {} -%}
  {%- if small_files_below is not none -%}
    {%- do columns.update({'small_files': '(select count(*) from ' ~ table ~ '.data_files where file_size_in_bytes < '
          ~ small_files_below ~ ')'}) -%}
  {%- endif -%}
  {#- The layout (one DESCRIBE) only when a figure groups by partition. -#}
  {%- set layout = namespace(partitioned=none) -%}
  {%- if small_file_threshold_bytes is not none or delete_ratio -%}
    {%- set layout.partitioned = dbt_iceberg_maint._iceberg_maint_table_layout(table).partition_fields | length > 0 -%}
  {%- endif -%}
  {%- if small_file_threshold_bytes is not none -%}
    {%- do columns.update({'max_small_files_in_partition': dbt_iceberg_maint._iceberg_maint_max_small_files_sql(
          table ~ '.data_files', small_file_threshold_bytes, layout.partitioned)}) -%}
  {%- endif -%}
  {%- if data_manifests -%}
    {%- do columns.update({'data_manifests': '(select count(*) from ' ~ table ~ '.manifests where content = 0)'}) -%}
  {%- endif -%}
  {%- if manifests -%}
    {%- do columns.update({'manifests': '(select count(*) from ' ~ table ~ '.manifests)'}) -%}
  {%- endif -%}
  {%- if delete_files -%}
    {%- do columns.update({'delete_files': '(select count(*) from ' ~ table ~ '.delete_files)'}) -%}
  {%- endif -%}
  {%- if deletion_vectors -%}
    {%- do columns.update({'deletion_vectors': dbt_iceberg_maint._iceberg_maint_deletion_vectors_sql(table)}) -%}
  {%- endif -%}
  {%- if delete_ratio -%}
    {%- do columns.update({'max_partition_delete_ratio': dbt_iceberg_maint._iceberg_maint_max_delete_ratio_sql(
          table ~ '.data_files', table ~ '.delete_files', layout.partitioned)}) -%}
  {%- endif -%}
  {%- set figures = {} -%}
  {%- if columns -%}
    {%- set selected = [] -%}
    {%- for name, sql in columns.items() -%}{%- do selected.append(sql ~ ' as ' ~ name) -%}{%- endfor -%}
    {%- set row = run_query('select ' ~ selected | join(', ')).rows[0] -%}
    {%- for name in columns -%}
      {%- do figures.update({name: (row[name] | float) if name == 'max_partition_delete_ratio' else row[name] | int}) -%}
    {%- endfor -%}
  {%- endif -%}
  {{ return(figures) }}
{% endmacro %}


{#- {operation: the snapshot id its last check recorded} for the `deciding` operations whose
    answer only new data can change (_iceberg_maint_skipped_when_unchanged), from the table's
    properties. -#}
{% macro _iceberg_maint_recorded_checks(deciding, resolved, properties) %}
  {%- set recorded = {} -%}
  {%- for operation in deciding if dbt_iceberg_maint._iceberg_maint_skipped_when_unchanged(operation, resolved) -%}
    {%- set text = properties.get(dbt_iceberg_maint._iceberg_maint_checked_snapshot_property(operation)) -%}
    {%- if text is string and text.isdigit() -%}{%- do recorded.update({operation: text | int}) -%}{%- endif -%}
  {%- endfor -%}
  {{ return(recorded) }}
{% endmacro %}


{#- The `recorded` checks ({operation: snapshot id}) nothing was written since (the twin of
    metadata/planner.py's _LazyTable.unchanged_since_check), with `current` the current snapshot's
    id and `lineage` ({id: {parent, operation}}) as the snapshot summary read them in its one scan
    (_iceberg_maint_summary_figures' lineage_of). Pure. -#}
{% macro _iceberg_maint_unchanged_operations(recorded, current, lineage) %}
  {%- if not recorded or current is none -%}{{ return({}) }}{%- endif -%}
  {%- set unchanged = {} -%}
  {%- for operation, snapshot_id in recorded.items()
        if dbt_iceberg_maint._iceberg_maint_unchanged_since(snapshot_id, current, lineage) -%}
    {%- do unchanged.update({operation: snapshot_id}) -%}
  {%- endfor -%}
  {{ return(unchanged) }}
{% endmacro %}


{#- The table property recording when maintain() or iceberg_maintenance last checked `operation`
    on the table (it ran successfully, or was found not due), in UTC; only for operations with an
    interval_hours. -#}
{% macro _iceberg_maint_checked_property(operation) %}
  {{ return('dbt-iceberg-maint.checked-at.' ~ operation) }}
{% endmacro %}

{#- {operation: hours since that operation was last checked} from the table's properties (wall
    clock, never as_of); an unreadable value counts as never checked, so the check runs. -#}
{% macro _iceberg_maint_checked_hours_ago(properties) %}
  {%- set now = dbt_iceberg_maint._iceberg_maint_now() -%}
  {%- set checked = {} -%}
  {%- for operation in dbt_iceberg_maint._iceberg_maint_operation_order() -%}
    {%- set text = properties.get(dbt_iceberg_maint._iceberg_maint_checked_property(operation)) -%}
    {%- set match = modules.re.fullmatch('(\\d{4})-(\\d{2})-(\\d{2})T(\\d{2}):(\\d{2}):(\\d{2})Z', text or '') -%}
    {%- if match -%}
      {%- set at = modules.datetime.datetime(match.group(1) | int, match.group(2) | int, match.group(3) | int,
            match.group(4) | int, match.group(5) | int, match.group(6) | int, 0, modules.pytz.utc) -%}
      {%- do checked.update({operation: (now - at).total_seconds() / 3600}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(checked) }}
{% endmacro %}

{#- After a table's steps ran: record in one ALTER TABLE when each operation with an interval_hours
    was checked, i.e. it ran successfully or its due rule found nothing to do, and for the
    operations only new data can change, `snapshot_id`: the table's current snapshot when the plan
    read it (the next plan skips them while only compactions and rewrites follow it). Not for a dry run or
    a forced run (force neither reads nor writes the intervals), a failure, or a skip that decided
    nothing (a kill switch, disabled, within its interval, the cost gate): those operations are
    checked again next time. The skip reasons that decide nothing are matched by their first words,
    which _iceberg_maint_plan_steps writes. An expiry that ran adds the policy's metadata-file
    retention (_iceberg_maint_metadata_retention) to the same ALTER TABLE. -#}
{% macro _iceberg_maint_record_checks(table, resolved, steps, results, snapshot_id=none) %}
  {#- Not recorded either: an orphan sweep skipped on a young table (the next run asks its age again). -#}
  {%- set undecided = ['maintenance disabled by', 'table does not exist', 'disabled by meta.', 'last checked ',
        'cost gate:', 'the table is only '] -%}
  {%- set now = dbt_iceberg_maint._iceberg_maint_now().strftime('%Y-%m-%dT%H:%M:%SZ') -%}
  {%- set recorded = [] -%}
  {%- for step in steps -%}
    {%- set result = results[loop.index0] -%}
    {%- set section = resolved[dbt_iceberg_maint._iceberg_maint_policy_section(step.operation)] -%}
    {%- set decided = namespace(value=result.status == 'success' or (result.status == 'skipped'
          and step.status == 'skipped')) -%}
    {%- for prefix in undecided if result.status == 'skipped' and (step.reason or '').startswith(prefix) -%}
      {%- set decided.value = false -%}
    {%- endfor -%}
    {%- if section.interval_hours and decided.value -%}
      {%- do recorded.append(dbt_iceberg_maint._iceberg_maint_string_literal(
            dbt_iceberg_maint._iceberg_maint_checked_property(step.operation)) ~ " = '" ~ now ~ "'") -%}
    {%- endif -%}
    {#- A skip for nothing written since keeps its record: the snapshot it names is still the one checked. -#}
    {%- if snapshot_id is not none and decided.value and not (step.reason or '').startswith('nothing written since')
          and dbt_iceberg_maint._iceberg_maint_skipped_when_unchanged(step.operation, resolved) -%}
      {%- do recorded.append(dbt_iceberg_maint._iceberg_maint_string_literal(
            dbt_iceberg_maint._iceberg_maint_checked_snapshot_property(step.operation)) ~ " = '" ~ snapshot_id ~ "'") -%}
    {%- endif -%}
  {%- endfor -%}
  {#- Statistics computed: the snapshot they are for, from the file name Iceberg gives it. -#}
  {%- for step in steps -%}
    {%- set result = results[loop.index0] -%}
    {%- set computed = dbt_iceberg_maint._iceberg_maint_statistics_file_snapshot(result.get('metrics'))
          if step.operation in dbt_iceberg_maint._iceberg_maint_statistics_keys() and result.status == 'success'
          else none -%}
    {%- if computed is not none -%}
      {%- do recorded.append(dbt_iceberg_maint._iceberg_maint_string_literal(
            dbt_iceberg_maint._iceberg_maint_statistics_snapshot_property(step.operation)) ~ " = '" ~ computed ~ "'") -%}
    {%- endif -%}
  {%- endfor -%}
  {#- An expiry that ran also sets the policy's metadata-file retention, in the same commit. -#}
  {%- for step in steps -%}
    {%- if step.operation == 'expire_snapshots' and results[loop.index0].status == 'success' -%}
      {%- for key, value in dbt_iceberg_maint._iceberg_maint_metadata_retention(resolved.expire_snapshots).items() -%}
        {%- do recorded.append(dbt_iceberg_maint._iceberg_maint_string_literal(key) ~ " = '" ~ value ~ "'") -%}
      {%- endfor -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if recorded -%}
    {%- call statement('iceberg_maint_record_checks', fetch_result=False) -%}
      alter table {{ table }} set tblproperties ({{ recorded | join(', ') }})
    {%- endcall -%}
  {%- endif -%}
{% endmacro %}

{#- The health key the statistics' due rule reads, per statistics operation. -#}
{% macro _iceberg_maint_statistics_keys() %}
  {{ return({'compute_table_stats': 'statistics_snapshot_id',
      'compute_partition_stats': 'partition_statistics_snapshot_id'}) }}
{% endmacro %}

{#- The table property recording the snapshot the statistics that maintain() or
    iceberg_maintenance last computed are for (Spark SQL shows no statistics files; Python:
    operations.py STATISTICS_SNAPSHOT_PREFIX). Statistics computed by other means are unknown to
    the macros: the next plan computes them once more. -#}
{% macro _iceberg_maint_statistics_snapshot_property(operation) %}
  {{ return('dbt-iceberg-maint.statistics-snapshot.' ~ operation) }}
{% endmacro %}

{#- Pure: the snapshot id in the name of the file a statistics procedure wrote (its output
    `statistics_file`, `<snapshot id>-<uuid>.stats`, or `partition_statistics_file`,
    `partition-stats-<snapshot id>-<uuid>.parquet`), or none. -#}
{% macro _iceberg_maint_statistics_file_snapshot(metrics) %}
  {%- set path = (metrics or {}).get('statistics_file') or (metrics or {}).get('partition_statistics_file') -%}
  {%- set match = modules.re.match('(?:partition-stats-)?(\\d+)-', ((path or '') | string).split('/') | last) -%}
  {{ return(match.group(1) if match else none) }}
{% endmacro %}

{#- The table property recording the table's current snapshot when the plan that last checked
    `operation` read it (only for operations _iceberg_maint_skipped_when_unchanged names). -#}
{% macro _iceberg_maint_checked_snapshot_property(operation) %}
  {{ return('dbt-iceberg-maint.checked-snapshot.' ~ operation) }}
{% endmacro %}

{#- Pure: whether only new data can change the operation's answer, so that it skips a table
    nothing was written to since its last check. Not a compaction scoped to cold partitions
    (time alone makes partitions cold), nor expiry (snapshots age) or orphan removal (a failed
    write leaves files without a snapshot). Twin: policy/engine.py `skipped_when_unchanged`. -#}
{% macro _iceberg_maint_skipped_when_unchanged(operation, resolved) %}
  {%- if operation == 'rewrite_data_files' -%}{{ return(not resolved.compaction.cold_partitions_hours) }}{%- endif -%}
  {{ return(operation in ['rewrite_position_delete_files', 'rewrite_manifests']) }}
{% endmacro %}

{#- Pure: whether snapshot `checked` is the `current` one or its ancestor through snapshots that
    change no row ('replace': compactions, rewrites); `lineage`: {id: {parent, operation}}. A
    rollback past it, an expired snapshot or any write since make it false. Twin: policy/engine.py
    `unchanged_since`. -#}
{% macro _iceberg_maint_unchanged_since(checked, current, lineage) %}
  {%- set walk = namespace(snapshot=current, answer=none) -%}
  {%- for _ in range(lineage | length + 1) if walk.answer is none -%}
    {%- if walk.snapshot is none or walk.snapshot not in lineage -%}
      {%- set walk.answer = false -%}
    {%- elif walk.snapshot == checked -%}
      {%- set walk.answer = true -%}
    {%- elif lineage[walk.snapshot].operation != 'replace' -%}
      {%- set walk.answer = false -%}
    {%- else -%}
      {%- set walk.snapshot = lineage[walk.snapshot].parent -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(walk.answer is true) }}
{% endmacro %}

{% macro _iceberg_maint_unchanged_reason(snapshot_id) %}
  {{ return('nothing written since its last check (snapshot ' ~ snapshot_id ~ '): only compactions and rewrites since') }}
{% endmacro %}

{#- Pure: why `section`'s operation is not checked now (last checked `hours_ago` h ago, less than
    its interval_hours), or none. Its twin: policy/engine.py `interval_reason`. -#}
{% macro _iceberg_maint_interval_reason(section, hours_ago) %}
  {%- if section.interval_hours and hours_ago is not none and hours_ago < section.interval_hours -%}
    {{ return('last checked ' ~ (hours_ago | round(2)) ~ ' h ago, within interval_hours ' ~ section.interval_hours) }}
  {%- endif -%}
  {{ return(none) }}
{% endmacro %}


{#- The plan's steps from a checked policy and the table's facts (pure: the shared case table,
    tests/policy_cases.yml, runs it against its Python twin, policy/engine.py `plan_steps`).
    facts: {project_enabled, exists, required, gc_enabled, data_files, table_bytes, health, cold_scope,
    snapshots, now_ms, checked_hours_ago}. Kill switches first (the project var, the model's policy, the table
    must exist: a missing table fails every operation when `required` (the caller named it), else
    skips it); then per operation: disabled, within its interval_hours, the cost gate, too few data
    files to compact (the snapshot summary's count), not due, gc.enabled=false (Iceberg refuses both
    expire_snapshots and remove_orphan_files: a failed step that does not run, so the following
    steps still run), else its SQL. -#}
{% macro _iceberg_maint_plan_steps(table, requested, resolved, facts, force=false, as_of=none) %}
  {%- set step = dbt_iceberg_maint._iceberg_maint_step -%}
  {%- set steps = [] -%}
  {%- set blocked = none -%}
  {%- if not facts.project_enabled -%}
    {%- set blocked = 'maintenance disabled by var dbt_iceberg_maint_enabled: false' -%}
  {%- elif not resolved.enabled -%}
    {%- set blocked = 'maintenance disabled by meta.iceberg_maint.enabled: false' -%}
  {%- elif facts.get('table_format') -%}
    {%- set blocked = 'not an Iceberg table (' ~ facts.table_format ~ '): never maintained' -%}
  {%- elif not facts.exists and facts.get('required', false) -%}
    {%- for operation in requested -%}
      {%- do steps.append(step(table, operation, 'failed', 'table ' ~ table
            ~ ' does not exist (a typo, or its model not built yet?)')) -%}
    {%- endfor -%}
    {{ return(steps) }}
  {%- elif not facts.exists -%}
    {%- set blocked = 'table does not exist (model not built yet?)' -%}
  {%- endif -%}
  {%- if blocked is not none -%}
    {%- for operation in requested -%}{%- do steps.append(step(table, operation, 'skipped', blocked)) -%}{%- endfor -%}
    {{ return(steps) }}
  {%- endif -%}
  {%- set reference = as_of if as_of is not none else dbt_iceberg_maint._iceberg_maint_now() -%}
  {%- set cold_hours = resolved.compaction.cold_partitions_hours -%}
  {%- set rewrites_planned = [] -%}
  {%- for operation in requested -%}
    {%- set section_name = dbt_iceberg_maint._iceberg_maint_policy_section(operation) -%}
    {%- set section = resolved[section_name] -%}
    {%- set interval = none if force or not section.enabled else dbt_iceberg_maint._iceberg_maint_interval_reason(
          section, (facts.checked_hours_ago or {}).get(operation)) -%}
    {%- set since = (facts.unchanged_since_checked or {}).get(operation) if not force and section.enabled
          and not interval and dbt_iceberg_maint._iceberg_maint_skipped_when_unchanged(operation, resolved) else none -%}
    {#- Within its interval, or nothing written since its last check: skipped before the gate. -#}
    {%- set not_now = interval or (dbt_iceberg_maint._iceberg_maint_unchanged_reason(since) if since is not none
          else none) -%}
    {%- set gated = none if force or not section.enabled or not_now else dbt_iceberg_maint._iceberg_maint_cost_gate_decision(
          operation, resolved.cost_gate, facts.snapshots, facts.now_ms, cold_hours) -%}
    {%- set few = dbt_iceberg_maint._iceberg_maint_too_few_data_files(section, facts.data_files,
          facts.get('delete_files', 0))
          if operation == 'rewrite_data_files' and not force and section.enabled and not not_now and not gated
          else none -%}
    {%- set scope = facts.cold_scope if operation == 'rewrite_data_files' and cold_hours else none -%}
    {%- set decision = {'due': true, 'reason': 'forced (thresholds ignored)'} -%}
    {%- if not force and section.enabled and not not_now and not gated and not few -%}
      {#- No health when orphan removal, which reads none, is the only operation decided. -#}
      {%- set checked = (facts.health or {}).copy() -%}
      {%- do checked.update(facts.get('statistics') or {}) -%}
      {%- do checked.update({'table_age_hours': facts.get('table_age_hours')}) -%}
      {%- if scope is not none -%}{%- do checked.update({'cold_scope': scope}) -%}{%- endif -%}
      {%- do checked.update({'rewrites_planned': rewrites_planned}) -%}
      {%- if resolved.expire_snapshots.older_than is not none -%}
        {%- set cutoff = dbt_iceberg_maint._iceberg_maint_parse_instant(
              'policy expire_snapshots', 'older_than', resolved.expire_snapshots.older_than).value -%}
        {%- do checked.update({'hours_since_older_than': (reference - cutoff).total_seconds() / 3600}) -%}
      {%- endif -%}
      {%- set decision = dbt_iceberg_maint._iceberg_maint_due(operation, resolved, checked) -%}
    {%- endif -%}
    {%- if not section.enabled -%}
      {%- do steps.append(step(table, operation, 'skipped', 'disabled by meta.iceberg_maint.' ~ section_name
            ~ '.enabled: false')) -%}
    {%- elif not_now -%}
      {%- do steps.append(step(table, operation, 'skipped', not_now)) -%}
    {%- elif gated -%}
      {%- do steps.append(step(table, operation, 'skipped', gated)) -%}
    {%- elif few -%}
      {%- do steps.append(step(table, operation, 'skipped', few)) -%}
    {%- elif not decision.due -%}
      {%- do steps.append(step(table, operation, 'skipped', decision.reason)) -%}
    {%- elif operation in ['expire_snapshots', 'remove_orphan_files'] and not facts.gc_enabled -%}
      {%- set verb = 'expire snapshots' if operation == 'expire_snapshots' else 'delete orphan files' -%}
      {%- do steps.append(step(table, operation, 'failed', 'Cannot ' ~ verb
            ~ ': GC is disabled (deleting files may corrupt other tables); table property gc.enabled=false')) -%}
    {%- else -%}
      {%- set planned = dbt_iceberg_maint._iceberg_maint_planned_sql(table, operation, resolved,
            cold_scope=scope, reference=as_of, force=force, table_bytes=facts.get('table_bytes')) -%}
      {%- if planned.sql is none -%}
        {%- do steps.append(step(table, operation, 'skipped', planned.reason)) -%}
      {%- else -%}
        {%- do steps.append(step(table, operation, 'planned', decision.reason, planned.sql)) -%}
        {%- if operation in ['rewrite_data_files', 'rewrite_position_delete_files', 'rewrite_manifests'] -%}
          {%- do rewrites_planned.append(operation) -%}
        {%- endif -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(steps) }}
{% endmacro %}


{% macro _iceberg_maint_step(table, operation, status, reason=none, sql=none) %}
  {{ return({'table': table | string, 'operation': operation, 'status': status, 'reason': reason, 'sql': sql}) }}
{% endmacro %}


{#- Execute one step and return its result record (one ICEBERG_MAINT_RESULT line): skipped and
    failed steps only log; a planned step logs ICEBERG_MAINT_START (debug level: which step a
    statement Spark rejects belongs to) and runs its SQL, or in a dry run renders it. -#}
{% macro _iceberg_maint_execute_step(step, dry_run=false, checks=none) %}
  {%- set log_result = dbt_iceberg_maint._iceberg_maint_log_result -%}
  {%- if step.status != 'planned' -%}
    {{ return(log_result(step.table, step.operation, step.status, step.reason, none, {}, 0)) }}
  {%- endif -%}
  {%- if dry_run -%}
    {{ return(log_result(step.table, step.operation, 'dry_run', 'dry run: ' ~ step.reason, step.sql, {}, 0)) }}
  {%- endif -%}
  {%- set refused = dbt_iceberg_maint._iceberg_maint_nessie_refusal(step.table, step.operation, checks) -%}
  {%- if refused -%}
    {{ return(log_result(step.table, step.operation, 'skipped', refused, step.sql, {}, 0)) }}
  {%- endif -%}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('start', {'table': step.table, 'operation': step.operation},
        info=false) -%}
  {%- set started = dbt_iceberg_maint._iceberg_maint_now() -%}
  {%- set output = run_query(step.sql) -%}
  {%- set duration_ms = dbt_iceberg_maint._iceberg_maint_elapsed_ms(started) -%}
  {%- set metrics = dbt_iceberg_maint._iceberg_maint_output_metrics(output, step.operation == 'remove_orphan_files') -%}
  {{ return(log_result(step.table, step.operation, 'success', step.reason, step.sql, metrics, duration_ms)) }}
{% endmacro %}


{#- Execute the steps in order, logging "i of N" over the steps that run (skipped and failed
    steps only log their result line); returns the result records. Each table's planned steps
    run under its lease (macros/internal/lease.sql), taken before its first planned step,
    extended before the others, released after its last: when another job holds it, they are
    skipped with the reason `lease held by ...`. With several tables to run, a table's lease is
    claimed together with the next tables' (up to 8, _iceberg_maint_lease_claim_many: one INSERT
    and one read per lease log), and each is taken up by its table's first step; a table the batch
    did not get claims on its own. A step Spark rejects stops the macro with its lease and those of
    its batch's tables still to run taken: they expire after their TTL, or the same run id (a
    replay of the remaining steps) takes them again.
    `path`: who runs the steps (maintain, iceberg_maintenance, execute_maintenance_steps).
    History (macros/internal/history.sql): a row per executed, skipped or failed step (none in a
    dry run), sent before and after each CALL and at the end; `tables` ({table: {node, health}})
    gives each table's dbt node label and the summary figures its plan read (health before its
    first step; an executed step reads them after itself for the next); `history_checked`: the
    caller knows the history table exists with its columns (no check statements). `handed`: leases
    an earlier invocation of the caller's run kept (checked by _iceberg_maint_lease_handover_errors),
    resumed instead of claimed; `keep_leases`: the leases are not released after their tables'
    last steps but logged (ICEBERG_MAINT_KEPT, debug level) for the run's next invocation. -#}
{% macro _iceberg_maint_execute_steps(steps, dry_run=false, progress=true, path='maintain', tables={},
    history_checked=false, checked=none, handed=none, keep_leases=false, defer_history=false) %}
  {%- set total = steps | selectattr('status', 'equalto', 'planned') | list | length -%}
  {%- set counter = namespace(i=0) -%}
  {%- set last_planned = {} -%}
  {%- for step in steps if step.status == 'planned' -%}{%- do last_planned.update({step.table: loop.index0}) -%}{%- endfor -%}
  {%- set planned_index = namespace(i=-1) -%}
  {%- set leases = {} -%}
  {%- set planned_tables = [] -%}
  {%- for step in steps if step.status == 'planned' and step.table not in planned_tables -%}
    {%- do planned_tables.append(step.table) -%}
  {%- endfor -%}
  {%- set claims = namespace(tried=[]) -%}  {#- the tables a batch claim has tried -#}
  {%- set handed_by_table = {} -%}
  {%- if handed and dbt_iceberg_maint._iceberg_maint_lease_settings().enabled -%}
    {%- for lease in handed -%}
      {%- do handed_by_table.update({lease.table: dict(lease, enabled=true, held=true, reason=none)}) -%}
    {%- endfor -%}
  {%- endif -%}
  {%- set results = [] -%}
  {#- A dry run writes no history at all: it neither changes nor decides anything. -#}
  {%- set history = dbt_iceberg_maint._iceberg_maint_history_open(path) -%}
  {%- do history.update({'enabled': history.enabled and not dry_run, 'deferred': defer_history}) -%}
  {%- if history_checked -%}{%- do history.state.update({'ready': true}) -%}{%- endif -%}
  {#- What holds for the whole invocation is checked once: lease logs that exist, catalogs that are
      not Nessie catalogs (with what the caller's earlier invocations found, `checked`). -#}
  {%- set checks = {'lease_logs': (checked or {}).get('lease_logs', []) | list,
        'catalogs': (checked or {}).get('catalogs', []) | list} -%}
  {%- set known = {} -%}
  {%- for step in steps -%}
    {%- if history.enabled and step.table not in known -%}
      {%- set given = tables.get(step.table) or {} -%}
      {%- do known.update({step.table: {'health': given.get('health'), 'node': given.node if 'node' in given
            else dbt_iceberg_maint._iceberg_maint_history_node(step.table)}}) -%}
    {%- endif -%}
    {%- set started = dbt_iceberg_maint._iceberg_maint_now() -%}
    {%- set leased = step.status == 'planned' and not dry_run and execute -%}
    {%- if step.status == 'planned' -%}
      {%- set planned_index.i = planned_index.i + 1 -%}
      {%- if progress -%}
        {%- set counter.i = counter.i + 1 -%}
        {%- do log(counter.i ~ ' of ' ~ total ~ ' ' ~ step.table ~ ' ' ~ step.operation
              ~ (' (dry run)' if dry_run else ''), info=true) -%}
      {%- endif -%}
    {%- endif -%}
    {%- if leased -%}
      {#- The rows so far are written before anything that may stop the macro. -#}
      {%- do dbt_iceberg_maint._iceberg_maint_history_flush(history) -%}
      {%- if step.table in leases -%}
        {%- do leases.update({step.table: dbt_iceberg_maint._iceberg_maint_lease_renew(leases[step.table])}) -%}
      {%- else -%}
        {%- if step.table not in handed_by_table -%}
          {#- Not handed over: claimed with the next tables to run that have no lease yet. -#}
          {%- set upcoming = [] -%}
          {%- for table in planned_tables[planned_tables.index(step.table):] if table not in claims.tried
                and table not in leases and table not in handed_by_table -%}
            {%- do upcoming.append(table) -%}
          {%- endfor -%}
          {%- if upcoming | length > 1 -%}
            {%- set claims.tried = claims.tried + upcoming[:8] -%}
            {%- for lease in dbt_iceberg_maint._iceberg_maint_lease_claim_many(upcoming[:8], path, checks) -%}
              {%- do handed_by_table.update({lease.table: lease}) -%}
            {%- endfor -%}
          {%- endif -%}
        {%- endif -%}
        {%- if step.table in handed_by_table -%}
          {%- do leases.update({step.table: dbt_iceberg_maint._iceberg_maint_lease_resume(
                handed_by_table.pop(step.table), path, checks)}) -%}
        {%- else -%}
          {%- do leases.update({step.table: dbt_iceberg_maint._iceberg_maint_lease_acquire(step.table, path, checks)}) -%}
        {%- endif -%}
      {%- endif -%}
    {%- endif -%}
    {%- set holder = none -%}
    {%- if leased and not leases[step.table].held -%}
      {%- set record = dbt_iceberg_maint._iceberg_maint_log_result(step.table, step.operation, 'skipped',
            leases[step.table].reason, none, {}, 0) -%}
      {%- set holder = leases[step.table].get('blocked_by') -%}
    {%- else -%}
      {%- set record = dbt_iceberg_maint._iceberg_maint_execute_step(step, dry_run, checks) -%}
      {%- set holder = leases[step.table].holder if leased and leases[step.table].enabled else none -%}
    {%- endif -%}
    {%- do results.append(record) -%}
    {%- if history.enabled -%}
      {%- set own = known[step.table] -%}
      {%- set before = own.health -%}
      {%- set after = none -%}
      {#- Deferred rows are completed by the caller, which reads the health after the step itself. -#}
      {%- if leased and record.status == 'success' and not defer_history -%}
        {%- set after = dbt_iceberg_maint._iceberg_maint_history_health(history, step.table) -%}
        {%- do own.update({'health': after}) -%}
      {%- endif -%}
      {%- do dbt_iceberg_maint._iceberg_maint_history_add(history, dbt_iceberg_maint._iceberg_maint_history_row(
            history, record, started, dbt_iceberg_maint._iceberg_maint_now(), before, after, holder, own.node)) -%}
      {%- if leased and record.status == 'success' -%}
        {%- do dbt_iceberg_maint._iceberg_maint_history_flush(history) -%}
      {%- endif -%}
    {%- endif -%}
    {%- if leased and last_planned[step.table] == planned_index.i and not keep_leases -%}
      {%- do dbt_iceberg_maint._iceberg_maint_lease_release(leases[step.table]) -%}
    {%- endif -%}
  {%- endfor -%}
  {#- A handed-over lease no step used stays the run's when kept, else it ends here. -#}
  {%- if keep_leases -%}
    {%- set kept = [] -%}
    {%- for lease in (leases.values() | selectattr('enabled') | selectattr('held') | list)
          + (handed_by_table.values() | list) -%}
      {%- do kept.append(dbt_iceberg_maint._iceberg_maint_lease_handover(lease)) -%}
    {%- endfor -%}
    {%- if kept -%}
      {%- do dbt_iceberg_maint._iceberg_maint_log_marker('kept', {'leases': kept}, info=false) -%}
    {%- endif -%}
  {%- else -%}
    {%- for lease in handed_by_table.values() -%}{%- do dbt_iceberg_maint._iceberg_maint_lease_release(lease) -%}{%- endfor -%}
  {%- endif -%}
  {%- do dbt_iceberg_maint._iceberg_maint_history_flush(history) -%}
  {%- if checks.lease_logs or checks.catalogs -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_marker('checked', checks, info=false) -%}
  {%- endif -%}
  {{ return(results) }}
{% endmacro %}


{#- `dbt run-operation dbt_iceberg_maint.execute_maintenance_steps --args '{steps: [...]}'`:
    execute steps exactly as a logged plan recorded them (dbt-iceberg-maint maintain resumes a
    plan with it): planned steps run their recorded SQL, skipped and failed ones log their
    result line. Every step is checked before the first runs: known keys, statuses and
    operations, and for a planned step SQL that is one CALL of its operation's procedure on its
    table. `record` ({policy, snapshot_id}: the tables' policy and the snapshot the plan read,
    the fleet engine passes it) records the checks of the steps that ran as iceberg_maintenance
    does, so the intervals and the fixed point hold for the engine's runs too. `settled`: the
    steps are outcomes the caller decided without a macro (the fleet engine's plan skips, budget
    backlog, timeouts): only skipped and failed steps, each logs its result line and history
    row, none fails the invocation; `nodes` ({table: node label}) names their dbt nodes.
    `checked` ({lease_logs: [...], catalogs: [...]}, what an earlier invocation of the caller's
    run logged in its ICEBERG_MAINT_CHECKED line): lease logs that exist and catalogs that are not
    Nessie catalogs; the steps do not check them again. `keep_leases`: the leases the steps hold
    are not released after their tables' last steps but logged (ICEBERG_MAINT_KEPT, debug level);
    `leases`: what such a line of the same run handed over, taken up instead of claimed again (the
    fleet engine runs a table's steps one invocation each under one lease). `defer_history`: the
    steps' history rows are not written but logged (ICEBERG_MAINT_HISTORY_ROWS, debug level),
    without the health after an executed step, for the caller to complete (the fleet engine reads
    that health from the table's metadata file) and to write many steps' rows at once
    (claim_leases' `history_rows`). -#}
{% macro execute_maintenance_steps(steps, record=none, history_checked=false, settled=false, nodes=none,
      checked=none, leases=none, keep_leases=false, defer_history=false) %}
  {{ return(adapter.dispatch('execute_maintenance_steps', 'dbt_iceberg_maint')(steps=steps, record=record,
      history_checked=history_checked, settled=settled, nodes=nodes, checked=checked, leases=leases,
      keep_leases=keep_leases, defer_history=defer_history)) }}
{% endmacro %}

{% macro default__execute_maintenance_steps(steps, record=none, history_checked=false, settled=false, nodes=none,
      checked=none, leases=none, keep_leases=false, defer_history=false) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.execute_maintenance_steps is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__execute_maintenance_steps(steps, record=none, history_checked=false, settled=false, nodes=none,
      checked=none, leases=none, keep_leases=false, defer_history=false) %}
  {%- set check_boolean = dbt_iceberg_maint._iceberg_maint_check_boolean -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_step_errors(steps)
        + dbt_iceberg_maint._iceberg_maint_record_errors(record)
        + check_boolean('execute_maintenance_steps', 'history_checked', history_checked)
        + check_boolean('execute_maintenance_steps', 'settled', settled)
        + dbt_iceberg_maint._iceberg_maint_settled_errors(steps, record, settled, nodes)
        + dbt_iceberg_maint._iceberg_maint_checked_errors(checked)
        + check_boolean('execute_maintenance_steps', 'keep_leases', keep_leases)
        + check_boolean('execute_maintenance_steps', 'defer_history', defer_history)
        + dbt_iceberg_maint._iceberg_maint_handed_lease_errors(steps, leases)) -%}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set tables = {} -%}
  {%- for table, node in (nodes or {}).items() -%}{%- do tables.update({table: {'node': node}}) -%}{%- endfor -%}
  {%- set results = dbt_iceberg_maint._iceberg_maint_execute_steps(steps, path='execute_maintenance_steps',
        tables=tables, history_checked=history_checked, checked=checked, handed=leases, keep_leases=keep_leases,
        defer_history=defer_history) -%}
  {%- set failed = results | selectattr('status', 'equalto', 'failed') | list -%}
  {%- if failed and not settled -%}
    {{ exceptions.raise_compiler_error("execute_maintenance_steps: " ~ failed | length ~ " step(s) failed: "
        ~ failed | map(attribute='operation') | join(', ')) }}
  {%- endif -%}
  {%- if record is not none -%}
    {%- set resolved = dbt_iceberg_maint._iceberg_maint_resolved_policy(record.policy) -%}
    {%- for table in steps | map(attribute='table') | unique -%}
      {%- set own = namespace(steps=[], results=[]) -%}
      {%- for step in steps if step.table == table -%}
        {%- set own.steps = own.steps + [step] -%}
        {%- set own.results = own.results + [results[loop.index0]] -%}
      {%- endfor -%}
      {%- do dbt_iceberg_maint._iceberg_maint_record_checks(table, resolved, own.steps, own.results,
            record.snapshot_id) -%}
    {%- endfor -%}
  {%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_outside_node(results)) }}
{% endmacro %}


{#- Problems of execute_maintenance_steps' `record`: none, or {policy, snapshot_id} with a policy the
    policy checks accept and a snapshot id that is a whole number or none. -#}
{% macro _iceberg_maint_record_errors(record) %}
  {%- set owner = 'execute_maintenance_steps: argument `record`' -%}
  {%- if record is none -%}{{ return([]) }}{%- endif -%}
  {%- if record is not mapping or (record.keys() | reject('in', ['policy', 'snapshot_id']) | list) -%}
    {{ return([owner ~ ' is ' ~ tojson(record) ~ '; expected none or a mapping with keys policy, snapshot_id']) }}
  {%- endif -%}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_policy_shape_errors(record.get('policy'), owner ~ ' policy') -%}
  {%- if not errors -%}
    {%- set errors = dbt_iceberg_maint._iceberg_maint_policy_errors(
          dbt_iceberg_maint._iceberg_maint_resolved_policy(record.get('policy'))) -%}
  {%- endif -%}
  {%- set snapshot_id = record.get('snapshot_id') -%}
  {%- if snapshot_id is not none and (snapshot_id is not number or snapshot_id is boolean
        or snapshot_id != snapshot_id | int) -%}
    {%- do errors.append(owner ~ ' snapshot_id is ' ~ tojson(snapshot_id) ~ '; expected a whole number or none') -%}
  {%- endif -%}
  {{ return(errors) }}
{% endmacro %}


{#- Problems of execute_maintenance_steps' `checked`: none, or a mapping with keys lease_logs and
    catalogs (each optional), each a list of names. -#}
{% macro _iceberg_maint_checked_errors(checked) %}
  {%- set owner = 'execute_maintenance_steps: argument `checked`' -%}
  {%- if checked is none -%}{{ return([]) }}{%- endif -%}
  {%- set expected = '; expected none or a mapping with keys lease_logs and catalogs, each a list of names' -%}
  {%- if checked is not mapping or (checked.keys() | reject('in', ['lease_logs', 'catalogs']) | list) -%}
    {{ return([owner ~ ' is ' ~ tojson(checked) ~ expected]) }}
  {%- endif -%}
  {%- for key, names in checked.items() | sort -%}
    {%- if names is string or names is mapping or names is not iterable
          or (names | reject('string') | list) -%}
      {{ return([owner ~ ' ' ~ key ~ ' is ' ~ tojson(names) ~ expected]) }}
    {%- endif -%}
  {%- endfor -%}
  {{ return([]) }}
{% endmacro %}


{#- Problems of execute_maintenance_steps' `leases`: their shape and owner
    (_iceberg_maint_lease_handover_errors), and each on a table one of the steps is on. -#}
{% macro _iceberg_maint_handed_lease_errors(steps, leases) %}
  {%- set owner = 'execute_maintenance_steps: argument `leases`' -%}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_lease_handover_errors(leases, owner) -%}
  {%- if errors or leases is none -%}{{ return(errors) }}{%- endif -%}
  {#- Only a list of steps is walked: other values of `steps` are _iceberg_maint_step_errors' to refuse. -#}
  {%- set tables = (steps | selectattr('table', 'defined') | map(attribute='table') | map('string') | list)
        if steps is iterable and steps is not string and steps is not mapping else [] -%}
  {%- for lease in leases if lease.table not in tables -%}
    {%- do errors.append(owner ~ ' contains a lease of ' ~ lease.table ~ ', which none of the steps is on') -%}
  {%- endfor -%}
  {{ return(errors) }}
{% endmacro %}


{#- Problems of execute_maintenance_steps' `settled` and `nodes`: settled steps are outcomes to
    record, so none may be planned and there is no check to record; nodes is none or a mapping
    of table names to node labels. -#}
{% macro _iceberg_maint_settled_errors(steps, record, settled, nodes) %}
  {%- set owner = 'execute_maintenance_steps' -%}
  {%- set errors = [] -%}
  {%- if settled is true -%}
    {#- Only a list is walked: other values of `steps` are _iceberg_maint_step_errors' to refuse. -#}
    {%- set listed = steps is iterable and steps is not string and steps is not mapping -%}
    {%- for step in (steps if listed else []) -%}
      {%- if step is mapping and step.get('status') == 'planned' -%}
        {%- do errors.append(owner ~ ": argument `steps`, step " ~ loop.index ~ " is planned; with `settled: true` "
              ~ "every step must be "
              ~ "skipped or failed (an outcome to record, not a statement to run)") -%}
      {%- endif -%}
    {%- endfor -%}
    {%- if record is not none -%}
      {%- do errors.append(owner ~ ": `record` cannot be given with `settled: true` (no step runs, no check "
            ~ "is settled)") -%}
    {%- endif -%}
  {%- endif -%}
  {%- if nodes is not none -%}
    {%- set valid = namespace(ok=nodes is mapping) -%}
    {%- for table, node in (nodes.items() if nodes is mapping else []) -%}
      {%- if table is not string or node is not string -%}{%- set valid.ok = false -%}{%- endif -%}
    {%- endfor -%}
    {%- if not valid.ok -%}
      {%- do errors.append(owner ~ ": argument `nodes` is " ~ tojson(nodes) ~ "; expected none or a mapping "
            ~ "of table names to dbt node labels") -%}
    {%- endif -%}
  {%- endif -%}
  {{ return(errors) }}
{% endmacro %}


{#- Problems of a list of steps to execute, as messages naming the step, the key and the value. -#}
{% macro _iceberg_maint_step_errors(steps) %}
  {%- set owner = 'execute_maintenance_steps' -%}
  {%- if steps is string or steps is mapping or steps is not iterable or steps | length == 0 -%}
    {{ return([owner ~ ": argument `steps` is " ~ tojson(steps) ~ "; expected a non-empty list of steps "
        ~ "{table, operation, status, reason, sql}"]) }}
  {%- endif -%}
  {%- set protocol = dbt_iceberg_maint._iceberg_maint_protocol() -%}
  {%- set errors = [] -%}
  {%- for step in steps -%}
    {%- set where = owner ~ ": argument `steps`, step " ~ loop.index ~ " " -%}
    {%- if step is not mapping -%}
      {%- do errors.append(where ~ "is " ~ tojson(step) ~ "; expected a mapping with keys "
            ~ protocol.step_keys | join(', ')) -%}
    {%- else -%}
      {%- set unknown = step.keys() | reject('in', protocol.step_keys) | list -%}
      {%- if unknown -%}
        {%- do errors.append(where ~ "has unknown key(s) " ~ unknown | join(', ') ~ "; allowed: "
              ~ protocol.step_keys | join(', ')) -%}
      {%- endif -%}
      {%- set operation = step.get('operation') -%}
      {%- if step.get('status') not in protocol.step_statuses -%}
        {%- do errors.append(where ~ "has status " ~ tojson(step.get('status')) ~ "; allowed: "
              ~ protocol.step_statuses | join(', ')) -%}
      {%- endif -%}
      {%- if operation not in protocol.operations -%}
        {%- do errors.append(where ~ "has operation " ~ tojson(operation) ~ "; allowed: "
              ~ protocol.operations | join(', ')) -%}
      {%- endif -%}
      {%- set table = step.get('table') -%}
      {%- set valid_table = table is string
            and modules.re.fullmatch('[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*){1,2}', table) -%}
      {%- if not valid_table -%}
        {%- do errors.append(where ~ "has table " ~ tojson(table)
              ~ "; expected 'schema.table' or 'catalog.schema.table'") -%}
      {%- elif operation in protocol.operations and step.get('status') == 'planned' -%}
        {#- The step's SQL must call its own procedure on its own table, and be one statement. -#}
        {%- set sql = step.get('sql') -%}
        {%- set call = 'CALL ' ~ dbt_iceberg_maint._iceberg_maint_procedure_namespace(table) ~ '.' ~ operation
              ~ "(table => '" ~ dbt_iceberg_maint._iceberg_maint_table_name(table) ~ "'" -%}
        {%- if sql is not string or not sql.startswith(call) or not sql.endswith(')') or ';' in sql -%}
          {%- do errors.append(where ~ "has sql " ~ tojson(sql) ~ "; expected one statement starting " ~ call) -%}
        {%- else -%}
          {#- Its arguments pass the guards the procedure's own macro applies. -#}
          {%- set arguments = dbt_iceberg_maint._iceberg_maint_call_arguments(sql, call.split('(', 1)[0] ~ '(') -%}
          {%- for problem in arguments.errors + dbt_iceberg_maint._iceberg_maint_replayed_argument_errors(table,
                operation, arguments['values']) -%}
            {%- do errors.append(where ~ "has sql " ~ tojson(sql) ~ ": " ~ problem) -%}
          {%- endfor -%}
        {%- endif -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(errors) }}
{% endmacro %}


{#- {'values': {name: literal text}, 'errors': [...]} of `CALL <procedure>(name => literal, ...)`
    (`head` is the text up to the opening parenthesis), read with the package's one scanner. -#}
{% macro _iceberg_maint_call_arguments(sql, head) %}
  {%- set inner = sql[head | length:-1] -%}
  {%- set problems = dbt_iceberg_maint._iceberg_maint_fragment_problems(inner) -%}
  {%- set scanned = dbt_iceberg_maint._iceberg_maint_scan_expression(inner) -%}
  {%- if problems or scanned.problem -%}
    {{ return({'values': {}, 'errors': ["its arguments must be balanced and hold no " ~ (problems + [scanned.problem])
        | select | join(' or ')]}) }}
  {%- endif -%}
  {%- set values = {} -%}
  {%- set errors = [] -%}
  {%- for part in scanned.parts -%}
    {%- set name, separator, literal = part.partition('=>') -%}
    {%- if not separator or not dbt_iceberg_maint._iceberg_maint_is_identifier(name.strip())
          or name.strip() in values -%}
      {%- do errors.append("argument " ~ tojson(part.strip()) ~ " is not `name => value`") -%}
    {%- else -%}
      {%- do values.update({name.strip(): literal.strip()}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return({'values': values, 'errors': errors}) }}
{% endmacro %}


{#- The value of a string literal the package rendered (only \\ and \' escapes, as
    _iceberg_maint_string_literal writes them), or none for any other text: Spark's other escapes
    (\u002e, ...) would make Spark read a different value from the one checked. -#}
{% macro _iceberg_maint_string_literal_value(literal) %}
  {%- if literal is not string or not modules.re.fullmatch("'(?:[^'\\\\]|\\\\[\\\\'])*'", literal) -%}
    {{ return(none) }}
  {%- endif -%}
  {{ return(modules.re.sub("\\\\(.)", "\\1", literal[1:-1])) }}
{% endmacro %}


{#- A replayed step's arguments against the guards of its procedure: the `where` guard for the
    rewrites, the 24 h floor, the location guard and no file_list_view for remove_orphan_files. -#}
{% macro _iceberg_maint_replayed_argument_errors(table, operation, values) %}
  {%- set errors = [] -%}
  {%- if 'where' in values and operation in ['rewrite_data_files', 'rewrite_position_delete_files'] -%}
    {%- set where = dbt_iceberg_maint._iceberg_maint_string_literal_value(values.where) -%}
    {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_where(operation, 'where', where)
          if where is not none else [operation ~ ": argument `where` is " ~ values.where
          ~ "; expected a string literal"]) -%}
  {%- elif operation == 'remove_orphan_files' -%}
    {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_orphan_step_errors(table, values)) -%}
  {%- endif -%}
  {{ return(errors) }}
{% endmacro %}
