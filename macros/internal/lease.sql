{#- Per-table leases: one maintenance job per table at a time, on every path (maintain(),
    iceberg_maintenance, execute_maintenance_steps, the procedure macros), from SQL alone.

    dbt's Jinja cannot catch an error, so taking a lease may only use statements that never fail
    when they lose a race. Iceberg offers no compare-and-swap to SQL (property updates and plain
    appends are not validated), but it does order commits: every commit gets the next sequence
    number of the table it was applied to (TableMetadata.nextSequenceNumber, recomputed when a
    commit is retried after losing the catalog's swap), and a plain append is retried until it
    lands. So a lease is an append-only log, the Iceberg table `iceberg_maint_leases` in the
    maintained table's own namespace (whoever maintains a table meets the others there), one row
    per event: claim, renew, release, break. Each row records its writer's clock (at_ms) and the
    expiry it asks for; its commit's sequence number comes from the `entries` metadata table.

    The state of a table's lease is a pure function of its rows in commit order
    (_iceberg_maint_lease_state): a claim is accepted when nobody holds the lease, the holder's
    expiry is not after the claim's at_ms, or the holder is the same run (re-entry); a renew
    extends its claim while that claim holds and has not expired; a release or a break ends it.
    A contender appends its claim, then reads the log: a read after its own commit sees every
    earlier commit, so every contender decides from a prefix of the same sequence, and at most
    one of them finds itself the holder. Docs: docs/leases.md. -#}


{#- Lease settings from the vars: enabled (dbt_iceberg_maint_leases_enabled, default true), the
    holder's run id (_iceberg_maint_run_id: dbt-iceberg-maint maintain sets it so its replays
    re-enter their own leases), ttl_ms (dbt_iceberg_maint_lease_minutes, default 120) and the log
    table's name. -#}
{% macro _iceberg_maint_lease_settings() %}
  {%- set minutes = var('dbt_iceberg_maint_lease_minutes', 120) -%}
  {%- set name = var('dbt_iceberg_maint_lease_table', 'iceberg_maint_leases') -%}
  {%- set enabled = var('dbt_iceberg_maint_leases_enabled', true) -%}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_check_positive_number('leases', 'var dbt_iceberg_maint_lease_minutes',
        minutes) + dbt_iceberg_maint._iceberg_maint_check_boolean('leases', 'var dbt_iceberg_maint_leases_enabled',
        enabled) -%}
  {%- if not dbt_iceberg_maint._iceberg_maint_is_identifier(name) -%}
    {%- do errors.append("leases: var `dbt_iceberg_maint_lease_table` is " ~ tojson(name)
          ~ "; expected a table name made of letters, digits and underscores") -%}
  {%- endif -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(errors) -%}
  {{ return({'enabled': enabled, 'run_id': dbt_iceberg_maint._iceberg_maint_run_id(),
      'ttl_ms': (minutes * 60000) | int, 'table': name}) }}
{% endmacro %}


{#- The lease log of `table` ('[catalog.]schema.table'): its namespace's log table, and the key
    its rows carry (the table's own name, lower case: Spark's identifiers are case-insensitive). -#}
{% macro _iceberg_maint_lease_target(table, settings) %}
  {%- set parts = (table | string).split('.') -%}
  {{ return({'log': (parts[:-1] + [settings.table]) | join('.'), 'key': parts[-1] | lower}) }}
{% endmacro %}


{% macro _iceberg_maint_lease_create_sql(log) %}
  {#- Appends must always land: many quick commit retries (Iceberg's default is 4). No
      distribution: a claim is one row. Old metadata files go (one commit per event). -#}
  {{ return('create table if not exists ' ~ log ~ ' (table_name string, event string, claim_id string, '
      ~ 'holder string, path string, at_ms bigint, expires_ms bigint) using iceberg partitioned by (table_name) '
      ~ "tblproperties ('format-version' = '2', 'commit.retry.num-retries' = '100', "
      ~ "'commit.retry.min-wait-ms' = '20', 'commit.retry.max-wait-ms' = '2000', 'write.distribution-mode' = 'none', "
      ~ "'write.metadata.delete-after-commit.enabled' = 'true', 'write.metadata.previous-versions-max' = '20')") }}
{% endmacro %}


{#- One event row as a plain INSERT (an append: never validated, retried until it commits). -#}
{% macro _iceberg_maint_lease_append_sql(log, row) %}
  {{ return('insert into ' ~ log ~ ' values ' ~ dbt_iceberg_maint._iceberg_maint_lease_values_sql(row)) }}
{% endmacro %}


{% macro _iceberg_maint_lease_values_sql(row) %}
  {%- set literal = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {{ return('(' ~ [literal(row.table_name), literal(row.event), literal(row.claim_id), literal(row.holder),
      literal(row.path or ''), row.at_ms | int, row.expires_ms | int] | join(', ') ~ ')') }}
{% endmacro %}


{#- The log's rows (of one key, of a list of keys, or all) with the sequence number of the commit
    that added each: the rows' files joined to the `entries` metadata table. -#}
{% macro _iceberg_maint_lease_rows_sql(log, key=none) %}
  {%- set literal = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {%- if key is none -%}
    {%- set where = '' -%}
  {%- elif key is string -%}
    {%- set where = ' and l.table_name = ' ~ literal(key) ~ ' and e.data_file.partition.table_name = ' ~ literal(key) -%}
  {%- else -%}
    {%- set quoted = [] -%}
    {%- for one in key -%}{%- do quoted.append(literal(one)) -%}{%- endfor -%}
    {%- set keys = quoted | join(', ') -%}
    {%- set where = ' and l.table_name in (' ~ keys ~ ') and e.data_file.partition.table_name in (' ~ keys ~ ')' -%}
  {%- endif -%}
  {{ return('select l.table_name, l.event, l.claim_id, l.holder, l.path, l.at_ms, l.expires_ms, '
      ~ 'e.sequence_number as seq from ' ~ log ~ ' l join ' ~ log ~ '.entries e on l._file = e.data_file.file_path '
      ~ 'where e.status < 2' ~ where) }}
{% endmacro %}


{#- Pure: the lease of one table from its log rows ({event, claim_id, holder, path, at_ms,
    expires_ms, seq}), replayed in commit order (seq; then at_ms and claim_id, only for rows a
    compaction of the log merged into one commit, which must not happen). Returns {holder: none |
    {claim_id, holder, path, since_ms, expires_ms}, verdicts: {claim_id: {accepted, blocker}}}.
    Deterministic: whoever reads the same prefix of the log gets the same answer. -#}
{% macro _iceberg_maint_lease_state(rows) %}
  {%- set state = namespace(holder=none) -%}
  {%- set verdicts = {} -%}
  {%- for row in rows | sort(attribute='seq,at_ms,claim_id') -%}
    {%- set held = state.holder -%}
    {%- set mine = held is not none and held.claim_id == row.claim_id -%}
    {%- if row.event == 'claim' -%}
      {%- set live = held is not none and held.expires_ms > row.at_ms -%}
      {%- if not live or held.holder == row.holder -%}
        {#- Re-entry by the same run keeps the time it first took the lease. -#}
        {%- set state.holder = {'claim_id': row.claim_id, 'holder': row.holder, 'path': row.path,
              'since_ms': held.since_ms if live else row.at_ms, 'expires_ms': row.expires_ms} -%}
        {%- do verdicts.update({row.claim_id: {'accepted': true, 'blocker': none}}) -%}
      {%- else -%}
        {%- do verdicts.update({row.claim_id: {'accepted': false, 'blocker': held}}) -%}
      {%- endif -%}
    {%- elif row.event == 'renew' and mine and held.expires_ms > row.at_ms -%}
      {%- set state.holder = dict(held, expires_ms=row.expires_ms) -%}
    {%- elif row.event in ['release', 'break'] and mine -%}
      {%- set state.holder = none -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return({'holder': state.holder, 'verdicts': verdicts}) }}
{% endmacro %}


{% macro _iceberg_maint_lease_time_text(ms) %}
  {{ return(modules.datetime.datetime.fromtimestamp((ms | int) / 1000, modules.pytz.utc).strftime(
      '%Y-%m-%dT%H:%M:%SZ')) }}
{% endmacro %}


{#- Pure: why a claim did not get the lease: `lease held by <run id> since <UTC> (<path>, expires
    <UTC>)`; `lease lost: ...` when nobody holds it any more (broken, or expired during a step). -#}
{% macro _iceberg_maint_lease_reason(holder, detail=none) %}
  {%- set text = dbt_iceberg_maint._iceberg_maint_lease_time_text -%}
  {%- if holder is none -%}
    {{ return('lease lost: ' ~ (detail or 'the lease was broken or expired')) }}
  {%- endif -%}
  {{ return('lease held by ' ~ holder.holder ~ ' since ' ~ text(holder.since_ms) ~ ' (' ~ (holder.path or 'unknown path')
      ~ ', expires ' ~ text(holder.expires_ms) ~ ')') }}
{% endmacro %}


{% macro _iceberg_maint_lease_now_ms() %}
  {{ return((dbt_iceberg_maint._iceberg_maint_now().timestamp() * 1000) | int) }}
{% endmacro %}


{#- {key: rows} of a lease log (one key, or all); rows as _iceberg_maint_lease_state takes them. -#}
{% macro _iceberg_maint_lease_rows(log, key=none) %}
  {%- set by_key = {} -%}
  {%- for row in run_query(dbt_iceberg_maint._iceberg_maint_lease_rows_sql(log, key)) -%}
    {%- do by_key.setdefault(row['table_name'], []).append({'event': row['event'], 'claim_id': row['claim_id'],
          'holder': row['holder'], 'path': row['path'], 'at_ms': row['at_ms'] | int,
          'expires_ms': row['expires_ms'] | int, 'seq': row['seq'] | int}) -%}
  {%- endfor -%}
  {{ return(by_key) }}
{% endmacro %}


{% macro _iceberg_maint_lease_read(lease) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_lease_rows(lease.log, lease.key).get(lease.key, [])) }}
{% endmacro %}


{#- A statement without a result set (DDL, INSERT, REFRESH): run_query would fetch one, which
    fails over the Thrift server (dbt Cloud's path). -#}
{% macro _iceberg_maint_lease_statement(sql) %}
  {%- call statement('iceberg_maint_lease', fetch_result=False) -%}{{ sql }}{%- endcall -%}
{% endmacro %}


{% macro _iceberg_maint_lease_append(lease, event, at_ms, expires_ms) %}
  {%- do dbt_iceberg_maint._iceberg_maint_lease_statement(dbt_iceberg_maint._iceberg_maint_lease_append_sql(lease.log,
        {'table_name': lease.key, 'event': event, 'claim_id': lease.claim_id, 'holder': lease.holder,
         'path': lease.path, 'at_ms': at_ms, 'expires_ms': expires_ms})) -%}
{% endmacro %}


{#- Append `event` for the lease's claim, then read the log back and decide: returns the lease
    with `held` and, when not held, `reason`. A read that does not show our own row (a stale
    cached table; Iceberg refreshes after its own commit, so this is defensive) is retried once
    after REFRESH TABLE, then counted as lost. -#}
{% macro _iceberg_maint_lease_commit(lease, event, now_ms) %}
  {%- set expires_ms = now_ms + lease.ttl_ms -%}
  {%- do dbt_iceberg_maint._iceberg_maint_lease_append(lease, event, now_ms, expires_ms) -%}
  {%- set rows = dbt_iceberg_maint._iceberg_maint_lease_read(lease) -%}
  {%- set own = rows | selectattr('claim_id', 'equalto', lease.claim_id) | selectattr('event', 'equalto', event)
        | selectattr('at_ms', 'equalto', now_ms) | list -%}
  {%- if not own -%}
    {%- do dbt_iceberg_maint._iceberg_maint_lease_statement('refresh table ' ~ lease.log) -%}
    {%- set rows = dbt_iceberg_maint._iceberg_maint_lease_read(lease) -%}
    {%- set own = rows | selectattr('claim_id', 'equalto', lease.claim_id) | selectattr('event', 'equalto', event)
          | selectattr('at_ms', 'equalto', now_ms) | list -%}
  {%- endif -%}
  {%- set state = dbt_iceberg_maint._iceberg_maint_lease_state(rows) -%}
  {%- set holder = state.holder -%}
  {%- set held = own | length > 0 and holder is not none and holder.claim_id == lease.claim_id
        and holder.expires_ms == expires_ms -%}
  {%- set result = dict(lease, held=held, renewed_ms=now_ms, expires_ms=expires_ms, reason=none) -%}
  {%- if not held -%}
    {%- set verdict = state.verdicts.get(lease.claim_id) or {} -%}
    {%- set blocker = holder if holder is not none and holder.claim_id != lease.claim_id else verdict.get('blocker') -%}
    {%- do result.update({'blocked_by': blocker.holder if blocker is not none else none,
          'reason': dbt_iceberg_maint._iceberg_maint_lease_reason(blocker,
          'our own ' ~ event ~ ' is not visible in ' ~ lease.log if not own else none)}) -%}
    {%- if not own -%}
      {#- It may become visible later: make sure it never holds. -#}
      {%- do dbt_iceberg_maint._iceberg_maint_lease_append(lease, 'release', now_ms, now_ms) -%}
    {%- endif -%}
  {%- endif -%}
  {{ return(result) }}
{% endmacro %}


{#- Take the lease of `table` for `path` (maintain, iceberg_maintenance, execute_maintenance_steps
    or a procedure's name). Returns {held, reason, ...}: the caller runs its steps only when held,
    else skips them with `reason` (`blocked_by`: the holder's run id, when known). With leases
    disabled it is held without a statement. `checks` ({lease_logs: [...]}, kept by the caller
    for its invocation): the log is created only when not listed, and listed once it exists. -#}
{% macro _iceberg_maint_lease_acquire(table, path, checks=none) %}
  {%- set settings = dbt_iceberg_maint._iceberg_maint_lease_settings() -%}
  {%- if not settings.enabled -%}
    {{ return({'held': true, 'enabled': false, 'reason': none}) }}
  {%- endif -%}
  {%- set target = dbt_iceberg_maint._iceberg_maint_lease_target(table, settings) -%}
  {%- if checks is none or target.log not in checks.lease_logs -%}
    {%- do dbt_iceberg_maint._iceberg_maint_lease_statement(
          dbt_iceberg_maint._iceberg_maint_lease_create_sql(target.log)) -%}
    {%- if checks is not none -%}{%- do checks.lease_logs.append(target.log) -%}{%- endif -%}
  {%- endif -%}
  {%- set now_ms = dbt_iceberg_maint._iceberg_maint_lease_now_ms() -%}
  {#- Unique per claim: one invocation claims one table at most once per microsecond. -#}
  {%- set claim_id = invocation_id ~ '/' ~ target.key ~ '/' ~ (dbt_iceberg_maint._iceberg_maint_now().timestamp()
        * 1000000) | int -%}
  {%- set lease = {'enabled': true, 'table': table | string, 'log': target.log, 'key': target.key,
        'claim_id': claim_id, 'holder': settings.run_id, 'path': path, 'ttl_ms': settings.ttl_ms} -%}
  {%- set lease = dbt_iceberg_maint._iceberg_maint_lease_commit(lease, 'claim', now_ms) -%}
  {%- if lease.held -%}
    {#- Spark's Iceberg catalog caches tables (cache-enabled, 30 s): the previous holder may have
        expired the snapshot this session's cached copy still reads (NotFoundException for its
        manifest list). Start from the table as the catalog has it now. -#}
    {%- do dbt_iceberg_maint._iceberg_maint_lease_statement('refresh table ' ~ table) -%}
  {%- endif -%}
  {{ return(lease) }}
{% endmacro %}


{#- Take the leases of several tables at once (claim_leases: the fleet engine, ahead of their
    steps): per lease log one INSERT of claim rows, one row a table (each its own claim, decided by
    the same replay; one commit gives its rows one sequence number, and no two of them share a
    key), then one read of those tables' rows. Returns the leases held, as
    _iceberg_maint_lease_acquire returns them (the table is refreshed by whoever takes one up:
    _iceberg_maint_lease_resume). A table another job holds is left out; a claim whose row the read
    does not show is released at once, as in _iceberg_maint_lease_commit. `checks` as there. -#}
{% macro _iceberg_maint_lease_claim_many(tables, path, checks=none) %}
  {%- set settings = dbt_iceberg_maint._iceberg_maint_lease_settings() -%}
  {%- if not settings.enabled or not tables -%}{{ return([]) }}{%- endif -%}
  {%- set by_log = {} -%}
  {%- for table in tables -%}
    {%- set target = dbt_iceberg_maint._iceberg_maint_lease_target(table, settings) -%}
    {%- do by_log.setdefault(target.log, []).append({'table': table | string, 'key': target.key}) -%}
  {%- endfor -%}
  {%- set held = [] -%}
  {%- for log, items in by_log.items() -%}
    {%- if checks is none or log not in checks.lease_logs -%}
      {%- do dbt_iceberg_maint._iceberg_maint_lease_statement(dbt_iceberg_maint._iceberg_maint_lease_create_sql(log)) -%}
      {%- if checks is not none -%}{%- do checks.lease_logs.append(log) -%}{%- endif -%}
    {%- endif -%}
    {%- set now_ms = dbt_iceberg_maint._iceberg_maint_lease_now_ms() -%}
    {%- set micros = (dbt_iceberg_maint._iceberg_maint_now().timestamp() * 1000000) | int -%}
    {%- set leases = [] -%}
    {%- set values = [] -%}
    {%- for item in items -%}
      {%- set lease = {'enabled': true, 'table': item.table, 'log': log, 'key': item.key,
            'claim_id': invocation_id ~ '/' ~ item.key ~ '/' ~ micros, 'holder': settings.run_id, 'path': path,
            'ttl_ms': settings.ttl_ms, 'held': false, 'renewed_ms': now_ms, 'expires_ms': now_ms + settings.ttl_ms,
            'reason': none} -%}
      {%- do leases.append(lease) -%}
      {%- do values.append(dbt_iceberg_maint._iceberg_maint_lease_values_sql({'table_name': item.key,
            'event': 'claim', 'claim_id': lease.claim_id, 'holder': lease.holder, 'path': path, 'at_ms': now_ms,
            'expires_ms': lease.expires_ms})) -%}
    {%- endfor -%}
    {%- do dbt_iceberg_maint._iceberg_maint_lease_statement('insert into ' ~ log ~ ' values ' ~ values | join(', ')) -%}
    {%- set by_key = dbt_iceberg_maint._iceberg_maint_lease_rows(log, leases | map(attribute='key') | list) -%}
    {%- for lease in leases -%}
      {%- set rows = by_key.get(lease.key, []) -%}
      {%- set own = rows | selectattr('claim_id', 'equalto', lease.claim_id) | list -%}
      {%- set holder = dbt_iceberg_maint._iceberg_maint_lease_state(rows).holder -%}
      {%- if own and holder is not none and holder.claim_id == lease.claim_id and holder.expires_ms == lease.expires_ms -%}
        {%- do held.append(dict(lease, held=true)) -%}
      {%- elif not own -%}
        {#- It may become visible later: make sure it never holds. -#}
        {%- do dbt_iceberg_maint._iceberg_maint_lease_append(lease, 'release', now_ms, now_ms) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {{ return(held) }}
{% endmacro %}


{#- End several leases at once: per lease log one INSERT of release rows (claim_leases' `release`:
    the run's own leases, kept after their tables' last steps). -#}
{% macro _iceberg_maint_lease_release_many(leases) %}
  {%- set by_log = {} -%}
  {%- for lease in leases if lease.enabled and lease.held -%}
    {%- do by_log.setdefault(lease.log, []).append(lease) -%}
  {%- endfor -%}
  {%- set now_ms = dbt_iceberg_maint._iceberg_maint_lease_now_ms() -%}
  {%- for log, own in by_log.items() -%}
    {%- set values = [] -%}
    {%- for lease in own -%}
      {%- do values.append(dbt_iceberg_maint._iceberg_maint_lease_values_sql({'table_name': lease.key,
            'event': 'release', 'claim_id': lease.claim_id, 'holder': lease.holder, 'path': lease.path,
            'at_ms': now_ms, 'expires_ms': now_ms})) -%}
    {%- endfor -%}
    {%- do dbt_iceberg_maint._iceberg_maint_lease_statement('insert into ' ~ log ~ ' values ' ~ values | join(', ')) -%}
  {%- endfor -%}
{% endmacro %}


{#- Before another step: extend the lease when a quarter of its time has passed since it was
    taken or last extended (a step must finish within the TTL; the renewal proves the lease is
    still ours: a broken or expired lease is not extended). -#}
{% macro _iceberg_maint_lease_renew(lease) %}
  {%- if not lease.enabled or not lease.held -%}{{ return(lease) }}{%- endif -%}
  {%- set now_ms = dbt_iceberg_maint._iceberg_maint_lease_now_ms() -%}
  {%- if now_ms - lease.renewed_ms < lease.ttl_ms / 4 -%}{{ return(lease) }}{%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_lease_commit(lease, 'renew', now_ms)) }}
{% endmacro %}


{#- A lease an earlier invocation of this run kept for the table's next step (execute_maintenance_steps'
    `leases`, the fleet engine's hand-over): still ours until it expires, so it is renewed as between
    two steps of one invocation (a statement only once a quarter of its TTL has passed) and the
    table refreshed (another worker's session may cache it from before the run's previous step);
    taken afresh once it has expired. -#}
{% macro _iceberg_maint_lease_resume(lease, path, checks=none) %}
  {%- if lease.expires_ms <= dbt_iceberg_maint._iceberg_maint_lease_now_ms() -%}
    {{ return(dbt_iceberg_maint._iceberg_maint_lease_acquire(lease.table, path, checks)) }}
  {%- endif -%}
  {%- set lease = dbt_iceberg_maint._iceberg_maint_lease_renew(lease) -%}
  {%- if lease.held -%}
    {%- do dbt_iceberg_maint._iceberg_maint_lease_statement('refresh table ' ~ lease.table) -%}
  {%- endif -%}
  {{ return(lease) }}
{% endmacro %}


{#- What a kept lease hands over (the ICEBERG_MAINT_KEPT line, execute_maintenance_steps' `leases`). -#}
{% macro _iceberg_maint_lease_handover(lease) %}
  {{ return({'table': lease.table, 'log': lease.log, 'key': lease.key, 'claim_id': lease.claim_id,
      'holder': lease.holder, 'path': lease.path, 'ttl_ms': lease.ttl_ms, 'renewed_ms': lease.renewed_ms,
      'expires_ms': lease.expires_ms}) }}
{% endmacro %}


{#- Problems of handed-over leases (execute_maintenance_steps' `leases`): none, or a list of
    mappings as _iceberg_maint_lease_handover makes them, at most one a table, each this run's
    own (the run id) and in the log and key its table's lease has under the current settings. -#}
{% macro _iceberg_maint_lease_handover_errors(leases, owner) %}
  {%- if leases is none -%}{{ return([]) }}{%- endif -%}
  {%- set keys = ['claim_id', 'expires_ms', 'holder', 'key', 'log', 'path', 'renewed_ms', 'table', 'ttl_ms'] -%}
  {%- set expected = '; expected none or a list of the leases an ICEBERG_MAINT_KEPT line of this run handed over, '
        ~ 'each a mapping with keys ' ~ keys | join(', ') -%}
  {%- if leases is string or leases is mapping or leases is not iterable -%}
    {{ return([owner ~ ' is ' ~ tojson(leases) ~ expected]) }}
  {%- endif -%}
  {%- set settings = dbt_iceberg_maint._iceberg_maint_lease_settings() -%}
  {%- set errors = [] -%}
  {%- set seen = [] -%}
  {%- for lease in leases -%}
    {%- if lease is not mapping or (lease.keys() | sort | list) != keys -%}
      {%- do errors.append(owner ~ ' contains ' ~ tojson(lease) ~ expected) -%}
    {%- elif not dbt_iceberg_maint._iceberg_maint_lease_handover_shaped(lease) -%}
      {%- do errors.append(owner ~ ' contains ' ~ tojson(lease) ~ '; expected text for claim_id, holder, key, log, '
            ~ 'path and table and whole numbers of milliseconds for expires_ms, renewed_ms and ttl_ms') -%}
    {%- elif lease.holder != settings.run_id -%}
      {%- do errors.append(owner ~ ' contains a lease of ' ~ lease.table ~ ' held by ' ~ tojson(lease.holder)
            ~ '; only this run (' ~ settings.run_id ~ ') can be handed its own leases') -%}
    {%- elif dbt_iceberg_maint._iceberg_maint_lease_target(lease.table, settings)
          != {'log': lease.log, 'key': lease.key} -%}
      {%- do errors.append(owner ~ ' contains a lease of ' ~ lease.table ~ ' in ' ~ lease.log ~ ' under key '
            ~ lease.key ~ '; its lease is in ' ~ dbt_iceberg_maint._iceberg_maint_lease_target(lease.table,
            settings).log) -%}
    {%- elif lease.table in seen -%}
      {%- do errors.append(owner ~ ' contains two leases of ' ~ lease.table ~ '; expected at most one a table') -%}
    {%- endif -%}
    {%- do seen.append(lease.get('table') if lease is mapping else none) -%}
  {%- endfor -%}
  {{ return(errors) }}
{% endmacro %}


{% macro _iceberg_maint_lease_handover_shaped(lease) %}
  {%- for name in ['claim_id', 'holder', 'key', 'log', 'path', 'table'] -%}
    {%- if lease[name] is not string or not lease[name] -%}{{ return(false) }}{%- endif -%}
  {%- endfor -%}
  {%- for name in ['expires_ms', 'renewed_ms', 'ttl_ms'] -%}
    {%- set value = lease[name] -%}
    {%- if value is not number or value is boolean or value != value | int -%}{{ return(false) }}{%- endif -%}
  {%- endfor -%}
  {{ return(true) }}
{% endmacro %}


{#- After the table's last step: one appended row; nobody waits for it to be read. -#}
{% macro _iceberg_maint_lease_release(lease) %}
  {%- if lease.enabled and lease.held -%}
    {%- set now_ms = dbt_iceberg_maint._iceberg_maint_lease_now_ms() -%}
    {%- do dbt_iceberg_maint._iceberg_maint_lease_append(lease, 'release', now_ms, now_ms) -%}
  {%- endif -%}
{% endmacro %}
