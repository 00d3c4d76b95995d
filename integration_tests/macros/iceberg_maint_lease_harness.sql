{#- Test harness of the lease macros (tests/unit/test_lease_macros.py renders it without Spark;
    tests/integration/test_leases.py runs the contender against a real catalog). -#}

{#- Each case logs `ICEBERG_MAINT_CASE {"id": ..., "value": ...}`: the pure lease state of some
    log rows, a reason, the SQL the lease macros send, or what they find wrong with a handed-over
    lease. -#}
{% macro iceberg_maint_lease_cases(cases) %}
  {%- for case in cases -%}
    {%- set kwargs = case.get('kwargs') or {} -%}
    {%- set value = none -%}
    {%- if case.kind == 'state' -%}
      {%- set value = dbt_iceberg_maint._iceberg_maint_lease_state(kwargs.rows) -%}
    {%- elif case.kind == 'reason' -%}
      {%- set value = dbt_iceberg_maint._iceberg_maint_lease_reason(kwargs.holder, kwargs.get('detail')) -%}
    {%- elif case.kind == 'sql' -%}
      {%- set settings = dbt_iceberg_maint._iceberg_maint_lease_settings() -%}
      {%- set target = dbt_iceberg_maint._iceberg_maint_lease_target(kwargs.table, settings) -%}
      {%- set value = {'target': target, 'settings': settings,
            'create': dbt_iceberg_maint._iceberg_maint_lease_create_sql(target.log),
            'append': dbt_iceberg_maint._iceberg_maint_lease_append_sql(target.log, {'table_name': target.key,
                'event': 'claim', 'claim_id': "c'1", 'holder': 'run-1', 'path': 'maintain', 'at_ms': 1000,
                'expires_ms': 2000}),
            'rows': dbt_iceberg_maint._iceberg_maint_lease_rows_sql(target.log, target.key),
            'all_rows': dbt_iceberg_maint._iceberg_maint_lease_rows_sql(target.log)} -%}
    {%- elif case.kind == 'settled' -%}
      {%- set value = {'rows': dbt_iceberg_maint._iceberg_maint_settled_lease_rows(kwargs.rows_by_key,
                kwargs.written_before_ms, kwargs.expired_before_ms),
            'delete': dbt_iceberg_maint._iceberg_maint_settled_lease_delete_sql('analytics.iceberg_maint_leases',
                {'events': [1, 2], "o'rders": [3]}, kwargs.written_before_ms)} -%}
    {%- elif case.kind == 'handover' -%}
      {%- set value = dbt_iceberg_maint._iceberg_maint_lease_handover_errors(kwargs.leases, 'leases') -%}
    {%- elif case.kind == 'namespaces' -%}
      {%- set value = dbt_iceberg_maint._iceberg_maint_lease_namespaces(kwargs.get('schemas')) -%}
    {%- endif -%}
    {%- do log('ICEBERG_MAINT_CASE ' ~ tojson({'id': case.id, 'value': value}), info=true) -%}
  {%- endfor -%}
{% endmacro %}


{#- A contender of the race test: take the lease of `table` (as every maintenance path does) at
    the instant `start_ms` (sleeping in the Spark driver until then, so that contenders in several
    processes append their claims together), log the outcome, then hold it for `hold_ms` (the
    test kills the holder meanwhile) and release it (unless release is false). -#}
{% macro iceberg_maint_lease_contend(table, start_ms, hold_ms=0, release=true) %}
  {#- dbt-spark's session cursor evaluates a query twice (execute, then fetch): short sleeps
      until the instant, re-measured each time. -#}
  {%- do run_query('select 1') -%}
  {%- set gate = namespace(waiting=true) -%}
  {%- for i in range(1000) if gate.waiting -%}
    {%- set wait_ms = start_ms - dbt_iceberg_maint._iceberg_maint_lease_now_ms() -%}
    {%- if wait_ms <= 0 -%}
      {%- set gate.waiting = false -%}
    {%- else -%}
      {%- do run_query("select reflect('java.lang.Thread', 'sleep', cast(" ~ [[wait_ms // 2, 200] | min, 1] | max
            ~ " as bigint))") -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set claimed_ms = dbt_iceberg_maint._iceberg_maint_lease_now_ms() -%}
  {%- set lease = dbt_iceberg_maint._iceberg_maint_lease_acquire(table, 'contender') -%}
  {%- do log('ICEBERG_MAINT_CASE ' ~ tojson({'id': 'contend', 'held': lease.held, 'reason': lease.reason,
        'claim_id': lease.claim_id, 'holder': lease.holder, 'claimed_ms': claimed_ms,
        'decided_ms': dbt_iceberg_maint._iceberg_maint_lease_now_ms()}), info=true) -%}
  {%- if lease.held and hold_ms > 0 -%}
    {%- do run_query("select reflect('java.lang.Thread', 'sleep', cast(" ~ (hold_ms // 2) ~ " as bigint))") -%}
  {%- endif -%}
  {%- if release -%}{%- do dbt_iceberg_maint._iceberg_maint_lease_release(lease) -%}{%- endif -%}
{% endmacro %}


{#- Renewals for real: take the lease of `table`, renew it (as if a quarter of its TTL had
    passed), break it as an admin would, renew again: logs {held, reason} after each renewal. -#}
{% macro iceberg_maint_lease_renew_case(table) %}
  {%- set lease = dbt_iceberg_maint._iceberg_maint_lease_acquire(table, 'renew_case') -%}
  {%- set renewed = dbt_iceberg_maint._iceberg_maint_lease_renew(dict(lease, renewed_ms=0)) -%}
  {%- do dbt_iceberg_maint.break_lease(table) -%}
  {%- set broken = dbt_iceberg_maint._iceberg_maint_lease_renew(dict(renewed, renewed_ms=0)) -%}
  {%- do log('ICEBERG_MAINT_CASE ' ~ tojson({'id': 'renew', 'acquired': lease.held, 'renewed': renewed.held,
        'extended': renewed.expires_ms > lease.expires_ms, 'after_break': broken.held,
        'reason': broken.reason}), info=true) -%}
{% endmacro %}


{#- One maintenance run as a nightly job makes it (tests/integration/test_leases.py): each of
    `tables` maintained (force: every operation of `operations` runs, under its lease, with its
    history row), then the package's own tables. -#}
{% macro iceberg_maint_nightly_run(tables, operations) %}
  {%- for table in tables -%}
    {%- do dbt_iceberg_maint.maintain(relation=table, operations=operations, force=true) -%}
  {%- endfor -%}
  {%- do dbt_iceberg_maint.maintain_own_tables() -%}
{% endmacro %}
