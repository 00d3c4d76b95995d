{{ config(schema='naive_runner', meta={'iceberg_maint': lab_policy('naive')}, pre_hook=lab_gate_hook()) }}
{{ lab_batch() }}
