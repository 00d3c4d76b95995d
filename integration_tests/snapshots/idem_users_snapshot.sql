{#- A snapshot (tests/integration/test_idempotency_table.py): a second run after a landed first
    one finds nothing new. Only built with --vars '{idempotency_scenario: true}'. -#}
{% snapshot idem_users_snapshot %}
{{ config(
    enabled=var('idempotency_scenario', false),
    target_schema=target.schema,
    unique_key='user_id',
    strategy='check',
    check_cols=['country'],
    file_format='iceberg',
) }}

select user_id, country from {{ ref('raw_users') }}
{% endsnapshot %}
