{#- Iceberg `rewrite_data_files`: compaction (binpack) or clustering (sort, zorder). Iceberg has
    no dry run for it, so dry_run=true renders the CALL and does not execute it. -#}

{% macro get_rewrite_data_files_sql(relation=none, where=none, strategy=none, sort_order=none, options=none) %}
  {{ return(adapter.dispatch('get_rewrite_data_files_sql', 'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, where=where, strategy=strategy, sort_order=sort_order,
      options=options)) }}
{% endmacro %}

{% macro default__get_rewrite_data_files_sql(relation, where, strategy, sort_order, options) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.get_rewrite_data_files_sql is not implemented for adapter '"
        ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__get_rewrite_data_files_sql(relation, where, strategy, sort_order, options) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(
        dbt_iceberg_maint._iceberg_maint_rewrite_data_files_errors(where, strategy, sort_order, options)) -%}
  {%- set arguments = [['table',
        dbt_iceberg_maint._iceberg_maint_string_literal(dbt_iceberg_maint._iceberg_maint_table_name(relation))]] -%}
  {#- Iceberg infers `sort` when only sort_order is given; say so explicitly in the SQL. -#}
  {%- set effective_strategy = strategy if strategy is not none else ('sort' if sort_order is not none else none) -%}
  {%- if effective_strategy is not none -%}{%- do arguments.append(['strategy',
        dbt_iceberg_maint._iceberg_maint_string_literal(effective_strategy | lower)]) -%}{%- endif -%}
  {%- if sort_order is not none -%}{%- do arguments.append(['sort_order',
        dbt_iceberg_maint._iceberg_maint_string_literal(sort_order.strip())]) -%}{%- endif -%}
  {%- if options -%}{%- do arguments.append(['options',
        dbt_iceberg_maint._iceberg_maint_map_literal(options)]) -%}{%- endif -%}
  {%- if where is not none -%}{%- do arguments.append(['where',
        dbt_iceberg_maint._iceberg_maint_string_literal(where.strip())]) -%}{%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_call_sql(relation, 'rewrite_data_files', arguments)) }}
{% endmacro %}


{#- Every problem with the arguments, as messages (empty list when all is well). -#}
{% macro _iceberg_maint_rewrite_data_files_errors(where=none, strategy=none, sort_order=none, options=none) %}
  {%- set proc = 'rewrite_data_files' -%}
  {%- set errors = [] -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_where(proc, 'where', where)) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_choice(proc, 'strategy', strategy, ['binpack',
        'sort'])) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_string_map(proc, 'options', options)) -%}
  {%- if sort_order is not none -%}
    {%- set fragment_errors = dbt_iceberg_maint._iceberg_maint_check_sql_fragment(proc, 'sort_order', sort_order) -%}
    {%- do errors.extend(fragment_errors) -%}
    {%- if strategy is string and strategy | lower == 'binpack' -%}
      {%- do errors.append(proc ~ ": argument `sort_order` is '" ~ sort_order ~ "' but `strategy` is '" ~ strategy
            ~ "'; a sort order needs strategy 'sort' (or no strategy, which means sort)") -%}
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
      {{ return([proc ~ ": argument `sort_order` is '" ~ sort_order
            ~ "'; a z-order must be exactly 'zorder(col1, col2, ...)' and cannot be mixed with other sort columns"]) }}
    {%- endif -%}
  {%- else -%}
    {%- for item in sort_order.split(',') -%}
      {%- if not modules.re.match(term, item, modules.re.IGNORECASE) -%}
        {{ return([proc ~ ": argument `sort_order` is '" ~ sort_order
              ~ "'; expected 'col [ASC|DESC] [NULLS FIRST|LAST], ...' or 'zorder(col1, col2, ...)'"]) }}
      {%- endif -%}
    {%- endfor -%}
  {%- endif -%}
  {{ return([]) }}
{% endmacro %}


{% macro rewrite_data_files(relation=none, where=none, strategy=none, sort_order=none, options=none, dry_run=false) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_outside_node(adapter.dispatch('rewrite_data_files', 'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, where=where, strategy=strategy, sort_order=sort_order,
      options=options, dry_run=dry_run))) }}
{% endmacro %}

{% macro default__rewrite_data_files(relation, where, strategy, sort_order, options, dry_run) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.rewrite_data_files is not implemented for adapter '"
        ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__rewrite_data_files(relation, where, strategy, sort_order, options, dry_run) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_check_boolean(
        'rewrite_data_files', 'dry_run', dry_run)) -%}
  {%- set sql = dbt_iceberg_maint.get_rewrite_data_files_sql(relation, where, strategy, sort_order, options) -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_run_procedure(relation, 'rewrite_data_files', sql, dry_run)) }}
{% endmacro %}


{#- ---- As a maintenance step (get_maintenance_plan; policy section `compaction`) ---------- -#}

{% macro _iceberg_maint_rewrite_data_files_defaults() %}
  {{ return({'enabled': true, 'min_input_files': 5, 'target_file_size_mb': none, 'strategy': none, 'sort_order': none,
             'partial_progress': 'auto', 'partial_progress_above_mb': 10240, 'max_failed_commits': 0,
             'cold_partitions_hours': none, 'where': none, 'options': {}, 'interval_hours': none}) }}
{% endmacro %}

{% macro _iceberg_maint_rewrite_data_files_policy_errors(section) %}
  {%- set number = dbt_iceberg_maint._iceberg_maint_check_positive_number -%}
  {%- set errors = number('policy compaction', 'min_input_files', section.min_input_files, integer=true)
        + number('policy compaction', 'target_file_size_mb', section.target_file_size_mb)
        + number('policy compaction', 'cold_partitions_hours', section.cold_partitions_hours) -%}
  {%- set failed_commits = section.max_failed_commits -%}
  {%- if failed_commits is not none and (failed_commits is boolean or failed_commits is not integer
        or failed_commits < 0) -%}
    {%- do errors.append("policy compaction: argument `max_failed_commits` is " ~ failed_commits
          ~ "; expected a whole number >= 0") -%}
  {%- endif -%}
  {%- if section.partial_progress != 'auto' and dbt_iceberg_maint._iceberg_maint_check_boolean('policy compaction',
        'partial_progress', section.partial_progress) -%}
    {%- do errors.append("policy compaction: argument `partial_progress` is " ~ section.partial_progress
          ~ "; expected true, false or auto") -%}
  {%- endif -%}
  {%- do errors.extend(number('policy compaction', 'partial_progress_above_mb', section.partial_progress_above_mb)) -%}
  {%- if section.options is mapping and 'delete-ratio-threshold' in section.options
        and dbt_iceberg_maint._iceberg_maint_delete_ratio_threshold(section) is none -%}
    {%- do errors.append("policy compaction: option `delete-ratio-threshold` is "
          ~ section.options['delete-ratio-threshold'] ~ "; expected a number greater than 0 and at most 1") -%}
  {%- endif -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_rewrite_data_files_errors(section.where, section.strategy,
        section.sort_order, section.options)) -%}
  {{ return(errors) }}
{% endmacro %}

{#- The compaction's options['delete-ratio-threshold'] when set, else Iceberg's default 0.3
    (rewrite_data_files rewrites a data file whose deletion vectors delete at least that share of
    its rows, whatever min-input-files says); none when the option is not a number in (0, 1].
    Twin: policy/operations.py `delete_ratio_threshold`. -#}
{% macro _iceberg_maint_delete_ratio_threshold(section) %}
  {%- set value = section.options.get('delete-ratio-threshold') if section.options is mapping else none -%}
  {%- if value is none -%}{{ return(0.3) }}{%- endif -%}
  {%- if (value is number and value is not boolean)
        or (value is string and modules.re.fullmatch('[0-9]*\\.?[0-9]+', value)) -%}
    {%- set number = value | float -%}
    {{ return(number if number > 0 and number <= 1 else none) }}
  {%- endif -%}
  {{ return(none) }}
{% endmacro %}

{#- Due when a partition has >= min_input_files small files; with health.cold_scope (the policy
    sets cold_partitions_hours) only the partitions the compaction's `where` may select count.
    Also due when deletion vectors delete >= the delete-ratio-threshold of a partition's rows
    (health.max_partition_delete_ratio): Iceberg rewrites a file at or above it whatever
    min-input-files says, and such a partition holds one (its share is a weighted mean of its
    files' shares). Under a cold scope only the cold partitions' ratio counts (scope.max_delete_ratio):
    the compaction touches nothing else. -#}
{#- The reason a compaction is not due when the current snapshot's summary counts fewer data files
    than min_input_files (no partition can hold that many small files) and no delete file (deletion
    vectors make a file due whatever min_input_files says), decided before any file list or cold
    scope is read; none when a count is unknown or not fewer. -#}
{% macro _iceberg_maint_too_few_data_files(section, data_files, delete_files=0) %}
  {%- if data_files is none or data_files >= section.min_input_files or delete_files != 0 -%}
    {{ return(none) }}
  {%- endif -%}
  {{ return('the table has ' ~ data_files ~ ' data files, fewer than min_input_files ' ~ section.min_input_files
      ~ ': nothing to compact') }}
{% endmacro %}

{#- Why a cold-scoped compaction has nothing to do (scope: _iceberg_maint_cold_scope's result);
    an unpartitioned table has no partitions to speak of. -#}
{% macro _iceberg_maint_nothing_cold(section, scope) %}
  {%- if scope is mapping and scope.partitioned is sameas false -%}
    {{ return('the table is unpartitioned and was written less than ' ~ section.cold_partitions_hours
        ~ ' h ago (cold_partitions_hours), nothing cold to compact') }}
  {%- endif -%}
  {{ return('no partition has been quiet for ' ~ section.cold_partitions_hours
      ~ ' h (cold_partitions_hours), nothing cold to compact') }}
{% endmacro %}

{% macro _iceberg_maint_rewrite_data_files_due(section, health) %}
  {%- set threshold = section.min_input_files -%}
  {%- set scope = health.get('cold_scope') -%}
  {%- if scope is mapping and scope.where is none -%}
    {{ return({'due': false, 'reason': dbt_iceberg_maint._iceberg_maint_nothing_cold(section, scope)}) }}
  {%- endif -%}
  {%- set largest = (scope.max_small_files if scope is mapping else health.max_small_files_in_partition) | int -%}
  {%- set partition = 'cold partition' if scope is mapping else 'partition' -%}
  {%- if largest >= threshold -%}
    {{ return({'due': true, 'reason': 'a ' ~ partition ~ ' has ' ~ largest ~ ' small files, >= min_input_files '
          ~ threshold}) }}
  {%- endif -%}
  {%- set reason = 'no ' ~ partition ~ ' has >= ' ~ threshold ~ ' small files (largest: ' ~ largest ~ ')' -%}
  {%- set ratio = scope.get('max_delete_ratio') if scope is mapping else health.get('max_partition_delete_ratio') -%}
  {%- set limit = dbt_iceberg_maint._iceberg_maint_delete_ratio_threshold(section) -%}
  {%- if ratio is none or not ratio > 0 or limit is none -%}
    {{ return({'due': false, 'reason': reason}) }}
  {%- endif -%}
  {%- if ratio >= limit -%}
    {{ return({'due': true, 'reason': 'deletion vectors delete ' ~ (ratio | round(3)) ~ ' of a ' ~ partition
        ~ "'s rows, >= delete-ratio-threshold " ~ limit}) }}
  {%- endif -%}
  {{ return({'due': false, 'reason': reason ~ '; deletion vectors delete at most ' ~ (ratio | round(3)) ~ ' of a '
      ~ partition ~ "'s rows, below delete-ratio-threshold " ~ limit}) }}
{% endmacro %}

{#- {'sql': CALL text or none, 'reason': why there is nothing to run}. With cold_partitions_hours
    the compaction is scoped to the cold partitions (context.cold_scope; an explicit `where` is
    ANDed with it); no cold partition means nothing to compact. -#}
{% macro _iceberg_maint_rewrite_data_files_planned_sql(relation, section, context={}) %}
  {%- set where = section.where -%}
  {%- if section.cold_partitions_hours -%}
    {%- set scope = context.get('cold_scope') -%}
    {%- set scope = scope if scope is not none
          else dbt_iceberg_maint._iceberg_maint_cold_scope(relation, section.cold_partitions_hours) -%}
    {%- set cold = scope.where -%}
    {%- if cold is none or not (cold | string).strip() -%}
      {{ return({'sql': none, 'reason': dbt_iceberg_maint._iceberg_maint_nothing_cold(section, scope)}) }}
    {%- endif -%}
    {%- set where = dbt_iceberg_maint._iceberg_maint_cold_scoped_where(where, cold) -%}
  {%- endif -%}
  {%- set options = dbt_iceberg_maint._iceberg_maint_compaction_options(section,
        dbt_iceberg_maint._iceberg_maint_uses_partial_progress(section, context.get('table_bytes')),
        force=context.get('force', false)) -%}
  {{ return({'sql': dbt_iceberg_maint.get_rewrite_data_files_sql(relation=relation, where=where,
      strategy=section.strategy, sort_order=section.sort_order, options=options), 'reason': none}) }}
{% endmacro %}


{#- The user's `where` (guarded first: one balanced boolean expression) ANDed with the cold
    predicate, each in its own parentheses: the cold scope is a top-level conjunct of the filter
    whatever the user wrote. -#}
{% macro _iceberg_maint_cold_scoped_where(where, cold) %}
  {%- if not where -%}{{ return(cold) }}{%- endif -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(
        dbt_iceberg_maint._iceberg_maint_check_where('rewrite_data_files', 'where', where)) -%}
  {{ return('(' ~ where.strip() ~ ') and (' ~ cold ~ ')') }}
{% endmacro %}


{#- Whether the compaction commits group by group (partial progress): `partial_progress` true or
    false as given; `auto` (the default) on a table of at least `partial_progress_above_mb` (null:
    any size) or of unknown size. table_bytes: the current snapshot's total-files-size, an upper
    bound of what one compaction reads. A shorter rewrite runs Iceberg's parallel file groups and
    commits once, which the effect bench measured faster (benchmarks/effect.py,
    docs/benchmarks-effect.md); a long one keeps each finished group when a later one loses its
    commit. Either way a lost commit fails the step. Python twin: policy/operations.py. -#}
{% macro _iceberg_maint_uses_partial_progress(section, table_bytes) %}
  {%- if section.partial_progress != 'auto' -%}{{ return(section.partial_progress is true) }}{%- endif -%}
  {%- set above = section.partial_progress_above_mb -%}
  {{ return(table_bytes is none or above is none or table_bytes >= above * 1024 * 1024) }}
{% endmacro %}


{#- rewrite_data_files options implied by the compaction policy; explicit `options` win.
    `partial_progress` (_iceberg_maint_uses_partial_progress): max-failed-commits 0 by default, so a
    commit that loses to a concurrent writer fails the operation instead of being silently ignored.
    Iceberg 1.10's partial-progress group commits fail against each other: from concurrent rewrite
    threads on a Hadoop catalog ("Version N already exists"), and on a JDBC catalog whenever a commit
    carries several groups (more groups than `partial-progress.max-commits`, default 10: "Cannot
    commit: stale table metadata" on every retry, found by the torture run). Under partial progress
    Iceberg commits a full batch (ceil(groups / max-commits) groups) on the rewrite thread that
    completed it (its commit service's own thread commits only what is left at the end), so
    parallel group rewrites mean concurrent commits to one table. So under partial progress one
    group is rewritten at a time and each group commits alone (max-commits far above any
    compaction's group count). Without it Iceberg rewrites up to 5 groups at once and the calling
    thread commits them all once.
    `force`: min-input-files 1, so a forced compaction rewrites what it finds (Iceberg's own
    threshold would otherwise skip a partition with fewer files than min_input_files). -#}
{% macro _iceberg_maint_compaction_options(section, partial_progress, force=false) %}
  {%- set options = {'min-input-files': '1' if force else section.min_input_files | string} -%}
  {%- if partial_progress -%}
    {%- do options.update({'partial-progress.enabled': 'true'}) -%}
    {%- if section.max_failed_commits is not none -%}
      {%- do options.update({'partial-progress.max-failed-commits': section.max_failed_commits | string}) -%}
    {%- endif -%}
    {%- do options.update({'max-concurrent-file-group-rewrites': '1', 'partial-progress.max-commits': '10000'}) -%}
  {%- endif -%}
  {%- if section.target_file_size_mb -%}
    {%- do options.update({'target-file-size-bytes': (section.target_file_size_mb * 1024 * 1024) | int | string}) -%}
  {%- endif -%}
  {%- do options.update(section.options or {}) -%}
  {{ return(options) }}
{% endmacro %}
