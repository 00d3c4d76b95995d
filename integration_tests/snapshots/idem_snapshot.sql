{#- A dbt snapshot (tests/integration/test_idempotency_table.py): batch 2 changes every second
    user's country; re-running batch 2 after its commit landed records nothing new. Only built
    with --vars '{idempotency_scenario: true}', on a catalog with views (dbt-spark's snapshot
    replaces a staging view). -#}
{% snapshot idem_snapshot %}
{%- set seed_batch = var('batch', env_var('DBT_ICEBERG_MAINT_BATCH', '1') if execute else '1') %}
{{ config(
    enabled=var('idempotency_scenario', false),
    file_format='iceberg',
    unique_key='user_id',
    strategy='check',
    check_cols=['country'],
) }}
select user_id, case when {{ seed_batch }} >= 2 and user_id % 2 = 0 then 'XX' else country end as country
from {{ ref('raw_users') }}
{% endsnapshot %}
