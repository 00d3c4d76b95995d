{{ config(schema='naive_runner', meta={'iceberg_maint': lab_policy('naive')}) }}
{{ lab_batch() }}
