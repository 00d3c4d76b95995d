{#- The lease admin: `dbt run-operation dbt_iceberg_maint.list_leases` logs the current leases
    (one ICEBERG_MAINT_LEASES line: [{table, holder, acquired_at, expires_at, path, claim_id}]) of
    the lease logs in `schemas` (default: the schemas of the project's Iceberg models);
    `break_lease` ends the current lease of one table. `dbt-iceberg-maint leases` runs both. -#}

{% macro list_leases(schemas=none) %}
  {{ return(adapter.dispatch('list_leases', 'dbt_iceberg_maint')(schemas=schemas)) }}
{% endmacro %}

{% macro default__list_leases(schemas) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.list_leases is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__list_leases(schemas) %}
  {%- set namespaces = dbt_iceberg_maint._iceberg_maint_lease_namespaces(schemas) -%}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set settings = dbt_iceberg_maint._iceberg_maint_lease_settings() -%}
  {%- set now_ms = dbt_iceberg_maint._iceberg_maint_lease_now_ms() -%}
  {%- set leases = [] -%}
  {%- for namespace in namespaces -%}
    {%- set log_table = dbt_iceberg_maint._iceberg_maint_lease_target(namespace ~ '.x', settings).log -%}
    {%- for key, rows in dbt_iceberg_maint._iceberg_maint_lease_log_rows(log_table).items() | sort -%}
      {%- set holder = dbt_iceberg_maint._iceberg_maint_lease_state(rows).holder -%}
      {%- if holder is not none and holder.expires_ms > now_ms -%}
        {%- do leases.append(dbt_iceberg_maint._iceberg_maint_lease_record(namespace ~ '.' ~ key, holder)) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('leases', leases) -%}
  {{ return(leases) }}
{% endmacro %}


{#- End the current lease of `relation`'s table (a holder that still runs notices at its next
    renewal and skips its remaining steps). Logs ICEBERG_MAINT_LEASES with the broken lease, or
    an empty list when the table had none. -#}
{% macro break_lease(relation) %}
  {{ return(adapter.dispatch('break_lease', 'dbt_iceberg_maint')(relation=relation)) }}
{% endmacro %}

{% macro default__break_lease(relation) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.break_lease is not implemented for adapter '"
      ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__break_lease(relation) %}
  {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(relation) -%}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set settings = dbt_iceberg_maint._iceberg_maint_lease_settings() -%}
  {%- set target = dbt_iceberg_maint._iceberg_maint_lease_target(table, settings) -%}
  {%- set now_ms = dbt_iceberg_maint._iceberg_maint_lease_now_ms() -%}
  {%- set holder = dbt_iceberg_maint._iceberg_maint_lease_state(
        dbt_iceberg_maint._iceberg_maint_lease_log_rows(target.log).get(target.key, [])).holder -%}
  {%- set broken = [] -%}
  {%- if holder is not none and holder.expires_ms > now_ms -%}
    {#- The break names the claim it ends: a lease taken since by someone else stays. -#}
    {%- do dbt_iceberg_maint._iceberg_maint_lease_append({'log': target.log, 'key': target.key,
          'claim_id': holder.claim_id, 'holder': settings.run_id, 'path': 'break_lease'}, 'break', now_ms, now_ms) -%}
    {%- do broken.append(dbt_iceberg_maint._iceberg_maint_lease_record(table, holder)) -%}
  {%- endif -%}
  {%- do dbt_iceberg_maint._iceberg_maint_log_marker('leases', broken) -%}
  {{ return(broken) }}
{% endmacro %}


{#- The namespaces whose lease logs the admin reads: `schemas` (a name or a list, 'schema' or
    'catalog.schema'), else those of the project's Iceberg models (with the catalog var). -#}
{% macro _iceberg_maint_lease_namespaces(schemas=none) %}
  {%- set catalog = var('dbt_iceberg_maint_catalog', none) -%}
  {%- set names = [] -%}
  {%- if schemas is none -%}
    {%- for node in dbt_iceberg_maint._iceberg_maint_selected_models() -%}
      {%- set name = ((catalog ~ '.') if catalog else '') ~ node.schema -%}
      {%- if name not in names -%}{%- do names.append(name) -%}{%- endif -%}
    {%- endfor -%}
    {{ return(names) }}
  {%- endif -%}
  {%- for name in ([schemas] if schemas is string else schemas) -%}
    {%- set parts = (name | string).split('.') -%}
    {%- set check = namespace(valid=name is string and parts | length <= 2) -%}
    {%- for part in parts if not dbt_iceberg_maint._iceberg_maint_is_identifier(part) -%}
      {%- set check.valid = false -%}
    {%- endfor -%}
    {%- if not check.valid -%}
      {{ exceptions.raise_compiler_error("list_leases: argument `schemas` contains " ~ tojson(name)
            ~ "; expected 'schema' or 'catalog.schema' made of letters, digits and underscores") }}
    {%- endif -%}
    {%- set name = (catalog ~ '.' ~ name) if catalog and parts | length == 1 else name -%}
    {%- if name not in names -%}{%- do names.append(name) -%}{%- endif -%}
  {%- endfor -%}
  {{ return(names) }}
{% endmacro %}


{#- {key: rows} of a lease log, or {} when it does not exist. The admin has not committed to the
    log, so its cached copy may be stale: REFRESH TABLE first. -#}
{% macro _iceberg_maint_lease_log_rows(log_table) %}
  {%- set parts = log_table.split('.') -%}
  {%- if not dbt_iceberg_maint._iceberg_maint_show_table_exists(parts[0] if parts | length == 3 else none, parts[-2],
        parts[-1]) -%}
    {{ return({}) }}
  {%- endif -%}
  {%- do dbt_iceberg_maint._iceberg_maint_lease_statement('refresh table ' ~ log_table) -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_lease_rows(log_table)) }}
{% endmacro %}


{% macro _iceberg_maint_lease_record(table, holder) %}
  {%- set text = dbt_iceberg_maint._iceberg_maint_lease_time_text -%}
  {{ return({'table': table, 'holder': holder.holder, 'acquired_at': text(holder.since_ms),
      'expires_at': text(holder.expires_ms), 'path': holder.path, 'claim_id': holder.claim_id}) }}
{% endmacro %}
