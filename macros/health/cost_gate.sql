{#- Cost gate (policy section `cost_gate`): why a due operation is skipped on a table nobody
    wrote to, or none. Same rules and texts as dbt_iceberg_maint/policy/gate.py (the planner):
    the last maintenance is the newest `replace` snapshot (rewrite_data_files,
    rewrite_position_delete_files, rewrite_manifests commit one); none means never maintained,
    no gate. min_interval_hours holds every operation; skip_unchanged, min_new_records and
    min_new_bytes look at the snapshots since, and exempt expire_snapshots (due by age alone), the
    statistics (a maintenance commit alone leaves them stale) and cold-scoped compaction when a write turned cold since the last maintenance.
    gate: the resolved cost_gate section {enabled, skip_unchanged, min_new_records,
    min_new_bytes, min_interval_hours}. One query on the `snapshots` metadata table. -#}
{% macro iceberg_maint_cost_gate_reason(relation, operation, gate, cold_partitions_hours=none, as_of=none) %}
  {{ return(adapter.dispatch('iceberg_maint_cost_gate_reason', 'dbt_iceberg_maint')(relation=relation,
      operation=operation, gate=gate, cold_partitions_hours=cold_partitions_hours, as_of=as_of)) }}
{% endmacro %}

{% macro default__iceberg_maint_cost_gate_reason(relation, operation, gate, cold_partitions_hours, as_of) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.iceberg_maint_cost_gate_reason is not implemented for "
      ~ "adapter '" ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{#- as_of: the reference time (a UTC datetime; default now). -#}
{% macro spark__iceberg_maint_cost_gate_reason(relation, operation, gate, cold_partitions_hours, as_of) %}
  {%- if not execute or not dbt_iceberg_maint._iceberg_maint_cost_gate_set(gate or {}) -%}{{ return(none) }}{%- endif -%}
  {%- set snapshots = dbt_iceberg_maint._iceberg_maint_gate_snapshots(relation, as_of) -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_cost_gate_decision(operation, gate, snapshots.rows, snapshots.now_ms,
      cold_partitions_hours)) }}
{% endmacro %}


{#- Whether the gate can skip anything: enabled and one of its keys set (otherwise no query). -#}
{% macro _iceberg_maint_cost_gate_set(gate) %}
  {{ return(gate.get('enabled', true) and (gate.get('min_interval_hours') is not none or gate.get('skip_unchanged')
      or gate.get('min_new_records') is not none or gate.get('min_new_bytes') is not none)) }}
{% endmacro %}


{#- {'rows': [{snapshot_id, ts, operation, added_records, added_bytes}], 'now_ms': Spark's now
    (or as_of) in ms}: one query on the `snapshots` metadata table. -#}
{% macro _iceberg_maint_gate_snapshots(relation, as_of=none) %}
  {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(relation) -%}
  {%- set now_sql = 'current_timestamp()' if as_of is none
        else dbt_iceberg_maint._iceberg_maint_timestamp_literal(as_of) -%}
  {%- set rows = [] -%}
  {%- set now = namespace(ms=none) -%}
  {%- for row in run_query("select snapshot_id, unix_millis(committed_at) as ts, operation,
        coalesce(cast(summary['added-records'] as bigint), 0) as added_records,
        coalesce(cast(summary['added-files-size'] as bigint), 0) as added_bytes,
        unix_millis(" ~ now_sql ~ ") as now_ms
      from " ~ table ~ ".snapshots order by committed_at, snapshot_id").rows -%}
    {%- do rows.append({'snapshot_id': row['snapshot_id'] | int, 'ts': row['ts'] | int, 'operation': row['operation'],
          'added_records': row['added_records'] | int, 'added_bytes': row['added_bytes'] | int}) -%}
    {%- set now.ms = row['now_ms'] | int -%}
  {%- endfor -%}
  {{ return({'rows': rows, 'now_ms': now.ms}) }}
{% endmacro %}


{#- The gate's decision (pure; its Python twin is policy/gate.py `gate_reason`, and the shared
    case table runs both): why `operation` is skipped, or none. rows: the table's snapshots
    {snapshot_id, ts, operation, added_records, added_bytes}; now_ms: the reference time. -#}
{% macro _iceberg_maint_cost_gate_decision(operation, gate, rows, now_ms, cold_partitions_hours=none) %}
  {%- if not dbt_iceberg_maint._iceberg_maint_cost_gate_set(gate or {}) -%}{{ return(none) }}{%- endif -%}
  {%- set interval = gate.get('min_interval_hours') -%}
  {%- set unchanged = gate.get('skip_unchanged', false) -%}
  {%- set min_records = gate.get('min_new_records') -%}
  {%- set min_bytes = gate.get('min_new_bytes') -%}
  {%- set ordered = rows | sort(attribute='snapshot_id') | sort(attribute='ts') -%}
  {%- set last = namespace(ts=none) -%}
  {%- for row in ordered if row['operation'] == 'replace' -%}{%- set last.ts = row['ts'] -%}{%- endfor -%}
  {%- if last.ts is none -%}{{ return(none) }}{%- endif -%}
  {%- set hours_ago = ((now_ms - last.ts) / 3600000.0) | round(1) -%}
  {%- if interval is not none and hours_ago < interval -%}
    {{ return('cost gate: last maintained ' ~ hours_ago ~ ' h ago, less than min_interval_hours ' ~ interval) }}
  {%- endif -%}
  {%- if operation in ['expire_snapshots', 'compute_table_stats', 'compute_partition_stats'] -%}{{ return(none) }}{%- endif -%}
  {%- set since = namespace(writes=0, records=0, bytes=0, turned_cold=false) -%}
  {%- for row in ordered if row['operation'] != 'replace' -%}
    {%- if row['ts'] > last.ts -%}
      {%- set since.writes = since.writes + 1 -%}
      {%- set since.records = since.records + row['added_records'] -%}
      {%- set since.bytes = since.bytes + row['added_bytes'] -%}
    {%- endif -%}
    {%- if cold_partitions_hours -%}
      {%- set quiet_ms = (cold_partitions_hours * 3600000) | int -%}
      {%- if last.ts - quiet_ms < row['ts'] and row['ts'] <= now_ms - quiet_ms -%}
        {%- set since.turned_cold = true -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if operation == 'rewrite_data_files' and since.turned_cold -%}{{ return(none) }}{%- endif -%}
  {%- if unchanged and since.writes == 0 -%}
    {{ return('cost gate: no new snapshot since the last maintenance ' ~ hours_ago ~ ' h ago (skip_unchanged)') }}
  {%- endif -%}
  {%- if min_records is not none and since.records < min_records -%}
    {{ return('cost gate: ' ~ since.records ~ ' records added since the last maintenance, below min_new_records '
        ~ min_records) }}
  {%- endif -%}
  {%- if min_bytes is not none and since.bytes < min_bytes -%}
    {{ return('cost gate: ' ~ since.bytes ~ ' bytes added since the last maintenance, below min_new_bytes '
        ~ min_bytes) }}
  {%- endif -%}
  {{ return(none) }}
{% endmacro %}
