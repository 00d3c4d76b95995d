{#- Not idempotent: every run appends its batch again. A blind re-run of a run whose MERGE
    failed would duplicate it; the runner re-runs only what failed. -#}
{{ config(schema='policy_dbt', incremental_strategy='append') }}
{{ lab_append_batch() }}
