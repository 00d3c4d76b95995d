{{ config(schema='naive_dbt', meta={'iceberg_maint': lab_policy('naive')}) }}
{{ lab_batch() }}
