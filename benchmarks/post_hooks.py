"""The recommended post-hooks' cost: `dbt run` of a 20-model project on the embedded runtime with
the README's post-hooks (`apply_table_properties()`, `maintain()`) and its policy, against the same
run without them, in steady state.

Two dbt projects hold the same 20 Iceberg models and write the same tables: an incremental event
log and a customer table, 7 incremental `merge` marts and 5 incremental `append` marts of each
batch (partitioned by day, joined to the customers), and 6 tables rebuilt from the whole history.
Only the hooks project carries the post-hooks and the policy. Each run writes the next batch (a
Spark session setting the models read, so no dbt var forces a re-parse). Warm-up: one run of
each (the first builds create the tables, the first maintenance checks every operation); then
alternating pairs, the order swapped every pair. Steady state: every operation of every table
was checked within its interval_hours (by the warm-up's hooks run), as after any hooks run less
than an interval ago. Then the run a post-hook pays once per interval and table: the tables'
check records are removed and a hooks run decides every operation (reported apart, not in the
goal). Each timed run must succeed and its maintenance results are counted by status, so a run
whose hooks did nothing because they failed cannot pass for a cheap one. Goal: the median hooks
run takes at most 1.2x the median plain run (wall time of the whole `dbt run`).
The hooks write maintenance history (docs/history.md) as users get it by default; `--no-history`
switches it off (var dbt_iceberg_maint_history_enabled: false) to measure what it costs.
Writes benchmarks/results/post_hooks.{json,png}; prints a summary table."""

from __future__ import annotations

import collections
import datetime as dt
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import field, harness
from dbt_iceberg_maint.maintenance.results import parse_result_lines

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAME = "post_hooks"
SCHEMA = "hooks_bench"
GOAL_RATIO = 1.2
# Marts per kind (merge, append, whole-history table): with the event log and the customers, 20
# models; the quick form keeps one of each but merge (two), 6 models: the same paths, a third of the time.
FULL_SHAPE = (7, 5, 6)
QUICK_SHAPE = (2, 1, 1)
ROWS_PER_BATCH = 2000
BATCH_SETTING = "hooks_bench.batch"

# The README's post-hooks and policy, word for word (README.md, "Declare a policy").
HOOKS_CONFIG = """\
    +post-hook:
      - "{{ dbt_iceberg_maint.apply_table_properties() }}"   # reconcile declared properties
      - "{{ dbt_iceberg_maint.maintain() }}"                 # due maintenance only, canonical order
    +meta:
      iceberg_maint:
        isolation_level: snapshot
        commit_retry: {num_retries: 10}
        compaction: {cold_partitions_hours: 6, min_input_files: 5, target_file_size_mb: 256, interval_hours: 6}
        expire_snapshots: {older_than_hours: 168, retain_last: 5, interval_hours: 12}
        remove_orphan_files: {older_than_hours: 72}   # interval_hours: 12 by default
        rewrite_manifests: {min_manifests: 5, interval_hours: 12}
"""

PROJECT = """\
name: {name}
version: "0.1.0"
config-version: 2
profile: {name}
model-paths: ["models"]
models:
  {name}:
    +file_format: iceberg
{hooks}{vars}"""

BATCH = f"cast(${{{BATCH_SETTING}}} as int)"
# A small shop's DAG: an incremental event log (each batch a new day, and corrections to the day
# before, as a daily load brings), a customer dimension, marts that merge per-day aggregates of
# the batch, append the batch's enriched rows, or rebuild whole-history aggregates.
EVENTS = ("{{ config(materialized='incremental', incremental_strategy='append', partition_by=['day']) }}\n"
          f"select cast({BATCH} * {ROWS_PER_BATCH} + id as bigint) as id, {BATCH} as batch,\n"
          f"       date_add(date'2026-01-01', {BATCH} - cast(id % 2 as int)) as day,\n"
          "       cast(id % 200 as int) as customer_id, cast(id % 7 as int) as category,\n"
          "       cast(id % 1000 as double) / 10 as amount\n"
          f"from range({ROWS_PER_BATCH})\n")
CUSTOMERS = ("{{ config(materialized='table') }}\n"
             "select cast(id as int) as customer_id, concat('c', id) as name, cast(id % 5 as int) as segment\n"
             "from range(200)\n")
BATCH_ROWS = (f"select e.*, c.segment from {{{{ ref('events') }}}} e join {{{{ ref('customers') }}}} c "
              f"using (customer_id) where e.batch = {BATCH}")


def merge_model(i: int) -> str:
    return ("{{ config(materialized='incremental', incremental_strategy='merge', unique_key=['day', 'k'], "
            "partition_by=['day']) }}\n"
            f"select day, (customer_id + segment * {i}) % {10 + i} as k, count(*) as events, sum(amount) as amount\n"
            f"from ({BATCH_ROWS}) b group by 1, 2\n")


def append_model(i: int) -> str:
    return ("{{ config(materialized='incremental', incremental_strategy='append', partition_by=['day']) }}\n"
            f"select id, day, customer_id, segment, amount * {i + 1} as amount from ({BATCH_ROWS}) b "
            f"where category <> {i}\n")


def table_model(i: int) -> str:
    return ("{{ config(materialized='table') }}\n"
            f"select c.segment, e.category, dayofmonth(e.day) % {i + 2} as bucket, count(*) as events,\n"
            "       sum(e.amount) as amount\n"
            "from {{ ref('events') }} e join {{ ref('customers') }} c using (customer_id)\n"
            "group by 1, 2, 3\n")


def models(shape: tuple[int, int, int] = FULL_SHAPE) -> dict[str, str]:
    """Events, customers, and `shape` merge marts, append marts and whole-history tables."""
    found = {"events": EVENTS, "customers": CUSTOMERS}
    merges, appends, tables = shape
    found.update({f"merge_{i:02d}": merge_model(i) for i in range(merges)})
    found.update({f"append_{i:02d}": append_model(i) for i in range(appends)})
    found.update({f"table_{i:02d}": table_model(i) for i in range(tables)})
    return found


def write_project(folder: Path, name: str, hooks: bool, shape: tuple[int, int, int], history: bool = True) -> Path:
    """A dbt project in `folder` installing this checkout; `dbt deps` has run in it. history:
    false sets the var that switches the maintenance history off."""
    from dbt_iceberg_maint.runtime.invoke import invoke_dbt

    (folder / "models").mkdir(parents=True)
    (folder / "dbt_project.yml").write_text(PROJECT.format(
        name=name, hooks=HOOKS_CONFIG if hooks else "",
        vars="" if history else "vars:\n  dbt_iceberg_maint_history_enabled: false\n"))
    (folder / "profiles.yml").write_text(field.PROFILE.format(name=name, schema=SCHEMA))
    (folder / "packages.yml").write_text(f"packages:\n  - local: {harness.REPO}\n")
    for model, sql in models(shape).items():
        (folder / "models" / f"{model}.sql").write_text(sql)
    outcome = invoke_dbt(["deps", "--quiet"], project_dir=folder)
    if not outcome.success:
        raise RuntimeError(f"dbt deps failed in {folder}: {outcome.exception}")
    return folder


# What a statement is, for the breakdown of where a hooks run's time goes.
STATEMENT_KINDS = (
    ("call remove_orphan_files", re.compile(r"^call \S+\.remove_orphan_files", re.I)),
    ("call expire_snapshots", re.compile(r"^call \S+\.expire_snapshots", re.I)),
    ("call rewrite_manifests", re.compile(r"^call \S+\.rewrite_manifests", re.I)),
    ("call rewrite_data_files", re.compile(r"^call \S+\.rewrite_data_files", re.I)),
    ("call (other)", re.compile(r"^call ", re.I)),
    ("alter table set tblproperties", re.compile(r"^alter table .* set tblproperties", re.I | re.S)),
    ("show tblproperties", re.compile(r"^show tblproperties", re.I)),
    ("merge into", re.compile(r"^merge into", re.I)),
    ("history insert", re.compile(r"^insert into \S*iceberg_maint_history\b", re.I)),
    ("insert into", re.compile(r"^insert into", re.I)),
    ("create table", re.compile(r"^create (or replace )?table", re.I)),
    ("metadata table query",
     re.compile(r"\.(data_files|delete_files|files|snapshots|partitions|manifests|entries|refs|history)\b", re.I)),
    ("show / describe", re.compile(r"^(show|describe)", re.I)),
)


def statement_kind(sql: str) -> str:
    text = field.LEADING_COMMENTS.sub("", sql).strip()
    for kind, pattern in STATEMENT_KINDS:
        if pattern.search(text):
            return kind
    return "other"


def breakdown(run: field.TimedDbt) -> dict[str, dict[str, float]]:
    """Seconds and statement counts per statement kind."""
    seconds: dict[str, float] = collections.defaultdict(float)
    counts: dict[str, int] = collections.Counter()
    for sql, start, end in run.statements:
        kind = statement_kind(sql)
        counts[kind] += 1
        seconds[kind] += ((end or start) - start) / 1000
    return {kind: {"s": round(seconds[kind], 3), "statements": counts[kind]} for kind in sorted(counts)}


def timed_run(spark: SparkSession, project: Path, batch: int) -> dict[str, Any]:
    spark.conf.set(BATCH_SETTING, str(batch))
    run = field.run_dbt(project, ["run"])
    results = parse_result_lines(run.messages)
    if not run.success:
        raise RuntimeError(f"dbt run in {project.name} (batch {batch}) failed: {run.error} {run.failures}")
    statuses = collections.Counter(f"{r.operation}:{r.status}" for r in results)
    if any(r.status == "failed" for r in results):
        raise RuntimeError(f"maintenance failed in {project.name} (batch {batch}): {dict(statuses)}")
    return {"batch": batch, "wall_s": round(run.wall_s, 3), "sql_span_s": run.sql_span_s,
            "statements": len(run.statements), "maintenance": dict(sorted(statuses.items())),
            "breakdown": breakdown(run)}


def record_checks(spark: SparkSession, shape: tuple[int, int, int], hours_ago: float,
                  operations: tuple[str, ...] | None = None) -> None:
    """Every table as if `operations` (default: all) were last checked `hours_ago`. The tables
    are minutes old, and a never-swept table younger than the orphan window is not swept: the
    lake a post-hook maintains day after day was swept, which these records stand for."""
    from dbt_iceberg_maint.policy.engine import CHECKED_FORMAT, checked_property
    from dbt_iceberg_maint.protocol import OPERATIONS

    at = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=hours_ago)).strftime(CHECKED_FORMAT)
    pairs = ", ".join(f"'{checked_property(op)}' = '{at}'" for op in operations or OPERATIONS)
    for name in models(shape):
        spark.sql(f"alter table {SCHEMA}.{name} set tblproperties ({pairs})")


def forget_checks(spark: SparkSession, shape: tuple[int, int, int]) -> None:
    """Every table as if each operation was last checked a day ago, beyond every interval: the
    next hooks run decides every operation (the run a post-hook pays once per interval and table)."""
    record_checks(spark, shape, hours_ago=25)


def run(warehouse: Path, work: Path, start: harness.RunStart, pairs: int, full_check_runs: int,
        quick: bool, history: bool = True) -> dict[str, Any]:
    from dbt_iceberg_maint.runtime.spark import start_session

    shape = QUICK_SHAPE if quick else FULL_SHAPE
    plain = write_project(work / "plain", "hooks_bench_plain", hooks=False, shape=shape)
    hooked = write_project(work / "hooks", "hooks_bench_hooks", hooks=True, shape=shape, history=history)
    samples: list[dict[str, Any]] = []
    started = time.perf_counter()
    with harness.LoadSampler() as load:
        spark = start_session(warehouse, app_name="bench-post-hooks")
        spark.sparkContext.setLogLevel("ERROR")
        try:
            spark.sql(f"create namespace if not exists {SCHEMA}")
            warm_up = [timed_run(spark, plain, 1), timed_run(spark, hooked, 2)]
            record_checks(spark, shape, hours_ago=0, operations=("remove_orphan_files",))  # as swept by it
            batch = 2
            for pair in range(pairs):
                order = ("plain", "hooks") if pair % 2 == 0 else ("hooks", "plain")
                sample: dict[str, Any] = {"pair": pair, "order": list(order)}
                for side in order:
                    batch += 1
                    sample[side] = timed_run(spark, plain if side == "plain" else hooked, batch)
                samples.append(sample)
                print(f"  post_hooks: pair {pair + 1}/{pairs}: plain {sample['plain']['wall_s']:.1f} s, "
                      f"hooks {sample['hooks']['wall_s']:.1f} s ({time.perf_counter() - started:.0f} s)", flush=True)
            full_checks = []
            for _ in range(full_check_runs):
                forget_checks(spark, shape)
                batch += 1
                full_checks.append(timed_run(spark, hooked, batch))
        finally:
            spark.stop()
    figures = summarize(samples, warm_up, full_checks, shape, quick, load, time.perf_counter() - started, start)
    return {**figures, "maintenance_history": history}


def summarize(samples: list[dict[str, Any]], warm_up: list[dict[str, Any]], full_checks: list[dict[str, Any]],
              shape: tuple[int, int, int], quick: bool,
              load: harness.LoadSampler, duration_s: float, start: harness.RunStart) -> dict[str, Any]:
    plain = harness.median([s["plain"]["wall_s"] for s in samples])
    hooks = harness.median([s["hooks"]["wall_s"] for s in samples])
    ratio = round(hooks / plain, 3) if plain and hooks else None
    full = harness.median([r["wall_s"] for r in full_checks])
    maintenance: collections.Counter[str] = collections.Counter()
    kinds: dict[str, list[float]] = collections.defaultdict(list)
    for sample in samples:
        maintenance.update(sample["hooks"]["maintenance"])
        for kind, figures in sample["hooks"]["breakdown"].items():
            kinds[kind].append(figures["s"])
    return {
        "benchmark": NAME, "quick": quick, "pairs": len(samples),
        "project": {"models": len(models(shape)), "merge_marts": shape[0], "append_marts": shape[1],
                    "history_tables": shape[2], "rows_per_batch": ROWS_PER_BATCH, "threads": 1,
                    "runtime": "embedded (dbt_iceberg_maint.runtime.spark.start_session defaults), "
                               "dbt-spark method: session"},
        "goal": {"hooks_over_plain_max": GOAL_RATIO, "evaluated_on": "median wall time of the whole dbt run"},
        "median_wall_s": {"plain": plain, "hooks": hooks},
        "median_sql_span_s": {side: harness.median([s[side]["sql_span_s"] for s in samples if s[side]["sql_span_s"]])
                              for side in ("plain", "hooks")},
        "ratio": ratio, "goal_met": ratio is not None and ratio <= GOAL_RATIO,
        "hooks_maintenance_results": dict(sorted(maintenance.items())),
        "full_check_runs": {"runs": len(full_checks), "median_wall_s": full,
                            "over_plain": round(full / plain, 3) if full and plain else None, "samples": full_checks},
        "hooks_seconds_by_statement_kind": {k: round(sum(v) / len(samples), 3) for k, v in sorted(kinds.items())},
        "warm_up": warm_up, "samples": samples, "duration_s": round(duration_s, 1),
        **harness.provenance(start, load),
    }


def plot(figures: dict[str, Any], path: Path) -> None:
    plt = harness.pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    pairs = range(1, len(figures["samples"]) + 1)
    for side, color in (("plain", "#2e7d32"), ("hooks", "#c62828")):
        left.plot(pairs, [s[side]["wall_s"] for s in figures["samples"]], "o-", color=color,
                  label=f"{side}: median {figures['median_wall_s'][side]:.1f} s")
    left.set_xlabel("pair")
    left.set_ylabel("dbt run wall time, s")
    left.set_ylim(bottom=0)
    left.set_title(f"{figures['project']['models']} models, hooks/plain = {figures['ratio']} (goal <= {GOAL_RATIO})")
    left.legend(fontsize=8)
    kinds = figures["hooks_seconds_by_statement_kind"]
    names = sorted(kinds, key=kinds.get)
    right.barh(names, [kinds[n] for n in names], color="#fbc02d")
    right.set_xlabel("seconds per hooks run (mean)")
    right.set_title("where a hooks run's statement time goes")
    right.tick_params(axis="y", labelsize=7)
    harness.save_figure(fig, path)


def print_summary(figures: dict[str, Any]) -> None:
    m = figures["median_wall_s"]
    print(f"post_hooks benchmark: {figures['pairs']} pairs, load {figures['machine']['load_average_1m']}, "
          f"{figures['duration_s']} s")
    print(f"  median dbt run: plain {m['plain']:.2f} s, hooks {m['hooks']:.2f} s, ratio {figures['ratio']} "
          f"(goal <= {GOAL_RATIO}: {'met' if figures['goal_met'] else 'MISSED'})")
    print(f"  maintenance results over the timed hooks runs: {figures['hooks_maintenance_results']}")
    full = figures["full_check_runs"]
    print(f"  hooks runs that check every operation (once per interval and table): median {full['median_wall_s']} s, "
          f"{full['over_plain']}x the plain run")
    for kind, seconds in sorted(figures["hooks_seconds_by_statement_kind"].items(), key=lambda kv: -kv[1]):
        print(f"    {kind:<32}{seconds:>8.2f} s per run")


def main() -> None:
    parser = harness.parser(NAME, __doc__, "6 models, 1 timed pair: for the test suite")
    parser.add_argument("--rounds", type=int, default=None, help="timed pairs (default 6; 1 with --quick)")
    parser.add_argument("--no-history", action="store_true",
                        help="the hooks write no maintenance history (var dbt_iceberg_maint_history_enabled: false)")
    args = parser.parse_args()
    pairs = harness.count(parser, "rounds", args.rounds, 6, 1, args)
    start = harness.run_start()
    work = Path(tempfile.mkdtemp(prefix=f"bench-{NAME}-"))
    try:
        figures = run(work / "warehouse", work, start, pairs, 1 if args.quick else 2, args.quick,
                      history=not args.no_history)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    harness.publish(NAME, figures, args.results, plot, print_summary)


if __name__ == "__main__":
    main()
