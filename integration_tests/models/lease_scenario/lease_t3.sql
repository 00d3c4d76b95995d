{#- Configured in dbt_project.yml (lease_scenario): tests/integration/test_leases.py. -#}
select cast(id as bigint) as id, date_add(date'2026-01-01', cast(id % 3 as int)) as day from range(30)
