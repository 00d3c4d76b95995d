{#- Iceberg `remove_orphan_files`: delete files under the table location that no snapshot
    references and that are older than `older_than_hours` (at least 24: a younger file may
    belong to a write still in flight). dry_run=true uses Iceberg's native dry run: it lists
    the orphans and deletes nothing. -#}

{% macro get_remove_orphan_files_sql(relation=none, older_than_hours=72, dry_run=false, location=none,
      max_concurrent_deletes=none, file_list_view=none, equal_schemes=none, equal_authorities=none,
          prefix_mismatch_mode=none, prefix_listing=none) %}
  {{ return(adapter.dispatch('get_remove_orphan_files_sql', 'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, older_than_hours=older_than_hours, dry_run=dry_run,
      location=location, max_concurrent_deletes=max_concurrent_deletes, file_list_view=file_list_view,
      equal_schemes=equal_schemes, equal_authorities=equal_authorities, prefix_mismatch_mode=prefix_mismatch_mode,
      prefix_listing=prefix_listing)) }}
{% endmacro %}

{% macro default__get_remove_orphan_files_sql(relation, older_than_hours, dry_run, location, max_concurrent_deletes,
      file_list_view, equal_schemes, equal_authorities, prefix_mismatch_mode, prefix_listing) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.get_remove_orphan_files_sql is not implemented for adapter '"
        ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__get_remove_orphan_files_sql(relation, older_than_hours, dry_run, location, max_concurrent_deletes,
      file_list_view, equal_schemes, equal_authorities, prefix_mismatch_mode, prefix_listing) %}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_remove_orphan_files_errors(
        older_than_hours, dry_run, location, max_concurrent_deletes, file_list_view, equal_schemes, equal_authorities,
            prefix_mismatch_mode, prefix_listing)) -%}
  {%- set lit = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {%- set arguments = [['table', lit(dbt_iceberg_maint._iceberg_maint_table_name(relation))]] -%}
  {#- older_than is always explicit, so Iceberg's own 24 h guard applies too. -#}
  {%- set older_than = dbt_iceberg_maint._iceberg_maint_timestamp_hours_ago(older_than_hours
        if older_than_hours is not none else 72) -%}
  {#- Every path to this CALL (the macro, the plan, this twin) passes the scope guard here. -#}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_orphan_scope_errors(
        relation, location, file_list_view, older_than)) -%}
  {%- do arguments.append(['older_than', older_than]) -%}
  {%- if location is not none -%}{%- do arguments.append(['location', lit(location)]) -%}{%- endif -%}
  {%- if dry_run -%}{%- do arguments.append(['dry_run', 'true']) -%}{%- endif -%}
  {%- if max_concurrent_deletes is not none -%}{%- do arguments.append(['max_concurrent_deletes',
        max_concurrent_deletes | string]) -%}{%- endif -%}
  {%- if file_list_view is not none -%}{%- do arguments.append(['file_list_view', lit(file_list_view)]) -%}{%- endif -%}
  {%- if equal_schemes -%}{%- do arguments.append(['equal_schemes',
        dbt_iceberg_maint._iceberg_maint_map_literal(equal_schemes)]) -%}{%- endif -%}
  {%- if equal_authorities -%}{%- do arguments.append(['equal_authorities',
        dbt_iceberg_maint._iceberg_maint_map_literal(equal_authorities)]) -%}{%- endif -%}
  {%- if prefix_mismatch_mode is not none -%}{%- do arguments.append(['prefix_mismatch_mode',
        lit(prefix_mismatch_mode | upper)]) -%}{%- endif -%}
  {%- if prefix_listing is not none -%}{%- do arguments.append(['prefix_listing',
        dbt_iceberg_maint._iceberg_maint_boolean_literal(prefix_listing)]) -%}{%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_call_sql(relation, 'remove_orphan_files', arguments)) }}
{% endmacro %}


{% macro _iceberg_maint_remove_orphan_files_errors(older_than_hours=72, dry_run=false, location=none,
      max_concurrent_deletes=none, file_list_view=none, equal_schemes=none, equal_authorities=none,
          prefix_mismatch_mode=none, prefix_listing=none) %}
  {%- set proc = 'remove_orphan_files' -%}
  {%- set errors = [] -%}
  {%- set number_errors = dbt_iceberg_maint._iceberg_maint_check_positive_number(proc, 'older_than_hours',
        older_than_hours) -%}
  {%- do errors.extend(number_errors) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_hours_bound(proc, 'older_than_hours', older_than_hours)) -%}
  {%- if not number_errors and older_than_hours is not none and older_than_hours < 24 -%}
    {%- do errors.append(proc ~ ": argument `older_than_hours` is " ~ older_than_hours
          ~ "; it must be at least 24: removing files younger than a day can delete the files of a write still"
          ~ " in progress and corrupt the table") -%}
  {%- endif -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_boolean(proc, 'dry_run', dry_run)) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_boolean(proc, 'prefix_listing', prefix_listing)) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_positive_number(proc, 'max_concurrent_deletes',
        max_concurrent_deletes, integer=true)) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_choice(proc, 'prefix_mismatch_mode',
        prefix_mismatch_mode, ['ERROR', 'IGNORE', 'DELETE'])) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_string_map(proc, 'equal_schemes', equal_schemes)) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_string_map(proc, 'equal_authorities',
        equal_authorities)) -%}
  {%- if location is not none and (location is not string or not location.strip()) -%}
    {%- do errors.append(proc ~ ": argument `location` is '" ~ location ~ "'; expected a non-empty path or URI") -%}
  {%- elif location is string and (location != location.strip() or location.splitlines() | length > 1) -%}
    {#- The location check compares normalised paths; Iceberg lists the text as given. -#}
    {%- do errors.append(proc ~ ": argument `location` is " ~ tojson(location)
          ~ "; expected a path or URI without surrounding whitespace or line breaks") -%}
  {%- endif -%}
  {%- if file_list_view is not none and (file_list_view is not string
        or not modules.re.fullmatch('[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*', file_list_view)) -%}
    {%- do errors.append(proc ~ ": argument `file_list_view` is '" ~ file_list_view
          ~ "'; expected a view name (letters, digits, underscores, dots) with columns file_path string"
          ~ " and last_modified timestamp") -%}
  {%- endif -%}
  {{ return(errors) }}
{% endmacro %}


{% macro remove_orphan_files(relation=none, older_than_hours=72, dry_run=false, location=none,
      max_concurrent_deletes=none, file_list_view=none, equal_schemes=none, equal_authorities=none,
          prefix_mismatch_mode=none, prefix_listing=none) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_outside_node(adapter.dispatch('remove_orphan_files', 'dbt_iceberg_maint')(
      relation=relation if relation is not none else this, older_than_hours=older_than_hours, dry_run=dry_run,
      location=location, max_concurrent_deletes=max_concurrent_deletes, file_list_view=file_list_view,
      equal_schemes=equal_schemes, equal_authorities=equal_authorities, prefix_mismatch_mode=prefix_mismatch_mode,
      prefix_listing=prefix_listing))) }}
{% endmacro %}

{% macro default__remove_orphan_files(relation, older_than_hours, dry_run, location, max_concurrent_deletes,
      file_list_view, equal_schemes, equal_authorities, prefix_mismatch_mode, prefix_listing) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.remove_orphan_files is not implemented for adapter '"
        ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__remove_orphan_files(relation, older_than_hours, dry_run, location, max_concurrent_deletes,
      file_list_view, equal_schemes, equal_authorities, prefix_mismatch_mode, prefix_listing) %}
  {%- set sql = dbt_iceberg_maint.get_remove_orphan_files_sql(relation, older_than_hours, dry_run, location,
        max_concurrent_deletes, file_list_view, equal_schemes, equal_authorities, prefix_mismatch_mode,
            prefix_listing) -%}
  {#- The native dry run executes (it only lists); its result line has status dry_run. -#}
  {{ return(dbt_iceberg_maint._iceberg_maint_run_procedure(relation, 'remove_orphan_files', sql, false, true,
        'dry_run' if dry_run else 'success', 'dry run: orphans listed, nothing deleted' if dry_run else none)) }}
{% endmacro %}


{#- The orphan scope guard, run by every path that renders a remove_orphan_files CALL
    (get_remove_orphan_files_sql, hence remove_orphan_files and the plan; a replayed step through
    _iceberg_maint_orphan_step_errors). Iceberg deletes every unreferenced file under `location`
    older than `older_than`, so a location outside the table (a shared parent folder, another
    table) would delete files this table's snapshots know nothing about: it must be the table's
    location or a folder inside it (the torture suite's fuzz found it accepted,
    tests/integration/test_torture_regressions.py). A `file_list_view` replaces Iceberg's listing
    with the caller's, and Iceberg only keeps entries whose path starts with the location as a
    bare string (a neighbour table `<name>2` matches): every entry must lie inside the table (or
    `location`) and be older than `older_than` (a TIMESTAMP literal), or the view is refused. -#}
{% macro _iceberg_maint_orphan_scope_errors(relation, location, file_list_view, older_than, owner='remove_orphan_files') %}
  {%- if not execute or (location is not string and file_list_view is not string) -%}{{ return([]) }}{%- endif -%}
  {%- set table = dbt_iceberg_maint._iceberg_maint_qualified_name(relation) -%}
  {%- set table_location = dbt_iceberg_maint._iceberg_maint_table_location(table) -%}
  {%- set given = location if location is string else file_list_view -%}
  {%- set argument = 'location' if location is string else 'file_list_view' -%}
  {%- if table_location is none -%}
    {{ return([owner ~ ": argument `" ~ argument ~ "` is '" ~ given ~ "' but the location of " ~ table
        ~ " could not be read, so it cannot be checked to lie inside the table"]) }}
  {%- endif -%}
  {%- set root = dbt_iceberg_maint._iceberg_maint_normalised_location(table_location) -%}
  {%- if location is string -%}
    {%- set wanted = dbt_iceberg_maint._iceberg_maint_normalised_location(location) -%}
    {%- if not (wanted == root or (wanted.startswith(root ~ '/') and '/../' not in wanted ~ '/')) -%}
      {{ return([owner ~ ": argument `location` is '" ~ location ~ "'; it must be the table's location '"
          ~ table_location ~ "' or a folder inside it: every unreferenced file under it is deleted, other"
          ~ " tables' files included"]) }}
    {%- endif -%}
    {%- set root = wanted -%}
  {%- endif -%}
  {%- if file_list_view is not string -%}{{ return([]) }}{%- endif -%}
  {%- if not dbt_iceberg_maint._iceberg_maint_file_list_exists(file_list_view) -%}
    {{ return([owner ~ ": argument `file_list_view` is '" ~ file_list_view ~ "'; no such view or table: expected a"
        ~ " temporary view, a global_temp view or a table with columns file_path and last_modified"]) }}
  {%- endif -%}
  {%- set lit = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {%- set path = "regexp_replace(file_path, '^file:(//)?', '')" -%}
  {%- set inside = '(' ~ path ~ ' = ' ~ lit(root) ~ ' or (startswith(' ~ path ~ ', ' ~ lit(root ~ '/')
        ~ ') and not contains(' ~ path ~ " || '/', '/../')))" -%}
  {%- set rows = run_query('select count(*) as refused, min(file_path) as example from ' ~ file_list_view
        ~ ' where file_path is null or last_modified is null or last_modified >= ' ~ older_than
        ~ ' or not ' ~ inside).rows -%}
  {%- if rows[0]['refused'] | int > 0 -%}
    {{ return([owner ~ ": argument `file_list_view` is '" ~ file_list_view ~ "'; " ~ rows[0]['refused']
        ~ " of its entries (e.g. " ~ tojson(rows[0]['example']) ~ ") lie outside '" ~ root
        ~ "' or are not older than " ~ older_than ~ ": every entry must be a file inside the table"
        ~ (" location" if location is none else "'s `location`")
        ~ " with a last_modified older than the window"]) }}
  {%- endif -%}
  {{ return([]) }}
{% endmacro %}

{#- Whether the candidate list can be read: a temporary view ('name'), a global temporary view
    ('global_temp.name') or a table ('schema.name', 'catalog.schema.name'); checked by SHOW, so a
    missing one is refused by name instead of failing the check's query. Temporary views are
    listed through `global_temp` (Spark's session catalog lists the session's temporary views
    with it, namespace ''): a plain `show views` lists the current catalog's namespace, which
    fails on a catalog with views (e.g. a JDBC one) when that namespace does not exist. -#}
{% macro _iceberg_maint_file_list_exists(file_list_view) %}
  {%- set literal = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {%- set parts = file_list_view.split('.') -%}
  {%- if parts | length == 1 or (parts | length == 2 and parts[0] | lower == 'global_temp') -%}
    {%- set namespace = '' if parts | length == 1 else 'global_temp' -%}
    {%- set rows = run_query('show views in global_temp like ' ~ literal(parts[-1])).rows -%}
    {%- for row in rows if (row[0] | string) == namespace -%}{{ return(true) }}{%- endfor -%}
    {{ return(false) }}
  {%- elif parts | length == 2 -%}
    {{ return(dbt_iceberg_maint._iceberg_maint_show_table_exists(none, parts[0], parts[1])) }}
  {%- elif parts | length == 3 -%}
    {{ return(dbt_iceberg_maint._iceberg_maint_show_table_exists(parts[0], parts[1], parts[2])) }}
  {%- endif -%}
  {{ return(false) }}
{% endmacro %}


{% macro _iceberg_maint_table_location(table) %}
  {%- for row in run_query('describe table extended ' ~ table) -%}
    {%- if (row[0] | string).strip() == 'Location' -%}{{ return(row[1]) }}{%- endif -%}
  {%- endfor -%}
  {{ return(none) }}
{% endmacro %}

{% macro _iceberg_maint_normalised_location(path) %}
  {%- set text = (path | string).strip().rstrip('/') -%}
  {%- for prefix in ['file://', 'file:'] -%}
    {%- if text.startswith(prefix) -%}{{ return(text[prefix | length:]) }}{%- endif -%}
  {%- endfor -%}
  {{ return(text) }}
{% endmacro %}


{#- ---- As a maintenance step (get_maintenance_plan) ---------------------------------------- -#}

{% macro _iceberg_maint_remove_orphan_files_defaults() %}
  {{ return({'enabled': true, 'older_than_hours': 72, 'location': none, 'max_concurrent_deletes': none,
             'equal_schemes': none, 'equal_authorities': none, 'prefix_mismatch_mode': none, 'prefix_listing': none,
             'interval_hours': 12}) }}
{% endmacro %}

{% macro _iceberg_maint_remove_orphan_files_policy_errors(section) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_remove_orphan_files_errors(section.older_than_hours,
      location=section.location, max_concurrent_deletes=section.max_concurrent_deletes,
      equal_schemes=section.equal_schemes, equal_authorities=section.equal_authorities,
      prefix_mismatch_mode=section.prefix_mismatch_mode, prefix_listing=section.prefix_listing)) }}
{% endmacro %}

{#- Orphans cannot be counted without listing the table location, which is the operation itself;
    it deletes only files older than the window, so it is always due, but on a table younger
    than the window (health.table_age_hours, read for a table never swept), which cannot hold a
    file that old. -#}
{% macro _iceberg_maint_remove_orphan_files_due(section, health) %}
  {%- set age = health.get('table_age_hours') -%}
  {%- if age is not none and age < section.older_than_hours and section.location is none -%}
    {{ return({'due': false, 'reason': 'the table is only ' ~ age ~ ' h old, younger than older_than_hours '
        ~ section.older_than_hours ~ ': none of its files can be old enough to remove'}) }}
  {%- endif -%}
  {{ return({'due': true, 'reason': 'always due: deletes only unreferenced files older than '
      ~ section.older_than_hours ~ ' h'}) }}
{% endmacro %}

{#- Always against the real clock (never as_of): the 24 h floor protects writes in flight. -#}
{% macro _iceberg_maint_remove_orphan_files_planned_sql(relation, section, context={}) %}
  {{ return({'sql': dbt_iceberg_maint.get_remove_orphan_files_sql(relation=relation,
      older_than_hours=section.older_than_hours, location=section.location,
      max_concurrent_deletes=section.max_concurrent_deletes, equal_schemes=section.equal_schemes,
      equal_authorities=section.equal_authorities, prefix_mismatch_mode=section.prefix_mismatch_mode,
      prefix_listing=section.prefix_listing), 'reason': none}) }}
{% endmacro %}


{#- A replayed remove_orphan_files step (execute_maintenance_steps): its `older_than` must be a
    constant at least 24 h before now (a plan's cut-off only grows older while it waits), it may
    not carry a file_list_view (a plan never renders one), and its location passes the scope
    guard. Missing older_than means Iceberg's default, 3 days. -#}
{% macro _iceberg_maint_orphan_step_errors(table, values) %}
  {%- set owner = 'remove_orphan_files' -%}
  {%- set errors = [] -%}
  {%- set literal = values.get('older_than') -%}
  {%- if literal is not none -%}
    {%- set match = modules.re.fullmatch("TIMESTAMP '([0-9: .-]+)Z'", literal) -%}
    {%- set instant = dbt_iceberg_maint._iceberg_maint_parse_instant(owner, 'older_than', match.group(1)).value
          if match else none -%}
    {%- set floor = dbt_iceberg_maint._iceberg_maint_now() - modules.datetime.timedelta(hours=24) -%}
    {%- if instant is none or instant > floor -%}
      {%- do errors.append(owner ~ ": argument `older_than` is " ~ literal ~ "; expected a constant TIMESTAMP "
            ~ "'YYYY-MM-DD HH:MM:SSZ' at least 24 h before now: a younger file may belong to a write in progress") -%}
    {%- endif -%}
  {%- endif -%}
  {%- if 'file_list_view' in values -%}
    {%- do errors.append(owner ~ ": argument `file_list_view` is " ~ values.file_list_view ~ "; a replayed plan"
          ~ " step never lists files itself (call remove_orphan_files with file_list_view instead)") -%}
  {%- endif -%}
  {%- if 'location' in values -%}
    {%- set location = dbt_iceberg_maint._iceberg_maint_string_literal_value(values.location) -%}
    {%- if location is none -%}
      {%- do errors.append(owner ~ ": argument `location` is " ~ values.location ~ "; expected a string literal") -%}
    {%- elif not errors -%}
      {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_orphan_scope_errors(table, location, none, none)) -%}
    {%- endif -%}
  {%- endif -%}
  {{ return(errors) }}
{% endmacro %}
