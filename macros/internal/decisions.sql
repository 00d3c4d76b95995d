{#- Pure maintenance decisions: which operations, in which order, which are due given the
    table's health (dbt_iceberg_maint.table_health), and the compaction options a policy
    implies. No queries here, so the harness checks them without Spark. -#}

{#- Canonical order (Iceberg's advice): compact data, then position deletes, then expire
    snapshots, then remove orphans, then rewrite manifests. -#}
{% macro _iceberg_maint_operation_order() %}
  {{ return(dbt_iceberg_maint._iceberg_maint_protocol().operations) }}
{% endmacro %}

{% macro _iceberg_maint_default_operations() %}
  {{ return(dbt_iceberg_maint._iceberg_maint_protocol().default_operations) }}
{% endmacro %}

{#- Policy section of each operation (DESIGN.md's YAML calls compaction `compaction`). -#}
{% macro _iceberg_maint_policy_section(operation) %}
  {{ return('compaction' if operation == 'rewrite_data_files' else operation) }}
{% endmacro %}


{#- The requested operations in canonical order; `operations` is none (the defaults), a name or
    a list; `compaction` is accepted for rewrite_data_files. Raises on an unknown name. -#}
{% macro _iceberg_maint_requested_operations(operations=none) %}
  {%- set order = dbt_iceberg_maint._iceberg_maint_operation_order() -%}
  {%- if operations is none -%}{{ return(dbt_iceberg_maint._iceberg_maint_default_operations()) }}{%- endif -%}
  {%- set requested = [operations] if operations is string else operations -%}
  {%- if requested is not iterable or requested is mapping -%}
    {{ exceptions.raise_compiler_error("dbt_iceberg_maint: argument `operations` is " ~ operations ~ "; expected none, an operation name or a list of them: compaction, " ~ order | join(', ')) }}
  {%- endif -%}
  {%- set names = [] -%}
  {%- for name in requested -%}
    {%- set canonical = 'rewrite_data_files' if name == 'compaction' else name -%}
    {%- if canonical not in order -%}
      {{ exceptions.raise_compiler_error("dbt_iceberg_maint: argument `operations` contains '" ~ name ~ "'; allowed: compaction, " ~ order | join(', ')) }}
    {%- endif -%}
    {%- do names.append(canonical) -%}
  {%- endfor -%}
  {{ return(order | select('in', names) | list) }}
{% endmacro %}


{#- {'due': bool, 'reason': str} for one operation, from the resolved policy and health. -#}
{% macro _iceberg_maint_due(operation, policy, health) %}
  {%- if operation == 'rewrite_data_files' -%}
    {%- set threshold = policy.compaction.min_input_files -%}
    {#- health.cold_scope (maintain() with cold_partitions_hours): only the partitions the
        compaction's `where` may select count. -#}
    {%- set scope = health.get('cold_scope') -%}
    {%- if scope is mapping and scope.where is none -%}
      {{ return({'due': false, 'reason': 'no partition has been quiet for ' ~ policy.compaction.cold_partitions_hours ~ ' h (cold_partitions_hours), nothing cold to compact'}) }}
    {%- endif -%}
    {%- set largest = (scope.max_small_files if scope is mapping else health.max_small_files_in_partition) | int -%}
    {%- set partition = 'cold partition' if scope is mapping else 'partition' -%}
    {%- if largest >= threshold -%}
      {{ return({'due': true, 'reason': 'a ' ~ partition ~ ' has ' ~ largest ~ ' small files, >= min_input_files ' ~ threshold}) }}
    {%- endif -%}
    {{ return({'due': false, 'reason': 'no ' ~ partition ~ ' has >= ' ~ threshold ~ ' small files (largest: ' ~ largest ~ ')'}) }}
  {%- elif operation == 'rewrite_position_delete_files' -%}
    {%- set threshold = policy.rewrite_position_delete_files.min_input_files -%}
    {%- set count = health.delete_files | int -%}
    {%- if count >= threshold -%}
      {{ return({'due': true, 'reason': count ~ ' delete files, >= threshold of ' ~ threshold}) }}
    {%- endif -%}
    {{ return({'due': false, 'reason': 'only ' ~ count ~ ' delete files, below threshold of ' ~ threshold}) }}
  {%- elif operation == 'expire_snapshots' -%}
    {{ return(dbt_iceberg_maint._iceberg_maint_expire_due(policy.expire_snapshots, health)) }}
  {%- elif operation == 'remove_orphan_files' -%}
    {#- Orphans cannot be counted without listing the table location, which is the operation
        itself; it deletes only files older than the window, so it is always due. -#}
    {{ return({'due': true, 'reason': 'always due: deletes only unreferenced files older than ' ~ policy.remove_orphan_files.older_than_hours ~ ' h'}) }}
  {%- elif operation == 'rewrite_manifests' -%}
    {%- set threshold = policy.rewrite_manifests.min_manifests -%}
    {%- set count = health.data_manifests | int -%}
    {%- if count >= threshold -%}
      {{ return({'due': true, 'reason': count ~ ' data manifests, >= threshold of ' ~ threshold}) }}
    {%- endif -%}
    {{ return({'due': false, 'reason': 'only ' ~ count ~ ' data manifests, below threshold of ' ~ threshold}) }}
  {%- endif -%}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint: unknown operation '" ~ operation ~ "'") }}
{% endmacro %}


{#- expire_snapshots is due when more than retain_last snapshots exist and the oldest is past the
    cut-off: older_than_hours before the plan's reference time, or the absolute `older_than`
    (health.hours_since_older_than, computed by the plan). older_than_hours 0 has no age limit,
    and a rewrite planned before it in the same plan (health.rewrites_planned) makes it due even
    at retain_last snapshots: the rewrite's own commits add snapshots it then expires. -#}
{% macro _iceberg_maint_expire_due(section, health) %}
  {%- set keep = section.retain_last -%}
  {%- set count = health.snapshots | int -%}
  {%- set age = health.oldest_snapshot_age_hours -%}
  {%- if section.older_than is not none -%}
    {%- set hours = health.get('hours_since_older_than', 0) -%}
    {%- set limit = 'older_than ' ~ section.older_than -%}
  {%- else -%}
    {%- set hours = section.older_than_hours -%}
    {%- set limit = hours ~ ' h' -%}
  {%- endif -%}
  {%- set no_age_limit = section.older_than is none and hours == 0 -%}
  {%- if count <= keep and no_age_limit and health.get('rewrites_planned') -%}
    {{ return({'due': true, 'reason': count ~ ' snapshots plus those ' ~ health.rewrites_planned | join(' and ')
        ~ ' commits first (older_than_hours 0: only the newest retain_last ' ~ keep ~ ' stay)'}) }}
  {%- elif count <= keep -%}
    {{ return({'due': false, 'reason': 'only ' ~ count ~ ' snapshots, not more than retain_last ' ~ keep}) }}
  {%- elif no_age_limit -%}
    {{ return({'due': true, 'reason': count ~ ' snapshots (> retain_last ' ~ keep ~ '), older_than_hours 0: no age limit'}) }}
  {%- elif age is none or age <= hours -%}
    {{ return({'due': false, 'reason': 'oldest snapshot is ' ~ (age if age is not none else 0) ~ ' h old, not older than ' ~ limit}) }}
  {%- endif -%}
  {{ return({'due': true, 'reason': count ~ ' snapshots (> retain_last ' ~ keep ~ '), oldest ' ~ age ~ ' h old (> ' ~ limit ~ ')'}) }}
{% endmacro %}


{#- rewrite_data_files options implied by the compaction policy; explicit `options` win.
    Partial progress is on with max-failed-commits 0 by default so a commit that loses to a
    concurrent writer fails the operation instead of being silently ignored.
    `serial_group_commits`: Iceberg commits partial-progress groups from its rewrite threads, so
    on a catalog without an atomic metadata swap (Hadoop) its own commits race ("Version N
    already exists") and fail; there one file group is rewritten at a time. -#}
{% macro _iceberg_maint_compaction_options(section, serial_group_commits=false) %}
  {%- set options = {'min-input-files': section.min_input_files | string} -%}
  {%- if section.partial_progress -%}
    {%- do options.update({'partial-progress.enabled': 'true'}) -%}
    {%- if section.max_failed_commits is not none -%}
      {%- do options.update({'partial-progress.max-failed-commits': section.max_failed_commits | string}) -%}
    {%- endif -%}
    {%- if serial_group_commits -%}
      {%- do options.update({'max-concurrent-file-group-rewrites': '1'}) -%}
    {%- endif -%}
  {%- endif -%}
  {%- if section.target_file_size_mb -%}
    {%- do options.update({'target-file-size-bytes': (section.target_file_size_mb * 1024 * 1024) | int | string}) -%}
  {%- endif -%}
  {%- do options.update(section.options or {}) -%}
  {{ return(options) }}
{% endmacro %}


{#- Shape problems of a raw `meta.iceberg_maint` mapping: an unknown section or key, or a
    section that is neither a mapping nor true/false. A typo must not silently fall back to the
    defaults. Keys owned by other parts of the package (idempotent, table properties) pass. -#}
{% macro _iceberg_maint_policy_shape_errors(raw_policy, source='meta.iceberg_maint') %}
  {%- if raw_policy is none or raw_policy is boolean -%}{{ return([]) }}{%- endif -%}
  {%- if raw_policy is not mapping -%}
    {{ return([source ~ " is " ~ raw_policy ~ "; expected a mapping, or true/false to switch maintenance on/off"]) }}
  {%- endif -%}
  {%- set defaults = dbt_iceberg_maint._iceberg_maint_policy_defaults() -%}
  {%- set allowed = defaults.keys() | list + ['idempotent', 'isolation_level', 'commit_retry', 'properties'] -%}
  {%- set errors = [] -%}
  {%- for key, value in raw_policy.items() -%}
    {%- if key not in allowed -%}
      {%- do errors.append(source ~ " has unknown key `" ~ key ~ "`; allowed keys: " ~ allowed | join(', ')) -%}
    {%- elif key == 'enabled' -%}
      {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_boolean(source, 'enabled', value)) -%}
    {%- elif defaults[key] is mapping and value is not none -%}
      {%- if value is not mapping and value is not boolean -%}
        {%- do errors.append(source ~ "." ~ key ~ " is " ~ value ~ "; expected a mapping of settings or true/false") -%}
      {%- elif value is mapping -%}
        {%- for name in value.keys() if name not in defaults[key] -%}
          {%- do errors.append(source ~ "." ~ key ~ " has unknown key `" ~ name ~ "`; allowed keys: " ~ defaults[key].keys() | join(', ')) -%}
        {%- endfor -%}
        {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_boolean(source ~ '.' ~ key, 'enabled', value.get('enabled'))) -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(errors) }}
{% endmacro %}


{#- Policy problems (numbers, strategy) as messages, checked before anything runs. -#}
{% macro _iceberg_maint_policy_errors(policy) %}
  {%- set errors = [] -%}
  {%- set number = dbt_iceberg_maint._iceberg_maint_check_positive_number -%}
  {%- do errors.extend(number('policy compaction', 'min_input_files', policy.compaction.min_input_files, integer=true)) -%}
  {%- do errors.extend(number('policy compaction', 'target_file_size_mb', policy.compaction.target_file_size_mb)) -%}
  {%- do errors.extend(number('policy compaction', 'cold_partitions_hours', policy.compaction.cold_partitions_hours)) -%}
  {%- if policy.compaction.max_failed_commits is not none and (policy.compaction.max_failed_commits is boolean or policy.compaction.max_failed_commits is not integer or policy.compaction.max_failed_commits < 0) -%}
    {%- do errors.append("policy compaction: argument `max_failed_commits` is " ~ policy.compaction.max_failed_commits ~ "; expected a whole number >= 0") -%}
  {%- endif -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_boolean('policy compaction', 'partial_progress', policy.compaction.partial_progress)) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_rewrite_data_files_errors(policy.compaction.where, policy.compaction.strategy, policy.compaction.sort_order, policy.compaction.options)) -%}
  {%- do errors.extend(number('policy rewrite_position_delete_files', 'min_input_files', policy.rewrite_position_delete_files.min_input_files, integer=true)) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_rewrite_position_delete_files_errors(policy.rewrite_position_delete_files.where, policy.rewrite_position_delete_files.options)) -%}
  {%- set expire = policy.expire_snapshots -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_expire_snapshots_errors(
        older_than_hours=expire.older_than_hours if expire.older_than is none else none, retain_last=expire.retain_last,
        max_concurrent_deletes=expire.max_concurrent_deletes, stream_results=expire.stream_results,
        clean_expired_metadata=expire.clean_expired_metadata, older_than=expire.older_than)) -%}
  {%- set orphans = policy.remove_orphan_files -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_remove_orphan_files_errors(orphans.older_than_hours,
        location=orphans.location, max_concurrent_deletes=orphans.max_concurrent_deletes,
        equal_schemes=orphans.equal_schemes, equal_authorities=orphans.equal_authorities,
        prefix_mismatch_mode=orphans.prefix_mismatch_mode, prefix_listing=orphans.prefix_listing)) -%}
  {%- do errors.extend(number('policy rewrite_manifests', 'min_manifests', policy.rewrite_manifests.min_manifests, integer=true)) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_rewrite_manifests_errors(use_caching=policy.rewrite_manifests.use_caching)) -%}
  {{ return(errors) }}
{% endmacro %}
