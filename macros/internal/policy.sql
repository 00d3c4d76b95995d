{#- The per-model maintenance policy: `meta.iceberg_maint`, merged over the documented defaults
    (each operation's own, from its procedure file). -#}

{% macro _iceberg_maint_policy_defaults() %}
  {%- set defaults = {'enabled': true} -%}
  {%- for operation in dbt_iceberg_maint._iceberg_maint_operation_order() -%}
    {%- do defaults.update({dbt_iceberg_maint._iceberg_maint_policy_section(operation):
          dbt_iceberg_maint._iceberg_maint_operation_macro(operation, 'defaults')()}) -%}
  {%- endfor -%}
  {#- Cost gate (macros/health/cost_gate.sql): off until one of its keys is set. -#}
  {%- do defaults.update({'cost_gate': {'enabled': true, 'skip_unchanged': false, 'min_new_records': none,
        'min_new_bytes': none, 'min_interval_hours': none}}) -%}
  {{ return(defaults) }}
{% endmacro %}


{#- The raw `iceberg_maint` value of a node (a graph node or the `model` context dict), as
    declared ({} when there is none). dbt >= 1.10 keeps `+meta` under config.meta and mirrors
    it into node.meta. -#}
{% macro _iceberg_maint_model_policy(node) %}
  {%- if node is none or node is not mapping -%}{{ return({}) }}{%- endif -%}
  {%- set config_meta = (node.get('config') or {}).get('meta') or {} -%}
  {%- set node_meta = node.get('meta') or {} -%}
  {%- set declared = config_meta.get('iceberg_maint') if config_meta.get('iceberg_maint') is not none
        else node_meta.get('iceberg_maint') -%}
  {{ return({} if declared is none else declared) }}
{% endmacro %}


{#- The project's node whose relation is `relation`: a model, snapshot or seed, else a source
    table (its policy is its meta.iceberg_maint too); none for a table the project does not know. -#}
{% macro _iceberg_maint_node_for_relation(relation) %}
  {%- if not execute or graph is not defined -%}{{ return(none) }}{%- endif -%}
  {%- set parts = dbt_iceberg_maint._iceberg_maint_relation_parts(relation) -%}
  {%- for node in graph.nodes.values() -%}
    {%- if node.resource_type in ['model', 'snapshot', 'seed']
          and (node.alias or node.name) | lower == parts.identifier | lower
          and (node.schema or '') | lower == parts.schema | lower -%}
      {{ return(node) }}
    {%- endif -%}
  {%- endfor -%}
  {%- for node in graph.sources.values() -%}
    {%- if (node.identifier or node.name) | lower == parts.identifier | lower
          and (node.schema or '') | lower == parts.schema | lower -%}
      {{ return(node) }}
    {%- endif -%}
  {%- endfor -%}
  {{ return(none) }}
{% endmacro %}


{#- Defaults, overlaid by the model's policy, overlaid by `overrides` (same shape). A section
    given as a mapping is merged key by key; `section: false` disables that operation, and a
    whole policy of `false` disables maintenance (`{enabled: false}`). Anything else that is not
    a mapping is left to _iceberg_maint_policy_shape_errors to report. -#}
{% macro _iceberg_maint_resolved_policy(raw_policy, overrides={}) %}
  {%- set layers = [] -%}
  {%- for layer in [raw_policy, overrides] -%}
    {%- if layer is boolean -%}{%- do layers.append({'enabled': layer}) -%}
    {%- elif layer is mapping -%}{%- do layers.append(layer) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set resolved = {} -%}
  {%- for key, default in dbt_iceberg_maint._iceberg_maint_policy_defaults().items() -%}
    {%- if default is mapping -%}
      {%- set section = default.copy() -%}
      {%- for layer in layers -%}
        {%- set given = layer.get(key) -%}
        {%- if given is mapping -%}{%- do section.update(given) -%}
        {%- elif given is boolean -%}{%- do section.update({'enabled': given}) -%}
        {%- endif -%}
      {%- endfor -%}
      {%- do resolved.update({key: section}) -%}
    {%- else -%}
      {%- set chosen = namespace(value=default) -%}
      {%- for layer in layers -%}
        {%- if layer.get(key) is not none -%}{%- set chosen.value = layer.get(key) -%}{%- endif -%}
      {%- endfor -%}
      {%- do resolved.update({key: chosen.value}) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(resolved) }}
{% endmacro %}


{#- The model's declared `meta.iceberg_maint`: from the running model when relation is none,
    else from the graph node of the relation (a run-operation); {} when there is none. -#}
{% macro _iceberg_maint_declared_policy(relation) %}
  {%- if relation is none -%}
    {%- set meta = config.get('meta') or {} -%}
    {{ return(meta.get('iceberg_maint') or {}) }}
  {%- endif -%}
  {%- set node = dbt_iceberg_maint._iceberg_maint_node_for_relation(relation) -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_model_policy(node)) }}
{% endmacro %}
