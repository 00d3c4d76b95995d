{# merge_conflicts: one writer's MERGE into its own day partition (var merge_day). Every round
   updates the day's 20 rows. merge_barrier holds the first task of each writer until both
   writers' jobs are running, i.e. both MERGEs have planned before either can commit. #}
{%- set day = var('merge_day') -%}
{{ config(
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='id',
    partition_by=['day'],
    incremental_predicates=["DBT_INTERNAL_DEST.day = date'" ~ day ~ "'"] if var('merge_predicates') else none
) }}
select cast(datediff(date'{{ day }}', date'2026-01-01') * 1000 + id as bigint) as id,
       date'{{ day }}' as day,
       cast({{ var('merge_round') }} as int) as merged_round
from range(20)
where merge_barrier('{{ var("merge_round") }}', '{{ var("merge_party") }}')
