"""P5 effect: two copies of one day-partitioned table receive the same small commits (an
append of a day's events plus a few late ones for the day before, as an incremental model
writes them); the maintained copy is maintained every few commits by `dbt run-operation
iceberg_maintenance` with its model's policy, the other never. Measured: data files over the
commits, the latency of a typical dashboard query (last 7 days, per day: events, users, revenue)
on both copies, alternating, and compaction throughput (bytes rewritten per second of
rewrite_data_files) vs a pyarrow proxy reading and rewriting the same Parquet files, on those
small commits and on a bulk table of bigger files. On that bulk table, at two sizes, our default
compaction options (as maintain plans them for the table's size: `partial_progress: auto`) against
Iceberg's option sets on the same table state: the median bytes/s of each, and ours over the best
(goal >= 0.9); beside them, the options a table above `partial_progress_above_mb` gets (partial
progress, a commit per group), over the best too (no goal: the figure of the long-rewrite setting).

Maintenance makes a sawtooth: files pile up between runs and drop at each. So the file counts are
sampled after every commit (after the maintenance where one ran) and the query latency right
before and right after every maintenance run (and once after the first commit); the figures are
the time averages over the whole commit sequence (files: mean over commits; latency: the
piecewise-linear path through the samples, averaged over commits) beside the best point (just
after a maintenance run) and the final one.
Writes benchmarks/results/effect.{json,png}; prints a summary table."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import field, harness
from dbt_iceberg_maint.maintenance.results import parse_result_lines
from dbt_iceberg_maint.policy.compaction import compaction_options, uses_partial_progress
from dbt_iceberg_maint.policy.operations import OPERATIONS
from dbt_iceberg_maint.policy.sql import TableRef, map_literal, rewrite_data_files_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MAINTAINED = "effect_maintained"
UNMAINTAINED = "effect_unmaintained"
# Hourly incremental runs: 24 commits a simulated day.
COMMITS_PER_DAY = 24
ROWS_PER_COMMIT = 1000
LATE_ROWS_PER_COMMIT = 100
GOALS = {"speedup_min": 3.0, "fewer_files_min_pct": 95.0, "throughput_over_proxy_min": 0.5,
         "ours_over_best_iceberg_min": 0.9}
BULK = "effect_bulk"
# The bulk phase: files x rows per file, in 8 day partitions, at two sizes (about 10 and 40 MB):
# as the bytes grow, the compaction's fixed costs (planning, a job and a commit per file group)
# stop dominating and its per-byte rate shows. Each day partition is one file group (far below
# max-file-group-size-bytes), so 8 groups: enough for parallel group rewrites to matter.
BULK_SHAPES = ({"files": 24, "rows_per_file": 300_000, "days": 8},
               {"files": 24, "rows_per_file": 1_200_000, "days": 8})
BULK_SHAPES_QUICK = ({"files": 8, "rows_per_file": 20_000, "days": 4},)
# The bulk policy (every other compaction setting at its default); maintain runs it with force.
BULK_POLICY = {"min_input_files": 2}
OURS = "ours"
# What a table at or above partial_progress_above_mb gets (partial progress: one group at a time,
# a commit each), sent as the same CALL directly: ours too, so never the "best Iceberg set".
OURS_ABOVE_THRESHOLD = "ours_above_threshold"
# Iceberg 1.10's option sets compared with ours on the same table state: its defaults (no partial
# progress: up to 5 groups rewritten at once, one commit at the end), that with one group at a
# time, partial progress at its defaults (5 at once, groups committed in up to 10 commits by the
# rewrite threads themselves) and at 2 or 4 groups at once with one commit per group.
ICEBERG_OPTION_SETS: dict[str, dict[str, str]] = {
    "iceberg_defaults": {},
    "serial_one_commit": {"max-concurrent-file-group-rewrites": "1"},
    "partial_progress_defaults": {"partial-progress.enabled": "true"},
    "parallel_2_group_commits": {"partial-progress.enabled": "true", "partial-progress.max-failed-commits": "0",
                                 "max-concurrent-file-group-rewrites": "2", "partial-progress.max-commits": "10000"},
    "parallel_4_group_commits": {"partial-progress.enabled": "true", "partial-progress.max-failed-commits": "0",
                                 "max-concurrent-file-group-rewrites": "4", "partial-progress.max-commits": "10000"},
}


def trapezoid_mean(points: list[tuple[float, float]]) -> float | None:
    """The mean over x of the piecewise-linear path through `points` (sorted by x; equal x values
    are a jump). One point: its value; none: None."""
    if not points:
        return None
    span = points[-1][0] - points[0][0]
    if span == 0:
        return sum(y for _x, y in points) / len(points)
    area = sum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False))
    return area / span


PHASES = ("start", "before", "after")  # a checkpoint's place at its commit: before/after maintenance


def latency_figures(checkpoints: list[dict[str, Any]]) -> dict[str, Any]:
    """Time-averaged median latency per copy over the commits (checkpoints in commit order,
    before before after at one commit), the speedup of those averages, and the best and final
    checkpoints just after a maintenance run."""
    ordered = sorted(checkpoints, key=lambda c: (c["commit"], PHASES.index(c["phase"])))
    averages = {key: trapezoid_mean([(c["commit"], c["median_s"][key]) for c in ordered])
                for key in ("maintained", "unmaintained")}
    after = [c for c in ordered if c["phase"] == "after" and c["speedup"] is not None]
    maintained, unmaintained = averages["maintained"], averages["unmaintained"]
    return {"time_averaged": {"median_s": averages,
                              "speedup": round(unmaintained / maintained, 2) if maintained and unmaintained else None},
            "best": max(after, key=lambda c: c["speedup"]) if after else None,
            "final": ordered[-1] if ordered else None}


def file_figures(over_commits: list[dict[str, int]]) -> dict[str, Any]:
    """Files per copy: the mean over the commits (one sample per commit, after its maintenance)
    beside the best point (fewest maintained files relative to the unmaintained copy) and the final one."""
    def fewer(point: dict[str, int]) -> float | None:
        return round(100 * (1 - point["maintained"] / point["unmaintained"]), 1) if point["unmaintained"] else None

    means = {key: sum(p[key] for p in over_commits) / len(over_commits) for key in ("maintained", "unmaintained")}
    best = max(over_commits, key=lambda p: fewer(p) or 0.0)
    final = over_commits[-1]
    return {"time_averaged": {**{k: round(v, 1) for k, v in means.items()},
                              "fewer_pct": round(100 * (1 - means["maintained"] / means["unmaintained"]), 1)
                              if means["unmaintained"] else None},
            "best": {**best, "fewer_pct": fewer(best)}, "final": final, "fewer_pct": fewer(final),
            "over_commits": over_commits}


def create(spark: SparkSession) -> None:
    for name in (MAINTAINED, UNMAINTAINED):
        spark.sql(f"drop table if exists {field.table(name)} purge")
        spark.sql(f"create table {field.table(name)} (id bigint, user_id bigint, day date, amount double) "
                  "using iceberg partitioned by (day)")


def commit_sql(name: str, commit: int) -> str:
    """Commit `commit`: ROWS_PER_COMMIT events of the current simulated day and
    LATE_ROWS_PER_COMMIT late ones of the day before: one file per partition it touches."""
    size = ROWS_PER_COMMIT + LATE_ROWS_PER_COMMIT
    day = commit // COMMITS_PER_DAY
    first = commit * size
    return (f"insert into {field.table(name)} select id, id % 997, "
            f"date_add(date'2026-01-01', {day} - cast(id - {first} >= {ROWS_PER_COMMIT} and {day} > 0 as int)), "
            f"(id % 1000) / 10.0 from range({first}, {first + size})")


def query_sql(name: str, last_day: int) -> str:
    return (f"select day, count(*) as events, count(distinct user_id) as users, round(sum(amount), 2) as revenue "
            f"from {field.table(name)} where day >= date_add(date'2026-01-01', {last_day - 6}) "
            "group by day order by day")


def data_files(spark: SparkSession, name: str) -> dict[str, tuple[int, str]]:
    """path -> (size, partition day) of the table's current data files."""
    rows = spark.sql(f"select file_path, file_size_in_bytes, cast(partition.day as string) "
                     f"from {field.table(name)}.data_files").collect()
    return {r[0]: (int(r[1]), r[2]) for r in rows}


def file_count(spark: SparkSession, name: str) -> int:
    return int(spark.sql(f"select count(*) from {field.table(name)}.data_files").collect()[0][0])


def maintain(spark: SparkSession, project: Path) -> dict[str, Any]:
    before = data_files(spark, MAINTAINED)
    run = field.run_dbt(project, ["run-operation", "dbt_iceberg_maint.iceberg_maintenance", "--args",
                                  json.dumps({"select": MAINTAINED})])
    results = {r.operation: r for r in parse_result_lines(run.messages)}
    if not run.success:
        raise RuntimeError(f"iceberg_maintenance failed: {run.error}")
    after = data_files(spark, MAINTAINED)
    rewritten = {path: before[path] for path in before.keys() - after.keys()}
    compaction = results.get("rewrite_data_files")
    return {
        "end_to_end_s": round(run.wall_s, 3),
        "operations": {op: {"status": r.status, "duration_ms": r.duration_ms, "reason": r.reason,
                            "metrics": {k: v for k, v in r.metrics.items() if not isinstance(v, list)}}
                       for op, r in results.items()},
        "files_before": len(before), "files_after": len(after),
        "rewritten_input_files": rewritten,
        "compaction_ms": compaction.duration_ms if compaction and compaction.status == "success" else None,
        "compaction_bytes": int(compaction.metrics.get("rewritten_bytes_count", 0))
        if compaction and compaction.status == "success" else 0,
    }


def pyarrow_proxy(files: dict[str, tuple[int, str]], out: Path) -> dict[str, float]:
    """Read the same Parquet files and write one file per partition (zstd, Iceberg's default
    codec): what the rewrite would cost without Spark and Iceberg."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    by_day: dict[str, list[str]] = defaultdict(list)
    for path, (_size, day) in files.items():
        by_day[day].append(path.removeprefix("file:"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for i, (_day, paths) in enumerate(sorted(by_day.items())):
        tables = [pq.read_table(p) for p in paths]
        # Files Spark wrote and files a rewrite wrote differ in declared nullability only.
        schema = pa.schema([f.with_nullable(True) for f in tables[0].schema])
        pq.write_table(pa.concat_tables([t.cast(schema) for t in tables]), out / f"part-{i}.parquet",
                       compression="zstd")
    elapsed = time.perf_counter() - started
    shutil.rmtree(out, ignore_errors=True)
    return {"seconds": elapsed, "bytes": float(sum(size for size, _day in files.values()))}


def bulk_table(spark: SparkSession, files: int, rows_per_file: int, days: int) -> None:
    """`files` appends of `rows_per_file` rows, one file each, spread over `days` day partitions."""
    name = field.table(BULK)
    spark.sql(f"drop table if exists {name} purge")
    spark.sql(f"create table {name} (id bigint, user_id bigint, day date, amount double) "
              "using iceberg partitioned by (day)")
    for i in range(files):
        first = i * rows_per_file
        spark.sql(f"insert into {name} select /*+ REPARTITION(1) */ id, id % 997, "
                  f"date_add(date'2026-01-01', {i % days}), (id % 1000) / 10.0 "
                  f"from range({first}, {first + rows_per_file})")


def current_snapshot(spark: SparkSession, name: str) -> int:
    return int(spark.sql(f"select snapshot_id from {field.table(name)}.history where is_current_ancestor "
                         "order by made_current_at desc limit 1").collect()[0][0])


def snapshot_count(spark: SparkSession, name: str) -> int:
    return int(spark.sql(f"select count(*) from {field.table(name)}.snapshots").collect()[0][0])


def table_bytes(spark: SparkSession, name: str) -> int:
    """The current snapshot's total-files-size: what `partial_progress: auto` decides by."""
    return int(spark.sql(f"select summary['total-files-size'] from {field.table(name)}.snapshots "
                         f"where snapshot_id = {current_snapshot(spark, name)}").collect()[0][0])


def policy_options(size: int | None) -> dict[str, Any]:
    """Our default compaction options for the bulk policy on a table of `size` bytes (None: one
    above partial_progress_above_mb), as the Python engine plans them under `force` (the macro
    engine plans the same: tests/policy_cases.yml)."""
    section = {**OPERATIONS["rewrite_data_files"].defaults, **BULK_POLICY}
    return compaction_options(section, uses_partial_progress(section, size), force=True)


def call_statement(run: field.TimedDbt) -> tuple[str, float] | None:
    """maintain's rewrite_data_files CALL (without dbt's comments) and its seconds."""
    for sql, begun, ended in reversed(run.statements):
        text = field.LEADING_COMMENTS.sub("", sql).strip()
        if ".rewrite_data_files(" in text and text.upper().startswith("CALL") and ended is not None:
            return text, (ended - begun) / 1000
    return None


def compact_once(spark: SparkSession, project: Path, option_set: str, options: dict[str, str]) -> dict[str, Any]:
    """One compaction of the bulk table: ours through `dbt run-operation maintain` (the CALL's
    own seconds, from dbt's statement events), an Iceberg option set as the same CALL sent
    directly. A failed CALL is recorded, not raised: an unsafe option set failing is a finding."""
    snapshots = snapshot_count(spark, BULK)
    load = round(os.getloadavg()[0], 2)
    record: dict[str, Any] = {"option_set": option_set, "load_1m": load}
    if option_set == OURS:
        args = {"relation": f"{field.SCHEMA}.{BULK}", "operations": ["rewrite_data_files"], "force": True,
                "policy": {"compaction": BULK_POLICY}}
        run = field.run_dbt(project, ["run-operation", "dbt_iceberg_maint.maintain", "--args", json.dumps(args)])
        result = {r.operation: r for r in parse_result_lines(run.messages)}.get("rewrite_data_files")
        call = call_statement(run)
        if not run.success or result is None or result.status != "success" or call is None:
            record["error"] = f"{run.error} {result}"[:500]
        else:
            record.update({"bytes": int(result.metrics.get("rewritten_bytes_count", 0)), "seconds": call[1],
                           "sql": call[0]})
    else:
        sql = rewrite_data_files_sql(TableRef(field.SCHEMA, BULK), options=options)
        begun = time.perf_counter()
        try:
            row = spark.sql(sql).collect()[0].asDict()
        except Exception as exc:  # noqa: BLE001 - the option set's failure is the figure
            record["error"] = str(exc).splitlines()[0][:500]
        else:
            record.update({"bytes": int(row["rewritten_bytes_count"]), "seconds": time.perf_counter() - begun,
                           "sql": sql})
    record["commits"] = snapshot_count(spark, BULK) - snapshots
    record["files_after"] = file_count(spark, BULK)
    if "seconds" in record:
        record["bytes_per_s"] = record["bytes"] / record["seconds"] if record["seconds"] else None
        record["seconds"] = round(record["seconds"], 3)
    return record


def option_sets(size: int) -> dict[str, dict[str, str]]:
    """Ours (the policy's options for the table's size), ours above the threshold and Iceberg's
    option sets, each with our min-input-files (and target size when set) so every one rewrites
    the same files: only how groups run and commit differ."""
    ours = policy_options(size)
    same = {k: v for k, v in ours.items() if k in ("min-input-files", "target-file-size-bytes")}
    return {OURS: ours, OURS_ABOVE_THRESHOLD: policy_options(None),
            **{name: {**same, **extra} for name, extra in ICEBERG_OPTION_SETS.items()}}


def compare_options(spark: SparkSession, project: Path, days: int, reps: int) -> dict[str, Any]:
    """Every option set `reps` times on the same table state (rolled back to the snapshot before
    the first compaction after each one), the order rotated each repetition; the median bytes/s
    of each, the best Iceberg set, and ours (and ours above the threshold) over it."""
    size = table_bytes(spark, BULK)
    sets = option_sets(size)
    start = current_snapshot(spark, BULK)
    before = data_files(spark, BULK)
    names = list(sets)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    identical_starts = 0
    # One untimed compaction first: the first one in a Spark application pays the JVM's warm-up.
    warmup = compact_once(spark, project, OURS, sets[OURS])
    spark.sql(f"CALL system.rollback_to_snapshot('{field.SCHEMA}.{BULK}', {start})")
    for rep in range(reps):
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            identical_starts += data_files(spark, BULK) == before
            runs[name].append(compact_once(spark, project, name, sets[name]))
            spark.sql(f"CALL system.rollback_to_snapshot('{field.SCHEMA}.{BULK}', {start})")
    figures: dict[str, Any] = {}
    for name in names:
        done = [r for r in runs[name] if "error" not in r]
        figures[name] = {"options": sets[name], "runs": runs[name], "failures": len(runs[name]) - len(done),
                         "median_bytes_per_s": harness.median([r["bytes_per_s"] for r in done]),
                         "median_s": harness.median([r["seconds"] for r in done]),
                         "median_commits": harness.median([r["commits"] for r in done]),
                         "all_files_rewritten": all(r["bytes"] == sum(s for s, _d in before.values())
                                                    and r["files_after"] == days for r in done)}
    # Only a set that never failed and always rewrote every file can be the best (Iceberg's own
    # max-failed-commits lets a partial-progress call "succeed" with groups left uncommitted).
    ranked = [n for n in names if n not in (OURS, OURS_ABOVE_THRESHOLD) and figures[n]["failures"] == 0
              and figures[n]["all_files_rewritten"] and figures[n]["median_bytes_per_s"]]
    best = max(ranked, key=lambda n: figures[n]["median_bytes_per_s"]) if ranked else None

    def over_best(name: str) -> float | None:
        bps = figures[name]["median_bytes_per_s"]
        return round(bps / figures[best]["median_bytes_per_s"], 3) if best and bps else None

    ratio = over_best(OURS)
    loads = [r["load_1m"] for rs in runs.values() for r in rs]
    return {"repetitions": reps, "identical_start_states": identical_starts, "runs": reps * len(names),
            "warmup": warmup, "table_bytes": size,
            "ours_partial_progress": "partial-progress.enabled" in sets[OURS],
            "option_sets": figures, "best_iceberg": best, "ours_over_best": ratio,
            "ours_above_threshold_over_best": over_best(OURS_ABOVE_THRESHOLD),
            "met": ratio is not None and ratio >= GOALS["ours_over_best_iceberg_min"],
            "load_1m": {"median": harness.median(loads), "max": max(loads)},
            "policy_options_in_maintain_call": all(
                map_literal(sets[OURS]) in r.get("sql", "") for r in runs[OURS] if "error" not in r)}


def bulk_throughput(spark: SparkSession, project: Path, work: Path, files: int, rows_per_file: int, days: int,
                    reps: int) -> dict[str, Any]:
    """Compaction throughput on bigger files: `files` appends of `rows_per_file` rows (one file per
    day partition each, over `days` partitions: one file group each), compacted through
    `dbt run-operation maintain`, and the pyarrow proxy on the same files. Separates Spark's
    per-byte rate from the fixed cost that dominates the small commits above. Then our default
    options against Iceberg's option sets on that same table state (`compare_options`)."""
    bulk_table(spark, files, rows_per_file, days)
    before = data_files(spark, BULK)
    comparison = compare_options(spark, project, days, reps)
    ours = comparison["option_sets"][OURS]
    if ours["failures"]:
        raise RuntimeError(f"bulk compaction failed: {[r['error'] for r in ours['runs'] if 'error' in r]}")
    proxy = pyarrow_proxy(before, work / "proxy")
    spark.sql(f"drop table if exists {field.table(BULK)} purge")
    # Spark's figure: our options' median compaction (every run rewrote the same bytes).
    return {"files": files, "rows_per_file": rows_per_file, "days": days, "files_before": len(before),
            "files_after": ours["runs"][0]["files_after"],
            **throughput(ours["runs"][0]["bytes"], ours["median_s"], proxy["bytes"], proxy["seconds"]),
            "options": comparison}


def throughput(spark_bytes: int, spark_s: float, proxy_bytes: float, proxy_s: float) -> dict[str, Any]:
    """Spark's compaction rate beside the pyarrow proxy's on the same files, and their ratio."""
    spark_bps = spark_bytes / spark_s if spark_s else None
    proxy_bps = proxy_bytes / proxy_s if proxy_s else None
    return {"spark_bytes": spark_bytes, "spark_compaction_s": round(spark_s, 3), "spark_bytes_per_s": spark_bps,
            "proxy_bytes": proxy_bytes, "proxy_s": round(proxy_s, 3), "proxy_bytes_per_s": proxy_bps,
            "spark_over_proxy": round(spark_bps / proxy_bps, 3) if spark_bps and proxy_bps else None}


def timed_queries(spark: SparkSession, last_day: int, reps: int) -> dict[str, Any]:
    """Both copies, alternating which goes first; the answers must be equal."""
    samples: dict[str, list[float]] = {MAINTAINED: [], UNMAINTAINED: []}
    answers: dict[str, list[tuple[Any, ...]]] = {}
    for rep in range(reps):
        order = (MAINTAINED, UNMAINTAINED) if rep % 2 == 0 else (UNMAINTAINED, MAINTAINED)
        for name in order:
            started = time.perf_counter()
            rows = spark.sql(query_sql(name, last_day)).collect()
            samples[name].append(time.perf_counter() - started)
            answers[name] = [tuple(r) for r in rows]
    maintained, unmaintained = harness.median(samples[MAINTAINED]), harness.median(samples[UNMAINTAINED])
    return {"median_s": {"maintained": maintained, "unmaintained": unmaintained},
            "speedup": round(unmaintained / maintained, 2) if maintained and unmaintained else None,
            "same_answer": answers[MAINTAINED] == answers[UNMAINTAINED], "answer_rows": len(answers[MAINTAINED]),
            "samples_s": {k: [round(v, 4) for v in vs] for k, vs in samples.items()}}


def run(lake: field.Lake, work: Path, start: harness.RunStart, commits: int, maintain_every: int, reps: int,
        quick: bool, bulk_reps: int) -> dict[str, Any]:
    """The timeline: the two copies created, the commits with their checkpoints and maintenance
    runs (`_commit_timeline`), the snapshots counted, the bulk tables compacted (`_bulk_shapes`),
    the figures."""
    started = time.perf_counter()
    files_over_commits: list[dict[str, int]] = []
    maintenance: list[dict[str, Any]] = []
    checkpoints: list[dict[str, Any]] = []
    proxies: list[dict[str, float]] = []
    with harness.LoadSampler() as load:
        spark = field.start_spark(lake, "bench-effect")
        try:
            project = field.scratch_project(work)
            create(spark)
            commit_s = _commit_timeline(spark, project, work, commits, maintain_every, reps, started,
                                        files_over_commits, maintenance, checkpoints, proxies)
            snapshots = {name: int(spark.sql(f"select count(*) from {field.table(name)}.snapshots").collect()[0][0])
                         for name in (MAINTAINED, UNMAINTAINED)}
            bulk = _bulk_shapes(spark, project, work, quick, bulk_reps, started)
        finally:
            spark.stop()
    return summarize(commits, maintain_every, reps, quick, lake.master, files_over_commits, maintenance, checkpoints,
                     proxies, commit_s, snapshots, bulk, load, time.perf_counter() - started, start)


def _checkpoint(spark: SparkSession, checkpoints: list[dict[str, Any]], done: int, phase: str, repetitions: int
                ) -> dict[str, Any]:
    """Both copies' query latency after `done` commits, kept in `checkpoints`."""
    found = timed_queries(spark, (done - 1) // COMMITS_PER_DAY, repetitions)
    found.update({"commit": done, "phase": phase})
    checkpoints.append(found)
    return found


def _commit_timeline(spark: SparkSession, project: Path, work: Path, commits: int, maintain_every: int, reps: int,
                     started: float, files_over_commits: list[dict[str, int]], maintenance: list[dict[str, Any]],
                     checkpoints: list[dict[str, Any]], proxies: list[dict[str, float]]) -> list[float]:
    """Every commit to both copies (their seconds returned); a checkpoint after the first; every
    `maintain_every` commits and after the last, a maintenance run between two checkpoints
    (`_maintenance_point`); both copies' files after each commit."""
    commit_s: list[float] = []
    for commit in range(commits):
        for name in (MAINTAINED, UNMAINTAINED):
            begun = time.perf_counter()
            spark.sql(commit_sql(name, commit))
            commit_s.append(time.perf_counter() - begun)
        done = commit + 1
        if done == 1:
            _checkpoint(spark, checkpoints, done, "start", max(3, reps // 2))
        if done % maintain_every == 0 or done == commits:
            _maintenance_point(spark, project, work, commits, reps, started, done, files_over_commits, maintenance,
                               checkpoints, proxies)
        else:
            files_over_commits.append({"commit": done, "maintained": file_count(spark, MAINTAINED),
                                       "unmaintained": file_count(spark, UNMAINTAINED)})
    return commit_s


def _maintenance_point(spark: SparkSession, project: Path, work: Path, commits: int, reps: int, started: float,
                       done: int, files_over_commits: list[dict[str, int]], maintenance: list[dict[str, Any]],
                       checkpoints: list[dict[str, Any]], proxies: list[dict[str, float]]) -> None:
    """A checkpoint, the maintained copy's maintenance run (and the pyarrow proxy on the files it
    rewrote), a checkpoint; the files before and after."""
    last = done == commits
    _checkpoint(spark, checkpoints, done, "before", reps if last else max(3, reps // 2))
    record = maintain(spark, project)
    inputs = record.pop("rewritten_input_files")
    record["commit"] = done
    record["rewritten_input_bytes"] = sum(size for size, _day in inputs.values())
    if inputs:
        proxies.append(pyarrow_proxy(inputs, work / "proxy"))
    maintenance.append(record)
    after = _checkpoint(spark, checkpoints, done, "after", reps if last else max(3, reps // 2))
    files_over_commits.append({"commit": done, "maintained_before": record["files_before"],
                               "maintained": record["files_after"],
                               "unmaintained": file_count(spark, UNMAINTAINED)})
    print(f"  effect: {done}/{commits} commits, files {files_over_commits[-1]}, query speedup "
          f"{checkpoints[-2]['speedup']} before, {after['speedup']} after maintenance "
          f"({time.perf_counter() - started:.0f} s)", flush=True)


def _bulk_shapes(spark: SparkSession, project: Path, work: Path, quick: bool, bulk_reps: int, started: float
                 ) -> list[dict[str, Any]]:
    """`bulk_throughput` on each bulk table shape (fewer in the quick form)."""
    bulk = []
    for shape in BULK_SHAPES_QUICK if quick else BULK_SHAPES:
        bulk.append(bulk_throughput(spark, project, work, reps=bulk_reps, **shape))
        compared = bulk[-1]["options"]
        print(f"  effect: bulk compaction {bulk[-1]['spark_bytes']} bytes, {bulk[-1]['spark_over_proxy']}x "
              f"the proxy; our options {compared['ours_over_best']}x the best Iceberg set "
              f"({compared['best_iceberg']}) ({time.perf_counter() - started:.0f} s)", flush=True)
    return bulk


def summarize(commits: int, maintain_every: int, reps: int, quick: bool, master: str,
              files_over_commits: list[dict[str, int]], maintenance: list[dict[str, Any]],
              checkpoints: list[dict[str, Any]], proxies: list[dict[str, float]], commit_s: list[float],
              snapshots: dict[str, int], bulk: list[dict[str, Any]], load: harness.LoadSampler,
              duration_s: float, start: harness.RunStart) -> dict[str, Any]:
    files = file_figures(files_over_commits)
    latency = {**latency_figures(checkpoints), "checkpoints": checkpoints}
    rates = throughput(sum(m["compaction_bytes"] for m in maintenance),
                       sum((m["compaction_ms"] or 0) for m in maintenance) / 1000,
                       sum(p["bytes"] for p in proxies), sum(p["seconds"] for p in proxies))
    averaged_speedup = latency["time_averaged"]["speedup"]
    averaged_fewer = files["time_averaged"]["fewer_pct"]
    return {
        "benchmark": "effect", "quick": quick, "commits": commits, "maintain_every": maintain_every,
        "query_repetitions": reps, "master": master,
        "commit_shape": {"rows": ROWS_PER_COMMIT, "late_rows": LATE_ROWS_PER_COMMIT, "commits_per_day": COMMITS_PER_DAY,
                         "median_commit_s": harness.median(commit_s)},
        "query": query_sql("<table>", commits // COMMITS_PER_DAY),
        "files": files,
        "snapshots": snapshots,
        "latency": latency,
        "throughput": {**rates, "bulk": bulk},
        "maintenance": maintenance,
        # Goals judged on the time averages: the best point alone would flatter the sawtooth.
        "goals": {**GOALS, "judged_on": "time averages over the commit sequence",
                  "speedup_met": (averaged_speedup or 0) >= GOALS["speedup_min"],
                  "fewer_files_met": (averaged_fewer or 0) >= GOALS["fewer_files_min_pct"],
                  "speedup_met_at_best_point": ((latency["best"] or {}).get("speedup") or 0) >= GOALS["speedup_min"],
                  "fewer_files_met_at_best_point": (files["best"]["fewer_pct"] or 0) >= GOALS["fewer_files_min_pct"],
                  "throughput_met": (rates["spark_over_proxy"] or 0) >= GOALS["throughput_over_proxy_min"],
                  # Our default compaction options against the best Iceberg option set, every bulk size.
                  "default_options_met": bool(bulk) and all(b["options"]["met"] for b in bulk)},
        "duration_s": round(duration_s, 1), **harness.provenance(start, load),
        "settings": {"spark": field.SPARK_CONF,
                     "maintenance": "dbt run-operation dbt_iceberg_maint.iceberg_maintenance "
                     "--args {select: effect_maintained} (policy in benchmarks/projects/field/dbt_project.yml)"},
    }


def plot(figures: dict[str, Any], path: Path) -> None:
    plt = harness.pyplot()
    fig, (files_ax, latency_ax, options_ax) = plt.subplots(1, 3, figsize=(16, 4))
    points = figures["files"]["over_commits"]
    sawtooth = [(p["commit"], v) for p in points for v in ([p["maintained_before"]] if "maintained_before" in p
                                                           else []) + [p["maintained"]]]
    files_ax.plot([p["commit"] for p in points], [p["unmaintained"] for p in points], label="unmaintained",
                  color="#c62828")
    files_ax.plot([x for x, _ in sawtooth], [y for _, y in sawtooth], label="maintained", color="#2e7d32")
    averaged = figures["files"]["time_averaged"]
    for key, color in (("unmaintained", "#c62828"), ("maintained", "#2e7d32")):
        files_ax.axhline(averaged[key], color=color, linestyle=":", linewidth=1, label=f"{key}, time average")
    files_ax.set_xlabel("commits")
    files_ax.set_ylabel("data files")
    files_ax.set_title(f"Data files ({averaged['fewer_pct']} % fewer on average)")
    files_ax.legend(fontsize=7)
    latency = figures["latency"]
    checkpoints = sorted(latency["checkpoints"], key=lambda c: (c["commit"], PHASES.index(c["phase"])))
    xs = [c["commit"] for c in checkpoints]
    for key, color in (("unmaintained", "#c62828"), ("maintained", "#2e7d32")):
        latency_ax.plot(xs, [c["median_s"][key] for c in checkpoints], marker="o", label=key, color=color)
    latency_ax.set_xlabel("commits (samples just before and after each maintenance run)")
    latency_ax.set_ylabel("median query seconds")
    best = latency["best"]["speedup"] if latency["best"] else None
    latency_ax.set_title(f"7-day dashboard query: {latency['time_averaged']['speedup']}x on average, "
                         f"{best}x at best", fontsize=9)
    latency_ax.legend(fontsize=8)
    plot_options(options_ax, figures["throughput"]["bulk"])
    harness.save_figure(fig, path)


def plot_options(ax: Any, bulk: list[dict[str, Any]]) -> None:
    """Median compaction bytes/s of each option set, a bar group per bulk size."""
    if not bulk:
        return
    names = list(bulk[0]["options"]["option_sets"])
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        xs = [j + i * width for j in range(len(bulk))]
        ys = [(b["options"]["option_sets"][name]["median_bytes_per_s"] or 0) / 1e6 for b in bulk]
        ax.bar(xs, ys, width, label=name,
               color={OURS: "#2e7d32", OURS_ABOVE_THRESHOLD: "#81c784"}.get(name))
    ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(bulk))])
    ax.set_xticklabels([f"{b['spark_bytes'] / 1e6:.0f} MB, {b['days']} groups\nours/best "
                        f"{b['options']['ours_over_best']}" for b in bulk], fontsize=8)
    ax.set_ylabel("median compaction MB/s")
    ax.set_title("Compaction: our default options vs Iceberg's option sets", fontsize=9)
    ax.legend(fontsize=6)


def print_summary(figures: dict[str, Any]) -> None:
    latency, files, tp = figures["latency"], figures["files"], figures["throughput"]
    averaged, best = latency["time_averaged"], latency["best"] or {}
    print(f"effect benchmark: {figures['commits']} commits, maintenance every {figures['maintain_every']}, "
          f"master {figures['master']}, load {figures['machine']['load_average_1m']}, {figures['duration_s']} s")
    print(f"  data files, time avg   maintained {files['time_averaged']['maintained']:>8}  unmaintained "
          f"{files['time_averaged']['unmaintained']:>8}  ({files['time_averaged']['fewer_pct']} % fewer)")
    print(f"  data files, best point maintained {files['best']['maintained']:>8}  unmaintained "
          f"{files['best']['unmaintained']:>8}  ({files['best']['fewer_pct']} % fewer, "
          f"commit {files['best']['commit']})")
    print(f"  query median s, avg    maintained {averaged['median_s']['maintained']:>8.3f}  unmaintained "
          f"{averaged['median_s']['unmaintained']:>8.3f}  ({averaged['speedup']}x faster)")
    if best:
        print(f"  query median s, best   maintained {best['median_s']['maintained']:>8.3f}  unmaintained "
              f"{best['median_s']['unmaintained']:>8.3f}  ({best['speedup']}x faster, commit {best['commit']}, "
              f"same answer: {best['same_answer']})")
    spark_bps, proxy_bps = tp["spark_bytes_per_s"] or 0, tp["proxy_bytes_per_s"] or 0
    print(f"  compaction bytes/s     spark {spark_bps:>12,.0f}  pyarrow proxy {proxy_bps:>12,.0f}  "
          f"(ratio {tp['spark_over_proxy']})")
    for bulk in tp["bulk"]:
        print(f"  bulk compaction        {bulk['files']} files of {bulk['rows_per_file']:,} rows "
              f"({bulk['spark_bytes'] / 1e6:.1f} MB): spark {bulk['spark_bytes_per_s'] or 0:>12,.0f}  pyarrow proxy "
              f"{bulk['proxy_bytes_per_s'] or 0:>12,.0f}  (ratio {bulk['spark_over_proxy']})")
        compared = bulk["options"]
        for name, found in compared["option_sets"].items():
            print(f"    {name:<26} median {found['median_bytes_per_s'] or 0:>12,.0f} bytes/s  "
                  f"{found['median_s']} s  commits {found['median_commits']}  failures {found['failures']}")
        print(f"    ours / best Iceberg set ({compared['best_iceberg']}): {compared['ours_over_best']} "
              f"(goal >= {GOALS['ours_over_best_iceberg_min']}: {'met' if compared['met'] else 'missed'}; "
              f"partial progress: {compared['ours_partial_progress']}), above the threshold "
              f"{compared['ours_above_threshold_over_best']}, load {compared['load_1m']}")
    print(f"  goals: {figures['goals']}")


def main() -> None:
    parser = harness.parser("effect", __doc__, "20 commits, for the test suite")
    parser.add_argument("--rounds", type=int, default=None, help="commits (default 200; 20 with --quick)")
    parser.add_argument("--maintain-every", type=int, default=None, help="commits between maintenance runs "
                        "(default 50; 10 with --quick)")
    parser.add_argument("--reps", type=int, default=None, help="query repetitions at the end (default 15; 3 quick)")
    parser.add_argument("--bulk-reps", type=int, default=None, help="compactions per option set and bulk size "
                        "(default 5; 1 with --quick)")
    field.add_lake_arguments(parser)
    args = parser.parse_args()
    commits = harness.count(parser, "rounds", args.rounds, 200, 20, args)
    every = harness.count(parser, "maintain-every", args.maintain_every, 50, 10, args)
    reps = harness.count(parser, "reps", args.reps, 15, 3, args)
    bulk_reps = harness.count(parser, "bulk-reps", args.bulk_reps, 5, 1, args)
    field.run_benchmark("effect", args,
                        lambda lake, work, start: run(lake, work, start, commits, every, reps, args.quick, bulk_reps),
                        plot, print_summary)


if __name__ == "__main__":
    main()
