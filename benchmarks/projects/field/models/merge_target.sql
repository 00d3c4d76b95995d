{# merge_conflicts: one writer's MERGE into its own day partition. The writer sets the day, its
   name, the round and the predicate as Spark session settings, which Spark substitutes for
   ${...} (spark.sql.variable.substitute): dbt's vars would change every round and make dbt
   re-parse the project every run. Every round updates the day's 20 rows. The predicate is
   DBT_INTERNAL_DEST.day = date'<day>' or, for the variant without one, `true` (Spark's optimizer
   drops it: the target scan then has no filter, exactly as without incremental_predicates).
   merge_barrier holds the first task of each writer until both writers' jobs are running, i.e.
   both MERGEs have planned before either can commit. #}
{{ config(
    materialized='incremental',
    incremental_strategy='merge',
    unique_key='id',
    partition_by=['day'],
    incremental_predicates=["${field_bench.merge_predicate}"]
) }}
select cast(datediff(date'${field_bench.merge_day}', date'2026-01-01') * 1000 + id as bigint) as id,
       date'${field_bench.merge_day}' as day,
       cast(${field_bench.merge_round} as int) as merged_round
from range(20)
where merge_barrier('${field_bench.merge_round}', '${field_bench.merge_party}')
