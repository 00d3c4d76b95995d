"""P3 MERGE vs MERGE on different partitions (apache/iceberg#13091): two dbt writer processes,
each its own Spark application on the cluster, run the same incremental MERGE model at the same
moment, each into its own day partition of one table. Four variants, round-robin: the table's
`write.merge.isolation-level` serializable or snapshot, and the model with or without
`incremental_predicates` on the partition column. A barrier UDF in the model holds the first task
of each MERGE until both writers' jobs run, so both have planned before either can commit.
Per variant: conflict rate (rounds in which a writer failed, over the rounds whose barrier was
met), failures by kind, overlap. A round whose barrier was not met (a party gave up waiting) is
its own outcome, `barrier_not_met`: neither a pass nor a conflict.
Writes benchmarks/results/merge_conflicts.{json,png}; prints a summary table."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from benchmarks import field, harness
from benchmarks.stats import wilson_rounded
from dbt_iceberg_maint.conflicts import classify

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MODEL = "merge_target"
PARTIES = {"a": "2026-01-02", "b": "2026-01-03"}  # disjoint day partitions
SEED_DAYS = 6
VARIANTS = (("serializable", False), ("serializable", True), ("snapshot", False), ("snapshot", True))
BARRIER = "merge_barrier"
BARRIER_TIMEOUT_S = 60.0
# Every statement loads the table afresh: with Iceberg's catalog cache (30 s) a writer would
# commit under the isolation level of an earlier round, read from its cached table metadata.
UNCACHED = {"cache-enabled": "false"}  # a catalog property
REPLY_TIMEOUT_S = 600.0


def variant_name(isolation: str, predicates: bool) -> str:
    return f"{isolation}/{'predicate' if predicates else 'no_predicate'}"


def barrier_function(directory: str, parties: tuple[str, ...], timeout_s: float) -> Any:
    """merge_barrier(round, party): the first row of a party marks its arrival and waits until
    every party has arrived; after the timeout it marks `<round>.<party>.timeout` and lets the row
    pass. Later rows pass. Always true."""

    def barrier(key: str, party: str) -> bool:
        try:
            os.close(os.open(os.path.join(directory, f"{key}.{party}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return True
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(os.path.exists(os.path.join(directory, f"{key}.{p}")) for p in parties):
                return True
            time.sleep(0.02)
        with open(os.path.join(directory, f"{key}.{party}.timeout"), "w"):
            pass
        return True

    return barrier


def barrier_met(gate: Path, key: str, parties: tuple[str, ...]) -> bool:
    """Every party arrived and none gave up waiting."""
    return (all((gate / f"{key}.{p}").exists() for p in parties)
            and not any((gate / f"{key}.{p}.timeout").exists() for p in parties))


def round_outcome(met: bool, conflict: bool) -> str:
    """`barrier_not_met` whatever the writers did (they did not run at the same moment), else
    `conflict` or `no_conflict`."""
    if not met:
        return "barrier_not_met"
    return "conflict" if conflict else "no_conflict"


# --- the writer process -------------------------------------------------------------------------

def writer(party: str, lake: field.Lake, project: Path, gate: Path, own: Path) -> None:
    """Start a Spark application, register the barrier, then run one dbt MERGE per command line
    on stdin and answer each with one JSON line on stdout; ends when stdin closes."""
    from pyspark.sql.types import BooleanType

    # Answers go out on the original stdout alone; whatever else prints (dbt, Spark) goes to the log.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    spark = field.start_spark(lake.with_properties(UNCACHED), f"bench-merge-writer-{party}",
                              {"spark.pyspark.python": sys.executable})
    try:
        # Deterministic as far as Spark knows: a MERGE refuses a nondeterministic source.
        spark.udf.register(BARRIER, barrier_function(str(gate), tuple(PARTIES), BARRIER_TIMEOUT_S), BooleanType())
        print(json.dumps({"ready": party}), file=answers, flush=True)
        for line in sys.stdin:
            command = json.loads(line)
            day = PARTIES[party]
            settings = {"merge_day": day, "merge_party": party, "merge_round": str(command["round"]),
                        "merge_predicate": f"DBT_INTERNAL_DEST.day = date'{day}'" if command["predicates"] else "true"}
            for key, value in settings.items():  # read by the model as ${field_bench.<key>}
                spark.conf.set(f"field_bench.{key}", value)
            run = field.run_dbt(project, ["run", "--select", MODEL], own)
            span = run.statement_span("merge into")
            print(json.dumps({"party": party, "round": command["round"], "success": run.success,
                              "failures": list(run.failures), "error": run.error, "wall_s": run.wall_s,
                              "merge_span_ms": list(span) if span else None}), file=answers, flush=True)
    finally:
        spark.stop()


# --- the coordinator ----------------------------------------------------------------------------

class Writer:
    """One writer process: commands in on stdin, JSON answers out on stdout."""

    def __init__(self, party: str, lake: field.Lake, project: Path, gate: Path, work: Path) -> None:
        from dbt_iceberg_maint.runtime.processes import terminated_with_parent

        self.party = party
        own = work / f"writer-{party}"
        own.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "benchmarks.merge_conflicts", "--writer", party, "--lake-json", lake.to_json(),
                   "--project", str(project), "--gate", str(gate), "--own", str(own)]
        self.log = (own / "stderr.log").open("ab")
        # Ends with this process even if it is killed (parent-death signal); stopped by its own pid.
        # Not processes.start: stdin and stdout are the command channel, only stderr goes to the log.
        self.process = subprocess.Popen(terminated_with_parent(command), cwd=harness.REPO, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, text=True)

    def send(self, command: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def receive(self, timeout_s: float = REPLY_TIMEOUT_S) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = _read_line(self.process.stdout, timeout_s)
        if not line:
            raise RuntimeError(f"writer {self.party} ended (exit {self.process.poll()}); see {self.log.name}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def stop(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        self.log.close()


def _read_line(stream: IO[str], timeout_s: float) -> str:
    import select

    ready, _, _ = select.select([stream], [], [], timeout_s)
    if not ready:
        raise TimeoutError(f"no answer from a writer within {timeout_s:.0f} s")
    return stream.readline()


def create_table(spark: SparkSession) -> None:
    name = field.table(MODEL)
    spark.sql(f"drop table if exists {name} purge")
    spark.sql(f"create table {name} (id bigint, day date, merged_round int) using iceberg partitioned by (day) "
              "tblproperties ('format-version'='2')")
    spark.sql(f"insert into {name} select cast(d * 1000 + r.id as bigint), date_add(date'2026-01-01', cast(d as int)),"
              f" -1 from range(20) r cross join (select id as d from range({SEED_DAYS})) days")


def day_state(spark: SparkSession) -> dict[str, tuple[int, int, int]]:
    """day -> (rows, min merged_round, max merged_round) of the writers' days."""
    days = ", ".join(f"date'{d}'" for d in PARTIES.values())
    rows = spark.sql(f"select cast(day as string), count(*), min(merged_round), max(merged_round) "
                     f"from {field.table(MODEL)} where day in ({days}) group by day").collect()
    return {r[0]: (int(r[1]), int(r[2]), int(r[3])) for r in rows}


def play_round(spark: SparkSession, writers: list[Writer], gate: Path, number: int, isolation: str,
               predicates: bool) -> dict[str, Any]:
    spark.sql(f"alter table {field.table(MODEL)} set tblproperties ('write.merge.isolation-level'='{isolation}')")
    before = day_state(spark)
    for w in writers:
        w.send({"round": number, "predicates": predicates})
    answers = {w.party: w.receive() for w in writers}
    after = day_state(spark)
    spans = [a["merge_span_ms"] for a in answers.values()]
    overlapped = all(spans) and max(s[0] for s in spans) < min(s[1] for s in spans)
    kinds = []
    mismatches = 0
    for party, answer in answers.items():
        day = PARTIES[party]
        text = "\n".join([*answer["failures"], answer["error"] or ""])
        answer["kind"] = None if answer["success"] else classify(text).kind
        if not answer["success"]:
            kinds.append(answer["kind"])
            answer["failure_excerpt"] = text[:600]
        # A green writer's day holds this round's value in all its rows; a failed one's is unchanged.
        expected = (20, number, number) if answer["success"] else before.get(day)
        mismatches += int(after.get(day) != expected)
        del answer["failures"]
    met = barrier_met(gate, str(number), tuple(PARTIES))
    return {"round": number, "variant": variant_name(isolation, predicates), "barrier_met": met,
            "outcome": round_outcome(met, bool(kinds)),
            "merges_overlapped": bool(overlapped), "conflict": bool(kinds), "kinds": kinds,
            "state_mismatches": mismatches, "writers": answers}


def run(lake: field.Lake, work: Path, start: harness.RunStart, rounds_per_variant: int, quick: bool,
        max_minutes: float | None, results: Path | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    gate = work / "gate"
    gate.mkdir(parents=True, exist_ok=True)
    played: list[dict[str, Any]] = []
    with harness.LoadSampler() as load:
        spark = field.start_spark(lake.with_properties(UNCACHED), "bench-merge-coordinator")
        writers: list[Writer] = []
        try:
            project = field.scratch_project(work)
            create_table(spark)
            writers = [Writer(party, lake, project, gate, work) for party in PARTIES]
            for w in writers:
                ready = w.receive()
                if ready.get("ready") != w.party:
                    raise RuntimeError(f"writer {w.party} did not start: {ready}")
            stopped_early = False
            for cycle in range(rounds_per_variant):
                for isolation, predicates in VARIANTS:
                    played.append(play_round(spark, writers, gate, len(played), isolation, predicates))
                elapsed = time.perf_counter() - started
                print(f"  merge_conflicts: {cycle + 1}/{rounds_per_variant} cycles, "
                      f"{sum(r['outcome'] == 'conflict' for r in played)} conflicts, "
                      f"{sum(r['outcome'] == 'barrier_not_met' for r in played)} barriers not met "
                      f"({elapsed:.0f} s)", flush=True)
                if results is not None:  # an interrupted run still leaves its figures so far
                    harness.write_results("merge_conflicts", summarize(played, rounds_per_variant, quick, lake.master,
                                                                     load, elapsed, True, None, start), results)
                if max_minutes is not None and elapsed > max_minutes * 60 and cycle + 1 < rounds_per_variant:
                    stopped_early = True
                    break
            total, distinct = spark.sql(f"select count(*), count(distinct id) from {field.table(MODEL)}").collect()[0]
            duplicates = int(total) - int(distinct)
        finally:
            for w in writers:
                w.stop()
            spark.stop()
    return summarize(played, rounds_per_variant, quick, lake.master, load, time.perf_counter() - started,
                     stopped_early, duplicates, start)


def summarize(played: list[dict[str, Any]], rounds_per_variant: int, quick: bool, master: str,
              load: harness.LoadSampler, duration_s: float, stopped_early: bool, duplicates: int | None,
              start: harness.RunStart) -> dict[str, Any]:
    variants = []
    for isolation, predicates in VARIANTS:
        name = variant_name(isolation, predicates)
        rounds = [r for r in played if r["variant"] == name]
        met = [r for r in rounds if r["outcome"] != "barrier_not_met"]
        conflicts = sum(r["outcome"] == "conflict" for r in met)
        kinds = Counter(k for r in met for k in r["kinds"])
        variants.append({
            "name": name, "isolation_level": isolation, "incremental_predicates": predicates, "rounds": len(rounds),
            # Rates over the rounds whose barrier was met: the others are not evidence either way.
            "barrier_met": len(met), "barrier_not_met": len(rounds) - len(met),
            "conflict_rounds": conflicts, "no_conflict_rounds": len(met) - conflicts,
            "conflict_rate": round(conflicts / len(met), 3) if met else None,
            "conflict_rate_wilson_95": wilson_rounded(conflicts, len(met)),
            "writer_runs": 2 * len(met), "failed_writer_runs": sum(len(r["kinds"]) for r in met),
            "failures_by_kind": dict(kinds),
            "barrier_not_met_failures_by_kind": dict(Counter(
                k for r in rounds if r["outcome"] == "barrier_not_met" for k in r["kinds"])),
            "merges_overlapped": sum(r["merges_overlapped"] for r in rounds),
            "state_mismatches": sum(r["state_mismatches"] for r in rounds),
            "median_writer_wall_s": harness.median([a["wall_s"] for r in rounds for a in r["writers"].values()]),
        })
    return {
        "benchmark": "merge_conflicts", "quick": quick, "rounds_per_variant_requested": rounds_per_variant,
        "rounds_played": len(played), "stopped_early": stopped_early, "master": master,
        "table": {"partitioned_by": "day", "writer_days": PARTIES, "rows_per_merge": 20,
                  "merge": "incremental_strategy merge, unique_key id, copy-on-write (Iceberg's default)"},
        "variants": variants, "duplicate_ids": duplicates,
        "rounds": played, "duration_s": round(duration_s, 1), **harness.provenance(start, load),
        "settings": {"spark": field.SPARK_CONF, "barrier_timeout_s": BARRIER_TIMEOUT_S,
                     "writers": "two OS processes, each its own Spark application (spark.cores.max=1) on the "
                                "cluster, dbt in-process (method: session) per round"},
    }


def plot(figures: dict[str, Any], path: Path) -> None:
    plt = harness.pyplot()
    variants = figures["variants"]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    names = [v["name"] for v in variants]
    rates = [100 * (v["conflict_rate"] or 0) for v in variants]
    bars = ax.bar(names, rates, color=["#c62828" if r else "#2e7d32" for r in rates])
    for bar, v in zip(bars, variants, strict=True):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(),
                f"{v['conflict_rounds']}/{v['barrier_met']}" + (f" ({v['barrier_not_met']} no barrier)"
                                                                  if v["barrier_not_met"] else ""),
                ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("rounds with a failed MERGE (%, barrier met)")
    ax.set_ylim(0, 105)
    ax.set_title("Two MERGEs into disjoint day partitions at once")
    harness.save_figure(fig, path)


def print_summary(figures: dict[str, Any]) -> None:
    print(f"merge_conflicts benchmark: {figures['rounds_played']} rounds, master {figures['master']}, load "
          f"{figures['machine']['load_average_1m']}, {figures['duration_s']} s, stopped early: "
          f"{figures['stopped_early']}, duplicate ids: {figures['duplicate_ids']}")
    print(f"  {'variant':<28}{'rounds':>7}{'no barrier':>11}{'conflicts':>10}{'rate':>7}{'overlap':>8}  kinds")
    for v in figures["variants"]:
        rate = "-" if v["conflict_rate"] is None else f"{v['conflict_rate']:.2f}"
        print(f"  {v['name']:<28}{v['rounds']:>7}{v['barrier_not_met']:>11}{v['conflict_rounds']:>10}{rate:>7}"
              f"{v['merges_overlapped']:>8}  {v['failures_by_kind']}")


def main() -> None:
    parser = harness.parser("merge_conflicts", __doc__, "2 rounds per variant, for the test suite")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per variant (default 50; 2 with --quick)")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="start no new cycle of the four variants after this long (the figures say so)")
    field.add_lake_arguments(parser)
    # The writer side (started by the benchmark itself).
    parser.add_argument("--writer", choices=sorted(PARTIES), help=argparse.SUPPRESS)
    parser.add_argument("--lake-json", help=argparse.SUPPRESS)
    parser.add_argument("--project", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--gate", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--own", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        writer(args.writer, field.Lake.from_json(args.lake_json), args.project, args.gate, args.own)
        return
    rounds = harness.count(parser, "rounds", args.rounds, 50, 2, args)
    field.run_benchmark("merge_conflicts", args,
                        lambda lake, work, start: run(lake, work, start, rounds, args.quick, args.max_minutes,
                                                      args.results),
                        plot, print_summary)


if __name__ == "__main__":
    main()
