{#- Execute (or, in a dry run, only render) one procedure CALL, log its result line, and return
    the procedure's output columns plus `sql`, `status` and `duration_ms`.
    dbt's Jinja has no try/except: a statement Spark rejects raises and stops the calling
    macro (dbt reports the error and the invocation fails). Everything predictable is
    therefore checked before the CALL runs (argument validation here, table state in
    maintain()). The CALL runs under the table's lease (macros/internal/lease.sql): when another
    job holds it, the operation is skipped with the reason `lease held by ...`. Executed and
    skipped calls write their history row (macros/internal/history.sql; a dry run writes none)
    with the table's summary figures before and after the CALL. -#}
{% macro _iceberg_maint_run_procedure(relation, operation, sql, dry_run=false, row_per_file=false,
      executed_status='success', reason=none) %}
  {%- set record = dbt_iceberg_maint._iceberg_maint_execute_logged(relation, operation, sql, dry_run, row_per_file,
        executed_status, reason) -%}
  {%- set result = record.metrics.copy() -%}
  {%- do result.update({'sql': sql, 'status': record.status, 'duration_ms': record.duration_ms}) -%}
  {{ return(result) }}
{% endmacro %}


{#- Same, returning the logged record (table, operation, status, reason, sql, metrics,
    duration_ms): what maintain() collects. -#}
{% macro _iceberg_maint_execute_logged(relation, operation, sql, dry_run=false, row_per_file=false,
      executed_status='success', reason=none) %}
  {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(relation) -%}
  {%- if dry_run -%}
    {{ return(dbt_iceberg_maint._iceberg_maint_log_result(table, operation, 'dry_run', reason
          or 'dry run: rendered, not executed', sql, {}, 0)) }}
  {%- endif -%}
  {%- if not execute -%}
    {{ return({'table': table, 'operation': operation, 'status': 'not_executed',
          'reason': 'dbt is parsing, not executing', 'sql': sql, 'metrics': {}, 'duration_ms': 0}) }}
  {%- endif -%}
  {%- set refused = dbt_iceberg_maint._iceberg_maint_nessie_refusal(relation, operation)
        if executed_status != 'dry_run' else none -%}
  {%- if refused -%}{{ exceptions.raise_compiler_error(refused) }}{%- endif -%}
  {#- The table's lease, as for maintain(): another job's holds it → skipped, not run. A table
      that does not exist takes none (nothing is written for a mistyped name): the CALL fails
      with Iceberg's own error, as before. -#}
  {#- remove_orphan_files' native dry run executes, but as a dry run it writes no history. -#}
  {%- set history = dbt_iceberg_maint._iceberg_maint_history_open(operation) -%}
  {%- do history.update({'enabled': history.enabled and executed_status != 'dry_run'}) -%}
  {%- set exists = dbt_iceberg_maint._iceberg_maint_table_exists(relation) -%}
  {%- set begun = dbt_iceberg_maint._iceberg_maint_now() -%}
  {%- set lease = dbt_iceberg_maint._iceberg_maint_lease_acquire(table, operation)
        if exists else {'held': true, 'enabled': false} -%}
  {%- set node = dbt_iceberg_maint._iceberg_maint_history_node(table) if history.enabled else none -%}
  {%- set before = dbt_iceberg_maint._iceberg_maint_history_health(history, table) if exists and lease.held
        else none -%}
  {%- if not lease.held -%}
    {%- set record = dbt_iceberg_maint._iceberg_maint_log_result(table, operation, 'skipped', lease.reason, sql,
          {}, 0) -%}
    {%- do dbt_iceberg_maint._iceberg_maint_history_add(history, dbt_iceberg_maint._iceberg_maint_history_row(history,
          record, begun, dbt_iceberg_maint._iceberg_maint_now(), none, none, lease.get('blocked_by'), node)) -%}
    {%- do dbt_iceberg_maint._iceberg_maint_history_flush(history) -%}
    {{ return(record) }}
  {%- endif -%}
  {%- set started = dbt_iceberg_maint._iceberg_maint_now() -%}
  {%- set output = run_query(sql) -%}
  {%- set duration_ms = dbt_iceberg_maint._iceberg_maint_elapsed_ms(started) -%}
  {%- set after = dbt_iceberg_maint._iceberg_maint_history_health(history, table) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_lease_release(lease) -%}
  {%- set metrics = dbt_iceberg_maint._iceberg_maint_output_metrics(output, row_per_file) -%}
  {%- set record = dbt_iceberg_maint._iceberg_maint_log_result(table, operation, executed_status, reason, sql, metrics,
        duration_ms) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_history_add(history, dbt_iceberg_maint._iceberg_maint_history_row(history,
        record, begun, dbt_iceberg_maint._iceberg_maint_now(), before, after,
        lease.holder if lease.enabled else none, node)) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_history_flush(history) -%}
  {{ return(record) }}
{% endmacro %}


{#- Output columns as a dict: the single row of most procedures, or for remove_orphan_files
    (one row per orphan) the list of locations and their count. -#}
{% macro _iceberg_maint_output_metrics(output, row_per_file=false) %}
  {%- set metrics = {} -%}
  {%- if output is none -%}{{ return(metrics) }}{%- endif -%}
  {%- if row_per_file -%}
    {%- set locations = [] -%}
    {%- for row in output.rows -%}{%- do locations.append(row[0] | string) -%}{%- endfor -%}
    {%- do metrics.update({'orphan_file_count': locations | length, output.column_names[0]: locations}) -%}
  {%- elif output.rows | length > 0 -%}
    {%- for name in output.column_names -%}
      {%- do metrics.update({name: dbt_iceberg_maint._iceberg_maint_json_safe(output.rows[0][name])}) -%}
    {%- endfor -%}
  {%- endif -%}
  {{ return(metrics) }}
{% endmacro %}
