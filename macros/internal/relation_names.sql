{#- Relation -> names used by the procedures. A relation is `this`, a ref(), a source(), or a
    string 'table', 'schema.table' or 'catalog.schema.table'. The catalog comes from a
    three-part string, else the `dbt_iceberg_maint_catalog` var, else none (the session's
    current catalog). -#}

{% macro _iceberg_maint_identifier_pattern() -%}
  {{ return('[A-Za-z_][A-Za-z0-9_]*') }}
{%- endmacro %}


{#- The identifier guard: whether `value` is, as a whole string, one plain identifier (letters,
    digits, underscores; no quoting, no whitespace, no trailing newline). Every name the package
    renders into SQL unquoted passes through here. -#}
{% macro _iceberg_maint_is_identifier(value) %}
  {{ return(value is string and modules.re.fullmatch(dbt_iceberg_maint._iceberg_maint_identifier_pattern(), value)
      is not none) }}
{% endmacro %}


{#- {'catalog': str|none, 'schema': str, 'identifier': str}; raises a compiler error naming the
    argument (or the var) and the value when the relation cannot be resolved to identifiers. -#}
{% macro _iceberg_maint_relation_parts(relation, argument='relation') %}
  {%- set is_identifier = dbt_iceberg_maint._iceberg_maint_is_identifier -%}
  {%- set catalog_var = var('dbt_iceberg_maint_catalog', none) -%}
  {%- if catalog_var is not none and not is_identifier(catalog_var) -%}
    {{ exceptions.raise_compiler_error(
        "dbt_iceberg_maint: var `dbt_iceberg_maint_catalog` is " ~ tojson(catalog_var)
            ~ "; expected a catalog name made of letters, digits and underscores (e.g. local, glue), or none") }}
  {%- endif -%}
  {%- if relation is none -%}
    {{ exceptions.raise_compiler_error(
        "dbt_iceberg_maint: argument `" ~ argument
            ~ "` is none; pass `this`, a ref(), a source() or a 'schema.table' string") }}
  {%- elif relation is string -%}
    {%- set parts = relation.split('.') -%}
    {%- set check = namespace(valid=parts | length <= 3) -%}
    {%- for part in parts if not is_identifier(part) -%}{%- set check.valid = false -%}{%- endfor -%}
    {%- if not check.valid -%}
      {{ exceptions.raise_compiler_error(
          "dbt_iceberg_maint: argument `" ~ argument ~ "` is '" ~ relation ~ "'"
              ~ "; expected 'table', 'schema.table' or 'catalog.schema.table' made of letters, digits and"
              ~ " underscores, or a relation (this, ref(), source())") }}
    {%- endif -%}
    {%- if parts | length == 3 -%}
      {{ return({'catalog': parts[0], 'schema': parts[1], 'identifier': parts[2]}) }}
    {%- elif parts | length == 2 -%}
      {{ return({'catalog': catalog_var, 'schema': parts[0], 'identifier': parts[1]}) }}
    {%- else -%}
      {%- set schema = target.schema -%}
    {%- endif -%}
    {%- set identifier = parts[0] -%}
  {%- elif relation.identifier is defined and relation.identifier -%}
    {%- set schema = relation.schema or target.schema -%}
    {%- set identifier = relation.identifier -%}
  {%- else -%}
    {{ exceptions.raise_compiler_error(
        "dbt_iceberg_maint: argument `" ~ argument ~ "` is " ~ relation
            ~ "; expected `this`, a ref(), a source() or a 'schema.table' string") }}
  {%- endif -%}
  {#- A relation object's parts and the target schema are checked like a string's. -#}
  {%- for name, value in [['schema', schema], ['identifier', identifier]] if not is_identifier(value) -%}
    {{ exceptions.raise_compiler_error(
        "dbt_iceberg_maint: argument `" ~ argument ~ "` has " ~ name ~ " " ~ tojson(value | string)
            ~ "; expected letters, digits and underscores") }}
  {%- endfor -%}
  {{ return({'catalog': catalog_var, 'schema': schema, 'identifier': identifier}) }}
{% endmacro %}


{#- 'schema.table': the `table` argument of an Iceberg procedure. -#}
{% macro _iceberg_maint_table_name(relation, argument='relation') %}
  {%- set parts = dbt_iceberg_maint._iceberg_maint_relation_parts(relation, argument) -%}
  {{ return(parts.schema ~ '.' ~ parts.identifier) }}
{% endmacro %}


{#- 'catalog.schema.table' when the catalog is known, else 'schema.table': for queries on the
    table or its metadata tables, and the `table` key of result lines. -#}
{% macro _iceberg_maint_qualified_name(relation, argument='relation') %}
  {%- set parts = dbt_iceberg_maint._iceberg_maint_relation_parts(relation, argument) -%}
  {%- set name = parts.schema ~ '.' ~ parts.identifier -%}
  {{ return((parts.catalog ~ '.' ~ name) if parts.catalog else name) }}
{% endmacro %}


{#- 'catalog.system' or 'system' (the current catalog): where a CALL finds the procedure. -#}
{% macro _iceberg_maint_procedure_namespace(relation, argument='relation') %}
  {%- set parts = dbt_iceberg_maint._iceberg_maint_relation_parts(relation, argument) -%}
  {{ return((parts.catalog ~ '.system') if parts.catalog else 'system') }}
{% endmacro %}
