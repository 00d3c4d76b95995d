{#- Directories a schema's location holds that no table references any more: what a
    `DROP TABLE` without PURGE leaves behind (Iceberg keeps every file; dbt-adapters#1145,
    apache/iceberg#14980), e.g. a model deleted or renamed and its old table dropped.

    A full refresh does not leave one: dbt-spark's table materialization replaces an Iceberg
    table in place (`create or replace`), and its incremental one drops the table and creates it
    again at the same location, so the old files end up inside the new table's location, where
    remove_orphan_files removes them.

    Finding (`find_left_behind_locations`) is SQL only: Spark's `binaryFile` source lists the
    schema's location recursively, selecting only path, modificationTime and length (column
    pruning: the files' content is never read), grouped by the directory directly under the
    schema's location; a directory is left behind when no table references it: no table of the
    catalog (first the schema's own, then, only when candidates remain, every other top-level
    namespace's) has its location, `write.data.path`, `write.metadata.path`,
    `write.object-storage.path` or `write.folder-storage.path` in it (or above it), and it is no
    namespace's location (nested in the schema or, when candidates remain, any other).

    Removal (`remove_left_behind_locations`) runs Iceberg's own `remove_orphan_files` through an
    Iceberg table of the schema, else of another schema of the catalog (`table => <that table>,
    location => <the directory>`): Iceberg
    lists the directory and deletes every file the carrier table does not reference that is older
    than `older_than` (its own 24 h floor applies, as does ours), and accepts a location outside
    the carrier's. The guards of orphan removal hold: older_than_hours >= 24; a dry run unless
    `dry_run=false` (Iceberg's native dry run lists the files it would delete); only a directory
    directly under the schema's location, which must itself lie strictly inside the catalog's
    warehouse location; never a directory a current table references; never one holding a file
    younger than the floor (a table being created writes files before its catalog entry
    exists). Every requested directory is checked before the first CALL: a refused one changes
    nothing. -#}

{% macro _iceberg_maint_left_behind_view() -%}
  {{ return('iceberg_maint_left_behind_listing') }}
{%- endmacro %}

{#- The table properties that put a table's files outside its location. -#}
{% macro _iceberg_maint_left_behind_path_properties() -%}
  {{ return(['write.data.path', 'write.metadata.path', 'write.object-storage.path', 'write.folder-storage.path']) }}
{%- endmacro %}


{#- ---- The statements (pure) ------------------------------------------------------------- -#}

{#- [the CREATE TEMPORARY VIEW over binaryFile, the SELECT] listing `schema_location` and
    grouping its files by the directory directly under it, leaving out the directory names in
    `excluded` (those a table references). Columns: name, location, files, bytes,
    newest_file_age_hours, removable (every file older than `older_than_hours`). -#}
{% macro get_find_left_behind_locations_sql(schema_location, excluded=none, older_than_hours=72) %}
  {{ return(adapter.dispatch('get_find_left_behind_locations_sql', 'dbt_iceberg_maint')(
      schema_location=schema_location, excluded=excluded, older_than_hours=older_than_hours)) }}
{% endmacro %}

{% macro default__get_find_left_behind_locations_sql(schema_location, excluded, older_than_hours) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.get_find_left_behind_locations_sql is not implemented for"
        ~ " adapter '" ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__get_find_left_behind_locations_sql(schema_location, excluded, older_than_hours) %}
  {%- set owner = 'find_left_behind_locations' -%}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_left_behind_age_errors(owner, older_than_hours) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_left_behind_path_errors(owner, 'schema_location',
        schema_location)) -%}
  {%- if excluded is not none and (excluded is string or excluded is mapping or excluded is not iterable) -%}
    {%- do errors.append(owner ~ ": argument `excluded` is " ~ tojson(excluded | string)
          ~ "; expected a list of directory names") -%}
  {%- elif excluded is not none -%}
    {%- for name in excluded if name is not string or not name or '/' in name or name.strip() != name -%}
      {%- do errors.append(owner ~ ": argument `excluded` holds " ~ tojson(name | string)
            ~ "; expected directory names (no '/', no surrounding whitespace)") -%}
    {%- endfor -%}
  {%- endif -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(errors) -%}
  {%- set lit = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {%- set root = dbt_iceberg_maint._iceberg_maint_normalised_location(schema_location) -%}
  {%- set view = dbt_iceberg_maint._iceberg_maint_left_behind_view() -%}
  {%- set path = "regexp_replace(path, '^file:(//)?', '')" -%}
  {%- set cutoff = dbt_iceberg_maint._iceberg_maint_timestamp_hours_ago(older_than_hours
        if older_than_hours is not none else 72) -%}
  {%- set create -%}
create or replace temporary view {{ view }} using binaryFile options (path {{ lit(schema_location) }}, recursiveFileLookup 'true')
  {%- endset -%}
  {%- set names = [] -%}
  {%- for name in (excluded or []) | sort -%}{%- do names.append(lit(name)) -%}{%- endfor -%}
  {%- set select -%}
select parts[0] as name, {{ lit(root ~ '/') }} || parts[0] as location, count(*) as files, sum(length) as bytes, round((unix_timestamp(current_timestamp()) - unix_timestamp(max(modificationTime))) / 3600.0, 2) as newest_file_age_hours, max(modificationTime) < {{ cutoff }} as removable from (select split(substr({{ path }}, {{ (root | length) + 2 }}), '/') as parts, length, modificationTime from {{ view }} where startswith({{ path }}, {{ lit(root ~ '/') }})) where size(parts) > 1{{ (' and parts[0] not in (' ~ names | join(', ') ~ ')') if names else '' }} group by parts[0] order by name
  {%- endset -%}
  {{ return([create, select]) }}
{% endmacro %}


{#- CALL <catalog>.system.remove_orphan_files through `carrier` on one directory: what Iceberg
    lists and, unless dry_run, deletes. Pure: callers pass a directory the scan found. -#}
{% macro _iceberg_maint_left_behind_call_sql(carrier, location, older_than_hours, dry_run) %}
  {%- set lit = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_call_sql(carrier, 'remove_orphan_files', [
      ['table', lit(dbt_iceberg_maint._iceberg_maint_table_name(carrier))],
      ['location', lit(location)],
      ['older_than', dbt_iceberg_maint._iceberg_maint_timestamp_hours_ago(older_than_hours)],
      ['dry_run', dbt_iceberg_maint._iceberg_maint_boolean_literal(dry_run)]])) }}
{% endmacro %}


{#- ---- Validation (pure) ------------------------------------------------------------------ -#}

{% macro _iceberg_maint_left_behind_age_errors(owner, older_than_hours) %}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_check_positive_number(owner, 'older_than_hours',
        older_than_hours) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_hours_bound(owner, 'older_than_hours',
        older_than_hours)) -%}
  {%- if not errors and older_than_hours is not none and older_than_hours < 24 -%}
    {%- do errors.append(owner ~ ": argument `older_than_hours` is " ~ older_than_hours
          ~ "; it must be at least 24: a directory holding a file younger than a day may belong to a table"
          ~ " being created right now") -%}
  {%- endif -%}
  {{ return(errors) }}
{% endmacro %}

{#- A path Spark lists as given: no glob characters (binaryFile would expand them), no
    surrounding whitespace or line break. -#}
{% macro _iceberg_maint_left_behind_path_errors(owner, argument, value) %}
  {%- if value is not string or not value.strip() -%}
    {{ return([owner ~ ": argument `" ~ argument ~ "` is " ~ tojson(value | string)
        ~ "; expected a non-empty path or URI"]) }}
  {%- elif value != value.strip() or value.splitlines() | length > 1
        or modules.re.search('[*?\\[\\]{}\\\\]', value) -%}
    {{ return([owner ~ ": argument `" ~ argument ~ "` is " ~ tojson(value)
        ~ "; expected a path or URI without surrounding whitespace, line breaks or glob characters (* ? [ ] { } \\)"]) }}
  {%- endif -%}
  {{ return([]) }}
{% endmacro %}

{#- The arguments of find_left_behind_locations (locations none) and
    remove_left_behind_locations. -#}
{% macro _iceberg_maint_left_behind_errors(owner, schema=none, older_than_hours=72, dry_run=true, locations=none,
      warehouse=none) %}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_left_behind_age_errors(owner, older_than_hours) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_boolean(owner, 'dry_run', dry_run)) -%}
  {%- if schema is not none -%}
    {%- set parts = schema.split('.') if schema is string else [] -%}
    {%- set check = namespace(valid=parts | length in [1, 2]) -%}
    {%- for part in parts if not dbt_iceberg_maint._iceberg_maint_is_identifier(part) -%}
      {%- set check.valid = false -%}
    {%- endfor -%}
    {%- if not check.valid -%}
      {%- do errors.append(owner ~ ": argument `schema` is " ~ tojson(schema | string)
            ~ "; expected 'schema' or 'catalog.schema' made of letters, digits and underscores") -%}
    {%- endif -%}
  {%- endif -%}
  {%- if locations is not none -%}
    {%- if locations is string or locations is mapping or locations is not iterable or locations | length == 0 -%}
      {%- do errors.append(owner ~ ": argument `locations` is " ~ tojson(locations | string)
            ~ "; expected a non-empty list of directories (as find_left_behind_locations reports them), or none"
            ~ " for every left-behind directory") -%}
    {%- else -%}
      {%- for location in locations -%}
        {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_left_behind_path_errors(owner, 'locations', location)) -%}
      {%- endfor -%}
    {%- endif -%}
  {%- endif -%}
  {%- if warehouse is not none -%}
    {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_left_behind_path_errors(owner, 'warehouse', warehouse)) -%}
  {%- endif -%}
  {{ return(errors) }}
{% endmacro %}

{#- Whether `path` lies strictly inside `root` (both normalised; no '..' segment). -#}
{% macro _iceberg_maint_strictly_inside(root, path) %}
  {%- set base = dbt_iceberg_maint._iceberg_maint_normalised_location(root) -%}
  {%- set wanted = dbt_iceberg_maint._iceberg_maint_normalised_location(path) -%}
  {{ return(wanted.startswith(base ~ '/') and wanted != base and '/../' not in wanted ~ '/'
      and '/./' not in wanted ~ '/') }}
{% endmacro %}

{#- The path of a location without its scheme and authority ('s3a://bucket/wh/t' -> '/wh/t',
    'file:/wh/t' -> '/wh/t'): what the exclusion compares, so a table written as s3a:// still
    rules out its directory under a schema located at s3:// (a wider match only rules out more). -#}
{% macro _iceberg_maint_path_part(path) %}
  {%- set text = dbt_iceberg_maint._iceberg_maint_normalised_location(path) -%}
  {%- set match = modules.re.fullmatch('[A-Za-z][A-Za-z0-9+.-]*:(//[^/]*)?(/.*)?', text) -%}
  {{ return((match.group(2) or '') if match else text) }}
{% endmacro %}

{#- Which directories directly under `root` the referenced paths ({path: who}) rule out:
    {'all': who or none (a path at or above root covers every directory), 'names': {name: who}}.
    Paths are compared without scheme and authority. Pure. -#}
{% macro _iceberg_maint_left_behind_excluded(root, referenced) %}
  {%- set base = dbt_iceberg_maint._iceberg_maint_path_part(root) -%}
  {%- set result = {'all': none, 'names': {}} -%}
  {%- for path, who in referenced.items() -%}
    {%- set wanted = dbt_iceberg_maint._iceberg_maint_path_part(path) -%}
    {%- if wanted == base or base.startswith(wanted ~ '/') -%}
      {%- if result.all is none -%}{%- do result.update({'all': who}) -%}{%- endif -%}
    {%- elif wanted.startswith(base ~ '/') -%}
      {%- set name = wanted[(base | length) + 1:].split('/')[0] -%}
      {%- if name not in result.names -%}{%- do result.names.update({name: who}) -%}{%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(result) }}
{% endmacro %}


{#- ---- Reading the catalog --------------------------------------------------------------- -#}

{#- {'Location': ..., ...} of DESCRIBE NAMESPACE EXTENDED. -#}
{% macro _iceberg_maint_namespace_info(namespace) %}
  {%- set info = {} -%}
  {%- for row in run_query('describe namespace extended ' ~ namespace) -%}
    {%- do info.update({(row[0] | string).strip(): row[1]}) -%}
  {%- endfor -%}
  {{ return(info) }}
{% endmacro %}

{#- The paths the tables of `namespace` reference, as {path: 'table <name> (<what>)'}, and the
    Iceberg tables that can carry a remove_orphan_files CALL (gc not disabled, a plain
    identifier). One DESCRIBE TABLE EXTENDED per table (its name quoted: whatever the catalog
    holds is read); SHOW TBLPROPERTIES only for a table whose properties name a path. -#}
{% macro _iceberg_maint_namespace_references(namespace) %}
  {%- set referenced = {} -%}
  {%- set carriers = [] -%}
  {%- for row in run_query('show tables in ' ~ namespace) if not row['isTemporary'] -%}
    {%- set table = namespace ~ '.' ~ row['tableName'] -%}
    {%- set quoted = namespace ~ '.`' ~ (row['tableName'] | string).replace('`', '``') ~ '`' -%}
    {%- set info = {} -%}
    {%- for detail in run_query('describe table extended ' ~ quoted) -%}
      {%- do info.update({(detail[0] | string).strip(): detail[1] | string}) -%}
    {%- endfor -%}
    {%- if info.get('Location') -%}
      {%- do referenced.update({info['Location']: 'table ' ~ table ~ ' (its location)'}) -%}
    {%- endif -%}
    {%- set properties_text = info.get('Table Properties', '') -%}
    {%- if '.path=' in properties_text -%}
      {%- set properties = dbt_iceberg_maint._iceberg_maint_table_properties(quoted) -%}
      {%- for key in dbt_iceberg_maint._iceberg_maint_left_behind_path_properties() if properties.get(key) -%}
        {%- do referenced.update({properties[key]: 'table ' ~ table ~ ' (' ~ key ~ ')'}) -%}
      {%- endfor -%}
    {%- endif -%}
    {%- if (info.get('Provider', '') | lower) == 'iceberg' and 'gc.enabled=false' not in properties_text | lower
          and dbt_iceberg_maint._iceberg_maint_is_identifier(row['tableName'] | string) -%}
      {%- do carriers.append(table) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return({'referenced': referenced, 'carriers': carriers}) }}
{% endmacro %}

{#- ---- The scan --------------------------------------------------------------------------- -#}

{#- Reads the catalog, lists the schema's location and returns {namespace, root, warehouse,
    carrier, covered_by, excluded: {name: who}, found: [{name, location, files, bytes,
    newest_file_age_hours, removable}], statements}. Refuses (raises) a schema that does not
    exist or has no location. -#}
{% macro _iceberg_maint_left_behind_scan(owner, schema, older_than_hours, warehouse=none) %}
  {%- set catalog_var = var('dbt_iceberg_maint_catalog', none) -%}
  {%- if catalog_var is not none and not dbt_iceberg_maint._iceberg_maint_is_identifier(catalog_var) -%}
    {{ exceptions.raise_compiler_error("dbt_iceberg_maint: var `dbt_iceberg_maint_catalog` is " ~ tojson(catalog_var)
        ~ "; expected a catalog name made of letters, digits and underscores (e.g. local, glue), or none") }}
  {%- endif -%}
  {%- set parts = (schema or target.schema).split('.') -%}
  {%- if not dbt_iceberg_maint._iceberg_maint_is_identifier(parts[-1]) -%}
    {{ exceptions.raise_compiler_error(owner ~ ": the target schema is " ~ tojson(parts[-1])
        ~ "; pass `schema` made of letters, digits and underscores") }}
  {%- endif -%}
  {%- set catalog = parts[0] if parts | length == 2 else catalog_var -%}
  {%- set catalog = catalog or dbt_iceberg_maint._iceberg_maint_current_catalog() -%}
  {%- set name = parts[-1] -%}
  {%- set namespace = catalog ~ '.' ~ name -%}
  {%- set lit = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {%- if run_query('show namespaces in ' ~ catalog ~ ' like ' ~ lit(name)).rows | length == 0 -%}
    {{ exceptions.raise_compiler_error(owner ~ ": argument `schema` is '" ~ (schema or target.schema)
        ~ "'; no such schema in catalog " ~ catalog) }}
  {%- endif -%}
  {%- set location = dbt_iceberg_maint._iceberg_maint_namespace_info(namespace).get('Location') -%}
  {%- if not location or dbt_iceberg_maint._iceberg_maint_left_behind_path_errors(owner, 'schema', location | string) -%}
    {{ exceptions.raise_compiler_error(owner ~ ": schema " ~ namespace ~ " has the location " ~ tojson(location | string)
        ~ "; expected a path or URI without glob characters, which Spark's listing would expand") }}
  {%- endif -%}
  {%- set location = location | string -%}
  {%- set root = dbt_iceberg_maint._iceberg_maint_normalised_location(location) -%}
  {%- set warehouse = warehouse or dbt_iceberg_maint._iceberg_maint_catalog_setting(catalog, 'warehouse') -%}
  {#- References: the schema's own tables and nested namespaces first. -#}
  {%- set own = dbt_iceberg_maint._iceberg_maint_namespace_references(namespace) -%}
  {%- set referenced = own.referenced -%}
  {%- for row in run_query('show namespaces in ' ~ namespace) -%}
    {%- set nested = catalog ~ '.' ~ row[0] -%}
    {%- set nested_location = dbt_iceberg_maint._iceberg_maint_namespace_info(nested).get('Location') -%}
    {%- if nested_location -%}
      {%- do referenced.update({nested_location | string: 'namespace ' ~ nested ~ ' (its location)'}) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set result = {'namespace': namespace, 'location': location, 'root': root, 'warehouse': warehouse,
        'carrier': own.carriers[0] if own.carriers else none, 'covered_by': none, 'excluded': {}, 'found': [],
        'statements': []} -%}
  {%- set excluded = dbt_iceberg_maint._iceberg_maint_left_behind_excluded(root, referenced) -%}
  {%- if excluded.all is not none -%}
    {%- do result.update({'covered_by': excluded.all}) -%}
    {{ return(result) }}
  {%- endif -%}
  {%- set statements = dbt_iceberg_maint.get_find_left_behind_locations_sql(location, excluded.names.keys() | list,
        older_than_hours) -%}
  {%- do run_query(statements[0]) -%}
  {%- set rows = run_query(statements[1]).rows -%}
  {#- Candidates remain: the other namespaces' tables may reference them (a table renamed into
      another schema keeps its location; a custom location or write.data.path may point here). -#}
  {%- if rows | length > 0 -%}
    {%- for row in run_query('show namespaces in ' ~ catalog) if (row[0] | string) != name -%}
      {%- set other = dbt_iceberg_maint._iceberg_maint_namespace_references(catalog ~ '.' ~ row[0]) -%}
      {%- do referenced.update(other.referenced) -%}
      {#- Another schema's own folder (a Hive `default` database's location is the warehouse, with
          the other databases' folders in it) is never left behind. -#}
      {%- set other_location = dbt_iceberg_maint._iceberg_maint_namespace_info(catalog ~ '.' ~ row[0]).get('Location') -%}
      {%- if other_location -%}
        {%- do referenced.update({other_location | string: 'namespace ' ~ catalog ~ '.' ~ row[0] ~ ' (its location)'}) -%}
      {%- endif -%}
      {#- A schema whose tables were all dropped: another schema's table carries the CALL. -#}
      {%- if result.carrier is none and other.carriers -%}{%- do result.update({'carrier': other.carriers[0]}) -%}{%- endif -%}
    {%- endfor -%}
    {%- set excluded = dbt_iceberg_maint._iceberg_maint_left_behind_excluded(root, referenced) -%}
    {%- if excluded.all is not none -%}
      {%- do result.update({'covered_by': excluded.all, 'excluded': excluded.names, 'statements': statements}) -%}
      {{ return(result) }}
    {%- endif -%}
  {%- endif -%}
  {%- for row in rows if row['name'] not in excluded.names -%}
    {%- do result.found.append({'name': row['name'] | string, 'location': row['location'] | string,
          'files': row['files'] | int, 'bytes': row['bytes'] | int,
          'newest_file_age_hours': dbt_iceberg_maint._iceberg_maint_json_safe(row['newest_file_age_hours']),
          'removable': row['removable'] is true or (row['removable'] | string | lower) == 'true'}) -%}
  {%- endfor -%}
  {%- do result.update({'excluded': excluded.names, 'statements': statements}) -%}
  {{ return(result) }}
{% endmacro %}

{% macro _iceberg_maint_left_behind_metrics(entry) %}
  {{ return({'location': entry.location, 'files': entry.files, 'bytes': entry.bytes,
      'newest_file_age_hours': entry.newest_file_age_hours, 'removable': entry.removable}) }}
{% endmacro %}

{% macro _iceberg_maint_left_behind_summary(entry, older_than_hours) %}
  {{ return(entry.location ~ ": no table references it; " ~ entry.files ~ " files, " ~ entry.bytes
      ~ " bytes, newest file " ~ entry.newest_file_age_hours ~ " h old"
      ~ ("" if entry.removable else ", younger than " ~ older_than_hours ~ " h: not removable yet")) }}
{% endmacro %}


{#- ---- find_left_behind_locations --------------------------------------------------------- -#}

{% macro find_left_behind_locations(schema=none, older_than_hours=72) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_outside_node(adapter.dispatch('find_left_behind_locations',
      'dbt_iceberg_maint')(schema=schema, older_than_hours=older_than_hours))) }}
{% endmacro %}

{% macro default__find_left_behind_locations(schema, older_than_hours) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.find_left_behind_locations is not implemented for adapter '"
        ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__find_left_behind_locations(schema, older_than_hours) %}
  {%- set owner = 'find_left_behind_locations' -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_left_behind_errors(owner,
        schema, older_than_hours)) -%}
  {%- set hours = older_than_hours if older_than_hours is not none else 72 -%}
  {%- if not execute -%}{{ return({}) }}{%- endif -%}
  {%- set started = dbt_iceberg_maint._iceberg_maint_now() -%}
  {%- set scan = dbt_iceberg_maint._iceberg_maint_left_behind_scan(owner, schema, hours) -%}
  {%- set duration_ms = dbt_iceberg_maint._iceberg_maint_elapsed_ms(started) -%}
  {%- set sql = scan.statements | join(';\n') or none -%}
  {%- for entry in scan.found -%}
    {%- do dbt_iceberg_maint._iceberg_maint_log_result(scan.namespace, owner, 'success',
          dbt_iceberg_maint._iceberg_maint_left_behind_summary(entry, hours), sql,
          dbt_iceberg_maint._iceberg_maint_left_behind_metrics(entry), duration_ms) -%}
  {%- endfor -%}
  {%- do log(owner ~ ": " ~ scan.found | length ~ " left-behind director" ~ ('y' if scan.found | length == 1 else 'ies')
        ~ " under " ~ scan.location ~ (" (every directory is covered by " ~ scan.covered_by ~ ")"
        if scan.covered_by else ""), info=true) -%}
  {{ return({'schema': scan.namespace, 'location': scan.location, 'warehouse': scan.warehouse,
      'left_behind': scan.found, 'covered_by': scan.covered_by, 'sql': scan.statements,
      'duration_ms': duration_ms}) }}
{% endmacro %}


{#- ---- remove_left_behind_locations ------------------------------------------------------- -#}

{#- The directories to remove and the errors refusing the request ({'remove': [...],
    'skip': [...], 'errors': [...]}): each requested directory must be one the scan found
    (directly under the schema's location, referenced by no table) with no file younger than
    the floor; without `locations`, every found directory, those with young files skipped. The
    schema's location must lie strictly inside the warehouse location, and some Iceberg table of
    the catalog must carry the CALL. -#}
{% macro _iceberg_maint_left_behind_selection(owner, scan, locations, older_than_hours) %}
  {%- set selection = {'remove': [], 'skip': [], 'errors': []} -%}
  {%- if scan.warehouse is none -%}
    {%- do selection.errors.append(owner ~ ": the warehouse location of " ~ scan.namespace.split('.')[0]
          ~ " is not in Spark's configuration (spark.sql.catalog.<catalog>.warehouse); pass argument `warehouse`"
          ~ " so the schema's location can be checked to lie inside it") -%}
  {%- elif not dbt_iceberg_maint._iceberg_maint_strictly_inside(scan.warehouse, scan.location) -%}
    {%- do selection.errors.append(owner ~ ": the location of schema " ~ scan.namespace ~ " is '" ~ scan.location
          ~ "', not strictly inside the warehouse location '" ~ scan.warehouse ~ "': directories are removed only"
          ~ " inside the warehouse") -%}
  {%- endif -%}
  {%- set by_location = {} -%}
  {%- for entry in scan.found -%}{%- do by_location.update({entry.location: entry}) -%}{%- endfor -%}
  {%- for location in (locations if locations is not none else by_location.keys() | list) -%}
    {%- set wanted = dbt_iceberg_maint._iceberg_maint_normalised_location(location) -%}
    {%- set entry = by_location.get(wanted) -%}
    {%- set name = wanted[(scan.root | length) + 1:] -%}
    {%- if entry is not none and entry.removable -%}
      {%- do selection.remove.append(entry) -%}
    {%- elif entry is not none and locations is none -%}
      {%- do selection.skip.append(entry) -%}
    {%- elif entry is not none -%}
      {%- do selection.errors.append(owner ~ ": argument `locations` holds '" ~ location ~ "'; its newest file is "
            ~ entry.newest_file_age_hours ~ " h old, younger than older_than_hours " ~ older_than_hours
            ~ ": it may belong to a table being created") -%}
    {%- elif not dbt_iceberg_maint._iceberg_maint_strictly_inside(scan.root, wanted) or '/' in name -%}
      {%- do selection.errors.append(owner ~ ": argument `locations` holds '" ~ location ~ "'; expected a directory"
            ~ " directly under the schema's location '" ~ scan.root ~ "' that no table references") -%}
    {%- elif scan.covered_by or name in scan.excluded -%}
      {%- do selection.errors.append(owner ~ ": argument `locations` holds '" ~ location ~ "'; "
            ~ (scan.covered_by or scan.excluded[name]) ~ " references it: never removed") -%}
    {%- else -%}
      {%- do selection.errors.append(owner ~ ": argument `locations` holds '" ~ location ~ "'; no file was found"
            ~ " under it: not a left-behind directory of " ~ scan.namespace) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- if selection.remove and scan.carrier is none -%}
    {%- do selection.errors.append(owner ~ ": catalog " ~ scan.namespace.split('.')[0] ~ " holds no Iceberg table"
          ~ " (with gc enabled) to run Iceberg's remove_orphan_files through; nothing was removed") -%}
  {%- endif -%}
  {{ return(selection) }}
{% endmacro %}

{#- The CALL that removes (or, dry_run, lists) one left-behind directory, after the same scan
    and checks as remove_left_behind_locations. -#}
{% macro get_remove_left_behind_locations_sql(location, schema=none, older_than_hours=72, dry_run=true,
      warehouse=none) %}
  {{ return(adapter.dispatch('get_remove_left_behind_locations_sql', 'dbt_iceberg_maint')(location=location,
      schema=schema, older_than_hours=older_than_hours, dry_run=dry_run, warehouse=warehouse)) }}
{% endmacro %}

{% macro default__get_remove_left_behind_locations_sql(location, schema, older_than_hours, dry_run, warehouse) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.get_remove_left_behind_locations_sql is not implemented for"
        ~ " adapter '" ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__get_remove_left_behind_locations_sql(location, schema, older_than_hours, dry_run, warehouse) %}
  {%- set owner = 'remove_left_behind_locations' -%}
  {%- set errors = dbt_iceberg_maint._iceberg_maint_left_behind_errors(owner, schema, older_than_hours, dry_run,
        none, warehouse) -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_left_behind_path_errors(owner, 'location', location)) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(errors) -%}
  {%- if not execute -%}{{ return('') }}{%- endif -%}
  {%- set hours = older_than_hours if older_than_hours is not none else 72 -%}
  {%- set scan = dbt_iceberg_maint._iceberg_maint_left_behind_scan(owner, schema, hours, warehouse) -%}
  {%- set selection = dbt_iceberg_maint._iceberg_maint_left_behind_selection(owner, scan, [location], hours) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(selection.errors) -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_left_behind_call_sql(scan.carrier, selection.remove[0].location, hours,
      dry_run)) }}
{% endmacro %}

{% macro remove_left_behind_locations(schema=none, locations=none, older_than_hours=72, dry_run=true,
      warehouse=none) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_outside_node(adapter.dispatch('remove_left_behind_locations',
      'dbt_iceberg_maint')(schema=schema, locations=locations, older_than_hours=older_than_hours, dry_run=dry_run,
          warehouse=warehouse))) }}
{% endmacro %}

{% macro default__remove_left_behind_locations(schema, locations, older_than_hours, dry_run, warehouse) %}
  {{ exceptions.raise_compiler_error("dbt_iceberg_maint.remove_left_behind_locations is not implemented for adapter '"
        ~ adapter.type() ~ "'; it supports Spark (dbt-spark) with Iceberg") }}
{% endmacro %}

{% macro spark__remove_left_behind_locations(schema, locations, older_than_hours, dry_run, warehouse) %}
  {%- set owner = 'remove_left_behind_locations' -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(dbt_iceberg_maint._iceberg_maint_left_behind_errors(owner,
        schema, older_than_hours, dry_run, locations, warehouse)) -%}
  {%- if not execute -%}{{ return({}) }}{%- endif -%}
  {%- set hours = older_than_hours if older_than_hours is not none else 72 -%}
  {%- set dry_run = dry_run if dry_run is not none else true -%}
  {%- set scan = dbt_iceberg_maint._iceberg_maint_left_behind_scan(owner, schema, hours, warehouse) -%}
  {%- set selection = dbt_iceberg_maint._iceberg_maint_left_behind_selection(owner, scan, locations, hours) -%}
  {%- do dbt_iceberg_maint._iceberg_maint_raise_if_errors(selection.errors) -%}
  {%- if not dry_run and selection.remove -%}
    {#- It deletes through remove_orphan_files: never on Nessie, whose other branches may hold the files. -#}
    {%- set refused = dbt_iceberg_maint._iceberg_maint_nessie_refusal(scan.carrier, 'remove_orphan_files') -%}
    {%- if refused -%}{{ exceptions.raise_compiler_error(owner ~ ': ' ~ refused) }}{%- endif -%}
  {%- endif -%}
  {%- set results = [] -%}
  {%- for entry in selection.skip -%}
    {%- do results.append(dbt_iceberg_maint._iceberg_maint_log_result(scan.namespace, owner, 'skipped',
          dbt_iceberg_maint._iceberg_maint_left_behind_summary(entry, hours), none,
          dbt_iceberg_maint._iceberg_maint_left_behind_metrics(entry), 0)) -%}
  {%- endfor -%}
  {%- for entry in selection.remove -%}
    {%- set sql = dbt_iceberg_maint._iceberg_maint_left_behind_call_sql(scan.carrier, entry.location, hours, dry_run) -%}
    {%- set started = dbt_iceberg_maint._iceberg_maint_now() -%}
    {%- set output = run_query(sql) -%}
    {%- set metrics = dbt_iceberg_maint._iceberg_maint_left_behind_metrics(entry) -%}
    {%- do metrics.update(dbt_iceberg_maint._iceberg_maint_output_metrics(output, true)) -%}
    {%- do metrics.update({'through_table': scan.carrier}) -%}
    {%- do results.append(dbt_iceberg_maint._iceberg_maint_log_result(scan.namespace, owner,
          'dry_run' if dry_run else 'success',
          ("dry run: Iceberg lists " ~ metrics.orphan_file_count ~ " files it would delete, nothing deleted; "
            if dry_run else "deleted " ~ metrics.orphan_file_count ~ " files; ")
          ~ dbt_iceberg_maint._iceberg_maint_left_behind_summary(entry, hours), sql, metrics,
          dbt_iceberg_maint._iceberg_maint_elapsed_ms(started))) -%}
  {%- endfor -%}
  {%- if not selection.remove and not selection.skip -%}
    {%- do log(owner ~ ": no left-behind directory under " ~ scan.location, info=true) -%}
  {%- endif -%}
  {{ return({'schema': scan.namespace, 'location': scan.location, 'warehouse': scan.warehouse,
      'dry_run': dry_run, 'results': results}) }}
{% endmacro %}
