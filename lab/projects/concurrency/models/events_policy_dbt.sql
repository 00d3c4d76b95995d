{{ config(schema='policy_dbt', meta={'iceberg_maint': lab_policy('policy')}) }}
{{ lab_batch() }}
