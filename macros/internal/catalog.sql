{#- What the catalog says about a table: its catalog type, existence, properties. -#}

{#- Whether the table exists. Inside a node (`dbt run` hooks) dbt's relation cache answers "yes"
    for the current catalog without a statement; it cannot answer "no": a model's first build adds
    its table to the cache only after its post-hooks ran. Elsewhere (run-operation) the cache is
    empty and adapter.get_relation would list the whole schema: on Iceberg's v2 catalogs dbt-spark
    then describes every table in it, one statement each, so maintaining n tables of a schema cost
    O(n^2) statements. Two SHOW statements answer for one table instead. -#}
{% macro _iceberg_maint_table_exists(relation) %}
  {%- set parts = dbt_iceberg_maint._iceberg_maint_relation_parts(relation) -%}
  {%- if parts.catalog is none and dbt_iceberg_maint._iceberg_maint_in_node()
        and adapter.get_relation(database=none, schema=parts.schema, identifier=parts.identifier) is not none -%}
    {{ return(true) }}
  {%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_show_table_exists(parts.catalog, parts.schema, parts.identifier)) }}
{% endmacro %}


{#- Whether `schema`.`identifier` is a table in `catalog` (none: the current one): the names
    SHOW TABLES ... LIKE gives (LIKE takes a pattern: names are compared exactly). -#}
{% macro _iceberg_maint_show_table_exists(catalog, schema, identifier) %}
  {{ return((identifier | lower) in dbt_iceberg_maint._iceberg_maint_schema_tables(catalog, schema, identifier)) }}
{% endmacro %}


{#- True when `relation` ('[catalog.]schema.table', a string) exists. -#}
{% macro _iceberg_maint_relation_exists(relation) %}
  {%- set parts = relation.split('.') -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_show_table_exists(parts[0] if parts | length == 3 else none, parts[-2],
      parts[-1])) }}
{% endmacro %}


{#- The lower-case names of the tables (not temporary views) in `schema` of `catalog` (none: the
    current one), those matching the pattern `like` when given; [] when the namespace does not
    exist (SHOW NAMESPACES first: SHOW TABLES fails on a missing one). iceberg_maintenance lists a
    schema holding several selected tables once: two statements per schema, not two per table. -#}
{% macro _iceberg_maint_schema_tables(catalog, schema, like=none) %}
  {%- set literal = dbt_iceberg_maint._iceberg_maint_string_literal -%}
  {%- set in_catalog = (' in ' ~ catalog) if catalog else '' -%}
  {%- if run_query('show namespaces' ~ in_catalog ~ ' like ' ~ literal(schema)).rows | length == 0 -%}
    {{ return([]) }}
  {%- endif -%}
  {%- set names = [] -%}
  {%- for row in run_query('show tables in ' ~ ((catalog ~ '.' ~ schema) if catalog else schema)
        ~ ((' like ' ~ literal(like)) if like is not none else '')) if not row['isTemporary'] -%}
    {%- do names.append(row['tableName'] | lower) -%}
  {%- endfor -%}
  {{ return(names) }}
{% endmacro %}


{#- Table properties as a dict: the one `show tblproperties` reader of the package. -#}
{% macro _iceberg_maint_table_properties(table) %}
  {%- set properties = {} -%}
  {%- for row in run_query('show tblproperties ' ~ table) -%}
    {%- do properties.update({row[0] | string: row[1] | string}) -%}
  {%- endfor -%}
  {{ return(properties) }}
{% endmacro %}


{#- Nessie keeps a table's files alive on every branch that references them, so Iceberg's
    garbage-collecting procedures must never run there: expire_snapshots and remove_orphan_files
    would delete files another branch still reads (Nessie's own garbage collector, nessie-gc,
    knows all branches). The reason such a CALL is refused when `relation`'s catalog is a Nessie
    catalog (its Spark setting spark.sql.catalog.<name>.type is nessie, or its catalog-impl is
    Nessie's), else none. Read only for those two operations, right before their CALL: two or
    three SET/SELECT statements that cannot fail. -#}
{% macro _iceberg_maint_nessie_refusal(relation, operation, checks=none) %}
  {%- if operation not in ['expire_snapshots', 'remove_orphan_files'] or not execute -%}{{ return(none) }}{%- endif -%}
  {#- `checks` ({catalogs: [...]}, kept by the caller): catalogs found not to be Nessie catalogs, as
      the relation names them ('' for the session's current catalog). -#}
  {%- set named = dbt_iceberg_maint._iceberg_maint_relation_parts(relation).catalog or '' -%}
  {%- if checks is not none and named in checks.catalogs -%}{{ return(none) }}{%- endif -%}
  {%- set catalog = named or dbt_iceberg_maint._iceberg_maint_current_catalog() -%}
  {%- set setting = dbt_iceberg_maint._iceberg_maint_catalog_setting -%}
  {%- if dbt_iceberg_maint._iceberg_maint_is_nessie(setting(catalog, 'type'), setting(catalog, 'catalog-impl')) -%}
    {{ return(operation ~ ' refused: catalog ' ~ catalog ~ ' is a Nessie catalog, where it would delete files that '
        ~ "other branches still reference; run Nessie's garbage collector (nessie-gc) instead") }}
  {%- endif -%}
  {%- if checks is not none -%}{%- do checks.catalogs.append(named) -%}{%- endif -%}
  {{ return(none) }}
{% endmacro %}


{#- The catalog a name without one resolves in: the session's current catalog. -#}
{% macro _iceberg_maint_current_catalog() %}
  {{ return(run_query('select current_catalog()').rows[0][0] | string) }}
{% endmacro %}


{#- The Spark setting spark.sql.catalog.<catalog>.<key>, none when unset. Backquoted: Spark's SET
    takes a key with a hyphen (catalog-impl) only so. -#}
{% macro _iceberg_maint_catalog_setting(catalog, key) %}
  {%- set rows = run_query('set `spark.sql.catalog.' ~ catalog ~ '.' ~ key ~ '`').rows -%}
  {%- set value = (rows[0][1] | string) if rows | length > 0 and rows[0][1] is not none else '' -%}
  {{ return(none if value in ['', '<undefined>'] else value) }}
{% endmacro %}


{#- Pure: whether a catalog's Spark settings (type, catalog-impl) name Nessie. -#}
{% macro _iceberg_maint_is_nessie(type, catalog_impl) %}
  {{ return((type or '') | lower == 'nessie' or 'nessie' in (catalog_impl or '') | lower) }}
{% endmacro %}
