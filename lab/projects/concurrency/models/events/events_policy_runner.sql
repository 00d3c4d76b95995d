{{ config(schema='policy_runner', meta={'iceberg_maint': lab_policy('policy')}, pre_hook=lab_gate_hook()) }}
{{ lab_batch() }}
