{{ config(schema='policy_runner', meta={'iceberg_maint': lab_policy('policy')}) }}
{{ lab_batch() }}
