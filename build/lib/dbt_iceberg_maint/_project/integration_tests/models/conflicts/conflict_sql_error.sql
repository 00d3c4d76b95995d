{#- A plain SQL error (unresolved column): not an Iceberg conflict, never re-run. -#}
{{ config(enabled=var('conflict_scenario', false), materialized='table') }}

select no_such_column from {{ ref('raw_events') }}
