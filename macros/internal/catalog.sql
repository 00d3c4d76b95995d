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
