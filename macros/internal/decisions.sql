{#- Pure maintenance decisions: which operations, in which order, which are due given the
    table's health (dbt_iceberg_maint.table_health), and the compaction options a policy
    implies. No queries here, so the harness checks them without Spark. -#}

{#- Canonical order (Iceberg's advice): compact data, then position deletes, then expire
    snapshots, then remove orphans, then rewrite manifests; then the table and partition
    statistics, which belong to one snapshot (every rewrite before them commits a new one). -#}
{% macro _iceberg_maint_operation_order() %}
  {{ return(dbt_iceberg_maint._iceberg_maint_protocol().operations) }}
{% endmacro %}

{% macro _iceberg_maint_default_operations() %}
  {{ return(dbt_iceberg_maint._iceberg_maint_protocol().default_operations) }}
{% endmacro %}

{#- Policy section of each operation: the protocol's alias (the policy calls rewrite_data_files `compaction`). -#}
{% macro _iceberg_maint_policy_section(operation) %}
  {%- set aliases = dbt_iceberg_maint._iceberg_maint_protocol().operation_aliases -%}
  {{ return((aliases | dictsort | selectattr(1, 'equalto', operation) | map(attribute=0) | first) or operation) }}
{% endmacro %}


{#- The requested operations in canonical order; `operations` is none (the defaults), a name or
    a list; `compaction` is accepted for rewrite_data_files. Raises on an unknown name. -#}
{% macro _iceberg_maint_requested_operations(operations=none) %}
  {%- set order = dbt_iceberg_maint._iceberg_maint_operation_order() -%}
  {%- if operations is none -%}{{ return(dbt_iceberg_maint._iceberg_maint_default_operations()) }}{%- endif -%}
  {%- set requested = [operations] if operations is string else operations -%}
  {%- if requested is not iterable or requested is mapping -%}
    {{ exceptions.raise_compiler_error("dbt_iceberg_maint: argument `operations` is " ~ operations
          ~ "; expected none, an operation name or a list of them: compaction, " ~ order | join(', ')) }}
  {%- endif -%}
  {%- set names = [] -%}
  {%- for name in requested -%}
    {%- set canonical = 'rewrite_data_files' if name == 'compaction' else name -%}
    {%- if canonical not in order -%}
      {{ exceptions.raise_compiler_error("dbt_iceberg_maint: argument `operations` contains '" ~ name
            ~ "'; allowed: compaction, " ~ order | join(', ')) }}
    {%- endif -%}
    {%- do names.append(canonical) -%}
  {%- endfor -%}
  {{ return(order | select('in', names) | list) }}
{% endmacro %}


{#- Each operation owns its policy defaults, policy checks, due rule and SQL-from-policy, next to
    its procedure (macros/procedures/<operation>.sql: _iceberg_maint_<operation>_defaults,
    _policy_errors, _due, _planned_sql); these dispatch to them by name. Adding an operation:
    its file, plus its name in the protocol's canonical order (and protocol.py). -#}
{% macro _iceberg_maint_operation_macro(operation, part) %}
  {{ return(dbt_iceberg_maint['_iceberg_maint_' ~ operation ~ '_' ~ part]) }}
{% endmacro %}


{#- {'due': bool, 'reason': str} for one operation, from the resolved policy and health. -#}
{% macro _iceberg_maint_due(operation, policy, health) %}
  {%- if operation not in dbt_iceberg_maint._iceberg_maint_operation_order() -%}
    {{ exceptions.raise_compiler_error("dbt_iceberg_maint: unknown operation '" ~ operation ~ "'") }}
  {%- endif -%}
  {%- set due = dbt_iceberg_maint._iceberg_maint_operation_macro(operation, 'due') -%}
  {{ return(due(policy[dbt_iceberg_maint._iceberg_maint_policy_section(operation)], health)) }}
{% endmacro %}


{#- {'sql': CALL text or none, 'reason': why there is nothing to run} for one operation. -#}
{#- force: the thresholds are ignored in the SQL too (the rewrites' min-input-files is 1).
    table_bytes: the current snapshot's total-files-size (the compaction's `partial_progress: auto`). -#}
{% macro _iceberg_maint_planned_sql(relation, operation, policy, cold_scope=none, reference=none, force=false,
    table_bytes=none) %}
  {%- set planned_sql = dbt_iceberg_maint._iceberg_maint_operation_macro(operation, 'planned_sql') -%}
  {{ return(planned_sql(relation, policy[dbt_iceberg_maint._iceberg_maint_policy_section(operation)],
      {'cold_scope': cold_scope, 'reference': reference, 'force': force, 'table_bytes': table_bytes})) }}
{% endmacro %}




{#- Shape problems of a raw `meta.iceberg_maint` mapping: an unknown section or key, or a
    section that is neither a mapping nor true/false. A typo must not silently fall back to the
    defaults. Keys owned by other parts of the package (idempotent, table properties) pass. -#}
{% macro _iceberg_maint_policy_shape_errors(raw_policy, source='meta.iceberg_maint') %}
  {%- if raw_policy is none or raw_policy is boolean -%}{{ return([]) }}{%- endif -%}
  {%- if raw_policy is not mapping -%}
    {{ return([source ~ " is " ~ raw_policy ~ "; expected a mapping, or true/false to switch maintenance on/off"]) }}
  {%- endif -%}
  {%- set defaults = dbt_iceberg_maint._iceberg_maint_policy_defaults() -%}
  {#- Keys owned by other parts (table properties, the runner's idempotent, the lint's lint_ignore). -#}
  {%- set allowed = defaults.keys() | list + dbt_iceberg_maint._iceberg_maint_protocol().policy_other_keys -%}
  {%- set errors = [] -%}
  {%- for key, value in raw_policy.items() -%}
    {%- if key not in allowed -%}
      {%- do errors.append(dbt_iceberg_maint._iceberg_maint_unknown_key_error(source, key, allowed)) -%}
    {%- elif key == 'enabled' -%}
      {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_boolean(source, 'enabled', value)) -%}
    {%- elif defaults[key] is mapping and value is not none -%}
      {%- if value is not mapping and value is not boolean -%}
        {%- do errors.append(source ~ "." ~ key ~ " is " ~ value ~ "; expected a mapping of settings or true/false") -%}
      {%- elif value is mapping -%}
        {%- for name in value.keys() if name not in defaults[key] -%}
          {%- do errors.append(dbt_iceberg_maint._iceberg_maint_unknown_key_error(source ~ "." ~ key, name,
                defaults[key].keys() | list)) -%}
        {%- endfor -%}
        {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_boolean(source ~ '.' ~ key, 'enabled',
              value.get('enabled'))) -%}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(errors) }}
{% endmacro %}


{#- "<owner> has unknown key `k` (did you mean `closest`?); allowed keys: ..." (engine.unknown_key). -#}
{% macro _iceberg_maint_unknown_key_error(owner, key, allowed) %}
  {%- set closest = dbt_iceberg_maint._iceberg_maint_closest_key(key, allowed) -%}
  {%- set hint = " (did you mean `" ~ closest ~ "`?)" if closest is not none else "" -%}
  {{ return(owner ~ " has unknown key `" ~ key ~ "`" ~ hint ~ "; allowed keys: " ~ allowed | join(', ')) }}
{% endmacro %}

{#- Python's difflib.get_close_matches(word, possibilities, n=1, cutoff=0.6), which the Python
    twin calls: the possibility whose ratio 2 * matching characters / total length is highest
    and at least 0.6 (a tie goes to the greater string), or none. -#}
{% macro _iceberg_maint_closest_key(word, possibilities) %}
  {%- if word is not string -%}{{ return(none) }}{%- endif -%}
  {%- set best = namespace(key=none, score=0.0) -%}
  {%- for candidate in possibilities -%}
    {%- set score = 2.0 * dbt_iceberg_maint._iceberg_maint_matching_characters(candidate, word)
          / ((candidate | length) + (word | length)) -%}
    {%- if score >= 0.6 and (best.key is none or score > best.score or (score == best.score and candidate > best.key)) -%}
      {%- set best.key = candidate -%}
      {%- set best.score = score -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return(best.key) }}
{% endmacro %}

{#- difflib.SequenceMatcher(None, a, b)'s matching characters (no junk; strings under 200
    characters): the longest common block (earliest in a, then in b), plus those of the parts
    left and right of it. -#}
{% macro _iceberg_maint_matching_characters(a, b) %}
  {%- set best = namespace(i=0, j=0, size=0, lengths={}) -%}
  {%- for i in range(a | length) -%}
    {%- set lengths = {} -%}
    {%- for j in range(b | length) if b[j] == a[i] -%}
      {%- set k = best.lengths.get(j - 1, 0) + 1 -%}
      {%- do lengths.update({j: k}) -%}
      {%- if k > best.size -%}
        {%- set best.i = i - k + 1 -%}
        {%- set best.j = j - k + 1 -%}
        {%- set best.size = k -%}
      {%- endif -%}
    {%- endfor -%}
    {%- set best.lengths = lengths -%}
  {%- endfor -%}
  {%- if best.size == 0 -%}{{ return(0) }}{%- endif -%}
  {{ return(best.size + dbt_iceberg_maint._iceberg_maint_matching_characters(a[:best.i], b[:best.j])
      + dbt_iceberg_maint._iceberg_maint_matching_characters(a[best.i + best.size:], b[best.j + best.size:])) }}
{% endmacro %}


{#- Policy problems (numbers, strategy) as messages, checked before anything runs, each
    operation's in the canonical order. -#}
{% macro _iceberg_maint_policy_errors(policy) %}
  {%- set errors = [] -%}
  {%- for operation in dbt_iceberg_maint._iceberg_maint_operation_order() -%}
    {%- set section_name = dbt_iceberg_maint._iceberg_maint_policy_section(operation) -%}
    {%- set policy_errors = dbt_iceberg_maint._iceberg_maint_operation_macro(operation, 'policy_errors') -%}
    {%- do errors.extend(policy_errors(policy[section_name])) -%}
    {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_non_negative_errors('policy ' ~ section_name,
          'interval_hours', policy[section_name].interval_hours)) -%}
  {%- endfor -%}
  {%- set gate = policy.cost_gate -%}
  {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_check_boolean('policy cost_gate', 'skip_unchanged',
        gate.skip_unchanged)) -%}
  {%- for key in ['min_new_records', 'min_new_bytes', 'min_interval_hours'] -%}
    {%- do errors.extend(dbt_iceberg_maint._iceberg_maint_non_negative_errors('policy cost_gate', key, gate[key])) -%}
  {%- endfor -%}
  {{ return(errors) }}
{% endmacro %}

{% macro _iceberg_maint_non_negative_errors(owner, key, value) %}
  {%- if value is not none and (value is boolean or value is not number or value < 0) -%}
    {{ return([owner ~ ": argument `" ~ key ~ "` is " ~ value ~ "; expected a number >= 0 or none"]) }}
  {%- endif -%}
  {{ return([]) }}
{% endmacro %}
