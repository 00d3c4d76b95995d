{#- Turn a model's `meta.iceberg_maint` policy into the Iceberg table properties it declares.
    isolation_level -> write.{delete,update,merge}.isolation-level
    commit_retry    -> commit.retry.{num-retries,min-wait-ms,max-wait-ms,total-timeout-ms}
    expire_snapshots.retain_metadata_files -> write.metadata.{delete-after-commit.enabled,
                       previous-versions-max}, what each expiry that ran sets too (a value the
                       maintenance policy checks refuse declares nothing here)
    properties      -> as given (values as strings)
    Invalid input raises one compiler error listing every problem. -#}
{% macro declared_table_properties(policy) %}
  {%- set errors = dbt_iceberg_maint.table_properties_policy_errors(policy) -%}
  {%- if errors | length > 0 -%}
    {{ exceptions.raise_compiler_error('dbt_iceberg_maint: invalid meta.iceberg_maint table-property policy: '
          ~ errors | join('; ')) }}
  {%- endif -%}
  {{ return(dbt_iceberg_maint._iceberg_maint_policy_properties(policy)[0]) }}
{% endmacro %}

{#- Every problem of the policy, as messages naming the key, the value and what is allowed. -#}
{% macro table_properties_policy_errors(policy) %}
  {{ return(dbt_iceberg_maint._iceberg_maint_policy_properties(policy)[1]) }}
{% endmacro %}

{% macro _iceberg_maint_isolation_levels() %}{{ return(['serializable', 'snapshot']) }}{% endmacro %}
{% macro _iceberg_maint_row_operations() %}{{ return(['delete', 'update', 'merge']) }}{% endmacro %}
{% macro _iceberg_maint_commit_retry_keys() %}
  {{ return({'num_retries': 'commit.retry.num-retries', 'min_wait_ms': 'commit.retry.min-wait-ms',
             'max_wait_ms': 'commit.retry.max-wait-ms', 'total_timeout_ms': 'commit.retry.total-timeout-ms'}) }}
{% endmacro %}

{% macro _iceberg_maint_property_value(value) %}
  {%- if value is boolean -%}{{ return('true' if value else 'false') }}{%- endif -%}
  {{ return(value | string) }}
{% endmacro %}

{#- [properties, errors] -#}
{% macro _iceberg_maint_policy_properties(policy) %}
  {%- set props = {} -%}
  {%- set errors = [] -%}
  {%- set policy = policy if policy is not none else {} -%}
  {%- if policy is not mapping -%}
    {{ return([{}, ["meta.iceberg_maint = " ~ tojson(policy) ~ " is not allowed; expected a mapping"]]) }}
  {%- endif -%}
  {%- set levels = dbt_iceberg_maint._iceberg_maint_isolation_levels() -%}
  {%- set operations = dbt_iceberg_maint._iceberg_maint_row_operations() -%}

  {%- set isolation = policy.get('isolation_level') -%}
  {%- if isolation is none -%}
  {%- elif isolation is string -%}
    {%- if isolation | lower in levels -%}
      {%- for operation in operations -%}
        {%- do props.update({'write.' ~ operation ~ '.isolation-level': isolation | lower}) -%}
      {%- endfor -%}
    {%- else -%}
      {%- do errors.append("isolation_level = '" ~ isolation ~ "' is not allowed; expected one of "
            ~ levels | join(', ') ~ " (or a mapping of delete/update/merge to one of them)") -%}
    {%- endif -%}
  {%- elif isolation is mapping -%}
    {%- for operation, level in isolation.items() -%}
      {%- if operation not in operations -%}
        {%- do errors.append("isolation_level." ~ operation ~ " is not an operation; expected keys "
              ~ operations | join(', ')) -%}
      {%- elif level is not string or level | lower not in levels -%}
        {%- do errors.append("isolation_level." ~ operation ~ " = " ~ tojson(level)
              ~ " is not allowed; expected one of " ~ levels | join(', ')) -%}
      {%- else -%}
        {%- do props.update({'write.' ~ operation ~ '.isolation-level': level | lower}) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- else -%}
    {%- do errors.append("isolation_level = " ~ tojson(isolation) ~ " is not allowed; expected one of "
          ~ levels | join(', ') ~ " or a mapping of delete/update/merge to one of them") -%}
  {%- endif -%}

  {%- set retry = policy.get('commit_retry') -%}
  {%- set retry_keys = dbt_iceberg_maint._iceberg_maint_commit_retry_keys() -%}
  {%- if retry is none -%}
  {%- elif retry is mapping -%}
    {%- for key, value in retry.items() -%}
      {%- if key not in retry_keys -%}
        {%- do errors.append("commit_retry." ~ key ~ " is not a commit retry setting; expected keys "
              ~ retry_keys.keys() | list | join(', ')) -%}
      {%- elif value is boolean or value is not integer or value <= 0 -%}
        {%- do errors.append("commit_retry." ~ key ~ " = " ~ tojson(value)
              ~ " is not allowed; expected a positive integer") -%}
      {%- elif value > 2147483647 -%}
        {#- Iceberg parses these as a Java int at every commit: a larger one would fail them all. -#}
        {%- do errors.append("commit_retry." ~ key ~ " = " ~ tojson(value)
              ~ " is not allowed; expected at most 2147483647 (Iceberg reads it as an int)") -%}
      {%- else -%}
        {%- do props.update({retry_keys[key]: value | string}) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- else -%}
    {%- do errors.append("commit_retry = " ~ tojson(retry) ~ " is not allowed; expected a mapping with keys "
          ~ retry_keys.keys() | list | join(', ')) -%}
  {%- endif -%}

  {#- Each expiry that ran sets these too: declared here, a `properties` entry that contradicts them
      is refused, and so is a value the expiry itself would refuse. -#}
  {%- set expiry = policy.get('expire_snapshots') -%}
  {%- set kept = expiry.get('retain_metadata_files') if expiry is mapping else none -%}
  {%- set kept_errors = dbt_iceberg_maint._iceberg_maint_retain_metadata_files_errors(kept) -%}
  {%- do errors.extend(kept_errors) -%}
  {%- set retention = {} if kept_errors
        else dbt_iceberg_maint._iceberg_maint_metadata_retention({'retain_metadata_files': kept}) -%}

  {%- set free = policy.get('properties') -%}
  {%- if free is none -%}
  {%- elif free is mapping -%}
    {%- for key, value in free.items() -%}
      {%- set key_text = key | string -%}
      {%- if key is not string or key_text | trim == '' -%}
        {%- do errors.append("properties key " ~ tojson(key)
              ~ " is not allowed; expected a non-empty property name") -%}
      {%- elif value is none or value is mapping or (value is iterable and value is not string) -%}
        {%- do errors.append("properties." ~ key_text ~ " = " ~ tojson(value)
              ~ " is not allowed; expected a string, number or boolean") -%}
      {%- elif key_text in props and props[key_text] != dbt_iceberg_maint._iceberg_maint_property_value(value) -%}
        {%- do errors.append("properties." ~ key_text ~ " = " ~ tojson(value) ~ " contradicts '" ~ props[key_text]
              ~ "' declared by isolation_level/commit_retry; declare it once") -%}
      {%- elif key_text in retention and retention[key_text] != dbt_iceberg_maint._iceberg_maint_property_value(value) -%}
        {%- do errors.append("properties." ~ key_text ~ " = " ~ tojson(value) ~ " contradicts '" ~ retention[key_text]
              ~ "' that expire_snapshots.retain_metadata_files sets; declare it once") -%}
      {%- else -%}
        {%- do props.update({key_text: dbt_iceberg_maint._iceberg_maint_property_value(value)}) -%}
      {%- endif -%}
    {%- endfor -%}
  {%- else -%}
    {%- do errors.append("properties = " ~ tojson(free)
          ~ " is not allowed; expected a mapping of property name to value") -%}
  {%- endif -%}
  {%- do props.update(retention) -%}
  {{ return([props, errors]) }}
{% endmacro %}
