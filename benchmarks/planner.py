"""Planner benchmark: a lake of Iceberg tables in a realistic mix, timed per table with
  plan (tiered, with and without the cost gate) and health (pyiceberg, tiered),
  pyiceberg inspect (files, snapshots, manifests, partitions: untiered),
  Spark metadata tables (table_health's query), and health_via_dbt (dbt run-operation).
Writes benchmarks/results/planner.json and planner.png; prints a summary table."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import harness
from dbt_iceberg_maint.metadata.catalog import config_from_options, open_catalog
from dbt_iceberg_maint.metadata.health import health_figures
from dbt_iceberg_maint.metadata.planner import plan_table
from dbt_iceberg_maint.metadata.project import ModelTarget
from dbt_iceberg_maint.policy.sql import TableRef

SCHEMA = "lake"
# The mix: most tables unchanged since their last maintenance.
MIX = (("maintained", 0.72), ("small_files", 0.14), ("deletes", 0.08), ("large", 0.03), ("empty", 0.03))
GATED_POLICY = {"cost_gate": {"skip_unchanged": True}, "compaction": {"min_input_files": 5}}


def build_lake(spark: Any, tables: int) -> dict[str, str]:
    """name -> kind. Rows stay tiny so the lake builds in minutes; file counts make the states."""
    spark.sql(f"create namespace if not exists local.{SCHEMA}")
    counts = {kind: max(1, round(share * tables)) for kind, share in MIX if kind != "maintained"}
    counts["maintained"] = tables - sum(counts.values())
    kinds = [kind for kind, _ in MIX for _ in range(counts[kind])]
    lake = {}
    for i, kind in enumerate(kinds):
        name = f"t{i:04d}_{kind}"
        full = f"local.{SCHEMA}.{name}"
        if kind == "deletes":
            spark.sql(f"create table {full} (id bigint, p string) using iceberg tblproperties "
                      "('format-version'='2', 'write.delete.mode'='merge-on-read')")
        else:
            spark.sql(f"create table {full} (id bigint, p string) using iceberg partitioned by (p)")
        # REPARTITION(n): n files in one commit, so few statements build the states.
        if kind == "maintained":
            # Two commits: two files for the compaction to merge whatever AQE does to REPARTITION.
            spark.sql(f"insert into {full} select /*+ REPARTITION(2) */ id, 'a' from range(4)")
            spark.sql(f"insert into {full} values (5, 'a')")
            spark.sql(f"call local.system.rewrite_data_files(table => '{SCHEMA}.{name}', "
                      "options => map('min-input-files', '2'))")
        elif kind == "small_files":
            for _ in range(6):
                spark.sql(f"insert into {full} values (1, 'a'), (2, 'b')")
        elif kind == "deletes":
            spark.sql(f"insert into {full} select /*+ REPARTITION(5) */ id, 'c' from range(50)")
            for j in range(5):
                spark.sql(f"delete from {full} where id = {j * 10 + 1}")
        elif kind == "large":
            for j in range(6):
                spark.sql(f"insert into {full} select /*+ REPARTITION(8) */ id, cast(id % 8 as string) "
                          f"from range({j * 4000}, {j * 4000 + 4000})")
        lake[name] = kind
    return lake


def _timed(work: Callable[[], object], rounds: int) -> float:
    """Median seconds of `rounds` runs."""
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = harness.parser("planner", __doc__, "a small lake (12 tables), for the test suite")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per measurement (median); default 3")
    parser.add_argument("--tables", type=int, default=None, help="lake size (default 200; 12 with --quick)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="keep the lake here (reused when it exists with the same size); default: a temp dir")
    args = parser.parse_args()
    rounds = harness.count(parser, "rounds", args.rounds, 3, 3, args)
    # One table of each kind at least.
    tables = harness.count(parser, "tables", args.tables, 200, 12, args, least=5)
    start = harness.run_start()
    figures = {**run(tables, rounds, args.quick, args.workdir), **harness.provenance(start)}
    harness.publish("planner", figures, args.results, plot, print_summary)


def run(tables: int, rounds: int, quick: bool, workdir: Path | None = None) -> dict[str, Any]:
    """Build (or reuse) the lake, then time each way of reading it: the metadata planner, Spark's
    metadata tables, dbt's table_health."""
    from dbt_iceberg_maint.runtime.spark import start_session

    work = workdir or Path(tempfile.mkdtemp(prefix="bench-planner-"))
    warehouse = work / "warehouse"
    spark = start_session(warehouse)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        lake, reused, build_s = _lake(spark, work / "lake.json", tables)
        names = sorted(lake)
        per_table, tiers = _time_metadata(warehouse, names, rounds)
        sample = [n for n in names if lake[n] != "empty"][:: max(1, len(names) // 20)][:20]
        per_table["spark_metadata_tables"] = _time_spark(spark, lake, sample, rounds)
        dbt_sample = sample[:3]
        per_table["health_via_dbt"] = _time_dbt(warehouse, dbt_sample, rounds)
    finally:
        spark.stop()
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    ms = {k: round(v * 1000, 3) for k, v in per_table.items()}
    return {
        "benchmark": "planner", "quick": quick, "tables": len(names), "rounds": rounds,
        "mix": {kind: sum(1 for k in lake.values() if k == kind) for kind, _ in MIX},
        "build_seconds": None if reused else round(build_s, 1), "lake_reused": reused,
        "ms_per_table": ms,
        "samples": {"spark_metadata_tables": len(sample), "health_via_dbt": len(dbt_sample)},
        "deepest_tier_read_by_gated_plan": tiers,
        "ratios": {
            "spark_metadata_tables_over_plan": round(ms["spark_metadata_tables"] / ms["plan"], 1),
            "spark_metadata_tables_over_plan_gated": round(ms["spark_metadata_tables"] / ms["plan_gated"], 1),
            "health_via_dbt_over_plan": round(ms["health_via_dbt"] / ms["plan"], 1),
            "pyiceberg_inspect_over_plan": round(ms["pyiceberg_inspect"] / ms["plan"], 1),
        },
        "goals": {"plan_ms_per_table_max": 10, "spark_over_plan_min": 30,
                  "plan_met": ms["plan"] <= 10, "ratio_met": ms["spark_metadata_tables"] / ms["plan"] >= 30},
    }


def _lake(spark: Any, saved: Path, tables: int) -> tuple[dict[str, str], bool, float]:
    """The lake (table → kind): the one `saved` describes when it has `tables` tables, else built
    and saved. Returns it, whether it was reused, and the seconds it took."""
    started = time.perf_counter()
    reused = saved.is_file() and len(json.loads(saved.read_text())) == tables
    if reused:
        lake = json.loads(saved.read_text())
    else:
        lake = build_lake(spark, tables)
        saved.write_text(json.dumps(lake))
    return lake, reused, time.perf_counter() - started


def _time_metadata(warehouse: Path, names: list[str], rounds: int) -> tuple[dict[str, float], dict[str, int]]:
    """Seconds per table of the metadata planner (with and without the cost gate), its health
    figures and pyiceberg's inspect tables; and how many tables the gated plan read to each tier."""
    catalog = open_catalog(config_from_options(str(warehouse), []))  # the embedded catalog
    refs = {n: ModelTarget(n, TableRef(SCHEMA, n), GATED_POLICY) for n in names}
    ungated = {n: ModelTarget(n, TableRef(SCHEMA, n), {"compaction": {"min_input_files": 5}})
               for n in names}
    tiers: dict[str, int] = {}

    def plan_all(targets: dict[str, ModelTarget], count_tiers: bool = False) -> None:
        for n in names:
            _rows, read = plan_table(targets[n], catalog.load(f"{SCHEMA}.{n}"))
            if count_tiers:
                deepest = "manifest_entries" if "manifest_entries" in read else (
                    "manifest_list" if "manifest_list" in read else "summary")
                tiers[deepest] = tiers.get(deepest, 0) + 1

    plan_all(refs, count_tiers=True)
    per_table: dict[str, float] = {}
    per_table["plan_gated"] = _timed(lambda: plan_all(refs), rounds) / len(names)
    per_table["plan"] = _timed(lambda: plan_all(ungated), rounds) / len(names)
    per_table["health"] = _timed(
        lambda: [health_figures(n, catalog.load(f"{SCHEMA}.{n}")) for n in names], rounds) / len(names)

    def inspect_all() -> None:
        for n in names:
            table = catalog.load(f"{SCHEMA}.{n}")
            if table.metadata.current_snapshot() is None:
                continue
            for view in (table.inspect.files, table.inspect.snapshots, table.inspect.manifests,
                         table.inspect.partitions):
                view()

    per_table["pyiceberg_inspect"] = _timed(inspect_all, rounds) / len(names)
    return per_table, tiers


def _time_spark(spark: Any, lake: dict[str, str], sample: list[str], rounds: int) -> float:
    """Seconds per table of table_health's query over Spark's metadata tables."""
    spark_sql = {n: _health_sql(f"local.{SCHEMA}.{n}", lake[n]) for n in sample}
    return _timed(lambda: [spark.sql(sql).collect() for sql in spark_sql.values()], rounds) / len(sample)


def _time_dbt(warehouse: Path, dbt_sample: list[str], rounds: int) -> float:
    """Seconds per table of `dbt run-operation table_health` (dbt in this process)."""
    from dbt_iceberg_maint.runtime.invoke import invoke_dbt
    from dbt_iceberg_maint.runtime.spark import WAREHOUSE_ENV

    os.environ[WAREHOUSE_ENV] = str(warehouse)
    env = {"DBT_ICEBERG_MAINT_SCHEMA": SCHEMA, WAREHOUSE_ENV: str(warehouse)}
    assert invoke_dbt(["deps", "--quiet"]).success

    def via_dbt() -> None:
        for n in dbt_sample:
            outcome = invoke_dbt(["run-operation", "dbt_iceberg_maint.table_health", "--args",
                                  json.dumps({"relation": f"{SCHEMA}.{n}"})], env=env)
            assert outcome.success, outcome.exception

    return _timed(via_dbt, max(1, min(rounds, 2))) / len(dbt_sample)


def _health_sql(table: str, kind: str) -> str:
    partitioned = kind != "deletes"
    key = "spec_id, partition" if partitioned else "spec_id"
    small = int(536870912 * 0.75)
    return f"""with files as (select {key}, file_size_in_bytes, record_count from {table}.data_files)
select (select count(*) from files), (select count(*) from files where file_size_in_bytes < {small}),
  (select coalesce(sum(file_size_in_bytes), 0) from files), (select coalesce(sum(record_count), 0) from files),
  (select count(*) from {table}.delete_files), (select count(*) from {table}.snapshots),
  (select min(committed_at) from {table}.snapshots), (select count(*) from {table}.manifests),
  (select count(*) from {table}.manifests where content = 0), (select count(*) from {table}.partitions),
  (select coalesce(max(c), 0) from (select count(*) as c from files where file_size_in_bytes < {small}
   group by {key}))"""


def plot(figures: dict[str, Any], path: Path) -> None:
    plt = harness.pyplot()
    ms = figures["ms_per_table"]
    order = ["plan_gated", "plan", "health", "pyiceberg_inspect", "spark_metadata_tables", "health_via_dbt"]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    bars = ax.barh(order, [ms[k] for k in order], color=["#2e7d32", "#43a047", "#66bb6a", "#fbc02d", "#ef6c00",
                                                        "#c62828"])
    ax.set_xscale("log")
    ax.set_xlabel("ms per table (log scale)")
    ax.set_title(f"Planner benchmark: {figures['tables']} tables, median of {figures['rounds']} rounds")
    for bar, key in zip(bars, order, strict=True):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {ms[key]:.2f}", va="center", fontsize=8)
    ax.axvline(10, color="#333", linestyle="--", linewidth=0.8)
    ax.invert_yaxis()
    harness.save_figure(fig, path)


def print_summary(figures: dict[str, Any]) -> None:
    built = "reused" if figures["lake_reused"] else f"built in {figures['build_seconds']} s"
    print(f"planner benchmark: {figures['tables']} tables {figures['mix']}, lake {built}")
    for key, value in figures["ms_per_table"].items():
        print(f"  {key:<24} {value:>10.3f} ms/table")
    for key, value in figures["ratios"].items():
        print(f"  {key:<40} {value:>8.1f}x")
    print(f"  goals: {figures['goals']}")


if __name__ == "__main__":
    main()
