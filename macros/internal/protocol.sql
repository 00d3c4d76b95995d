{#- The Jinja side of the protocol with the Python layer (dbt_iceberg_maint/protocol.py holds the
    same names; tests/unit/test_protocol.py renders this macro and fails when they drift). -#}

{% macro _iceberg_maint_protocol() %}
  {{ return({
      'markers': {'result': 'ICEBERG_MAINT_RESULT', 'plan': 'ICEBERG_MAINT_PLAN', 'start': 'ICEBERG_MAINT_START',
                  'selection': 'ICEBERG_MAINT_SELECTION', 'snapshots': 'ICEBERG_MAINT_SNAPSHOTS',
                  'leases': 'ICEBERG_MAINT_LEASES', 'history': 'ICEBERG_MAINT_HISTORY',
                  'checked': 'ICEBERG_MAINT_CHECKED', 'kept': 'ICEBERG_MAINT_KEPT',
                  'history_rows': 'ICEBERG_MAINT_HISTORY_ROWS'},
      'statuses': ['success', 'skipped', 'failed', 'dry_run'],
      'step_statuses': ['planned', 'skipped', 'failed'],
      'step_keys': ['table', 'operation', 'status', 'reason', 'sql'],
      'backlog_reason_prefix': 'backlog:',
      'operations': ['rewrite_data_files', 'rewrite_position_delete_files', 'expire_snapshots',
                     'remove_orphan_files', 'rewrite_manifests', 'compute_table_stats', 'compute_partition_stats'],
      'default_operations': ['rewrite_data_files', 'expire_snapshots', 'remove_orphan_files', 'rewrite_manifests'],
      'operation_aliases': {'compaction': 'rewrite_data_files'},
      'policy_other_keys': ['idempotent', 'isolation_level', 'commit_retry', 'properties', 'lint_ignore'],
      'health_fields': ['table', 'data_files', 'small_files', 'data_bytes', 'delete_files', 'records', 'snapshots',
                        'oldest_snapshot_age_hours', 'manifests', 'data_manifests', 'partitions',
                        'max_small_files_in_partition', 'deletion_vectors', 'max_partition_delete_ratio',
                        'target_file_size_bytes', 'small_file_threshold_bytes'],
  }) }}
{% endmacro %}


{#- The one way a machine-readable line is logged: `<MARKER> <json>`. `marker` is a key of the
    protocol's markers (result, plan, start, selection, snapshots, leases, history, checked,
    kept, history_rows);
    info=false logs at debug level (in dbt.log and the structured events, not on the console). -#}
{% macro _iceberg_maint_log_marker(marker, payload, info=true) %}
  {%- set markers = dbt_iceberg_maint._iceberg_maint_protocol().markers -%}
  {%- if marker not in markers -%}
    {{ exceptions.raise_compiler_error("dbt_iceberg_maint: marker '" ~ marker ~ "' is not one of "
          ~ markers | join(', ')) }}
  {%- endif -%}
  {%- do log(markers[marker] ~ ' ' ~ tojson(payload), info=info) -%}
{% endmacro %}
