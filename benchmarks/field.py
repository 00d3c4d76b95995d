"""What the field benchmarks (overhead, effect, merge_conflicts, post_hooks) share beyond the
harness (benchmarks/harness.py): the lake (a lab cluster and PostgreSQL, or given ones), Spark
sessions on its JDBC catalog, the scratch dbt project with a `session` profile, and dbt
invocations with their statement timings.

Every benchmark process starts its own SparkSession (on the lab's standalone cluster when given
its master URL) with an Iceberg JDBC catalog on PostgreSQL as the default catalog `local`; dbt
runs in that process (dbt-spark `method: session` reuses the session), so the macros and the raw
statements they are compared with travel the same path.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import harness
from benchmarks.harness import REPO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


PROJECT_TEMPLATE = Path(__file__).parent / "projects" / "field"
SCHEMA = "field_bench"
CATALOG = "local"
# Small heaps: the machine (2 cores) is shared by several Spark applications at once.
SPARK_CONF = {
    "spark.driver.memory": "768m",
    "spark.executor.memory": "512m",
    "spark.cores.max": "1",
    "spark.sql.shuffle.partitions": "2",
}


@dataclass(frozen=True)
class Lake:
    """Where a benchmark's tables live: the JDBC catalog's properties and the Spark master."""

    catalog_properties: Mapping[str, str]
    master: str
    warehouse: Path

    def with_properties(self, properties: Mapping[str, str]) -> Lake:
        """The same lake, its catalog with more properties (e.g. `cache-enabled`)."""
        return replace(self, catalog_properties={**self.catalog_properties, **properties})

    def to_json(self) -> str:
        return json.dumps({"catalog_properties": dict(self.catalog_properties), "master": self.master,
                           "warehouse": str(self.warehouse)})

    @classmethod
    def from_json(cls, text: str) -> Lake:
        data = json.loads(text)
        return cls(data["catalog_properties"], data["master"], Path(data["warehouse"]))


@contextmanager
def bench_lake(work: Path, master: str | None, catalog_properties: Mapping[str, str] | None) -> Iterator[Lake]:
    """The lake a benchmark runs on: the given Spark master and JDBC catalog, or else a lab
    cluster (lab/cluster.py) and a PostgreSQL server (lab/postgres.py) started here and stopped
    by their own pids when the benchmark ends."""
    from lab.cluster import start_cluster
    from lab.postgres import start_server

    with ExitStack() as stack:
        if master is None:
            cluster = start_cluster(work / "cluster")
            stack.callback(cluster.stop)
            master = cluster.master_url
        if not catalog_properties:
            server = start_server()
            stack.callback(shutil.rmtree, server.data_dir.parent, ignore_errors=True)
            stack.callback(server.stop)
            catalog_properties = server.spark_catalog_properties(str(work / "warehouse"))
        warehouse = Path(catalog_properties["warehouse"])
        warehouse.mkdir(parents=True, exist_ok=True)
        yield Lake(dict(catalog_properties), master, warehouse)


def add_lake_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--master", default=None,
                        help="Spark master URL of a running cluster (default: a lab cluster started here)")
    parser.add_argument("--catalog-property", action="append", default=[], metavar="KEY=VALUE",
                        help="the Iceberg JDBC catalog (spark.sql.catalog.local.* keys: type, uri, jdbc.user, "
                             "jdbc.password, warehouse); default: a PostgreSQL server started here")


def catalog_properties(args: argparse.Namespace) -> dict[str, str]:
    """--catalog-property, read as the product's CLI reads it."""
    from dbt_iceberg_maint.errors import UsageError
    from dbt_iceberg_maint.metadata.catalog import parse_properties

    try:
        properties = parse_properties(args.catalog_property)
    except UsageError as exc:
        raise SystemExit(str(exc)) from exc
    if properties and "warehouse" not in properties:
        raise SystemExit("--catalog-property warehouse=DIR is required with a given catalog")
    return properties


def start_spark(lake_: Lake, app_name: str, extra: Mapping[str, str] | None = None) -> SparkSession:
    from dbt_iceberg_maint.runtime.spark import resolve_iceberg_runtime, start_session
    from lab.cluster import application_conf
    from lab.postgres import ensure_jdbc_jar

    jdbc_jar = ensure_jdbc_jar()
    if jdbc_jar is None:
        from dbt_iceberg_maint.errors import RuntimeSetupError

        raise RuntimeSetupError("the PostgreSQL JDBC driver (libpostgresql-jdbc-java) is missing")
    jars = ",".join([*resolve_iceberg_runtime().jars, str(jdbc_jar)])
    conf = {**SPARK_CONF, **application_conf(SPARK_CONF["spark.executor.memory"]), "spark.jars": jars, **(extra or {})}
    spark = start_session(str(lake_.warehouse), catalog_name=CATALOG, catalog_properties=lake_.catalog_properties,
                          extra_conf=conf, app_name=app_name, master=lake_.master)
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql(f"create namespace if not exists {CATALOG}.{SCHEMA}")
    return spark


def table(name: str) -> str:
    return f"{CATALOG}.{SCHEMA}.{name}"


# dbt's query comment (/* {...} */) and a materialization's `-- ...` lines before a statement.
LEADING_COMMENTS = re.compile(r"^(?:\s*/\*.*?\*/|\s*--[^\n]*)*", re.S)

# A dbt-spark `session` profile (the benchmark process starts the SparkSession; dbt reuses it).
PROFILE = """{name}:
  target: session
  outputs:
    session:
      type: spark
      method: session
      host: NA
      schema: {schema}
      threads: 1
"""


def scratch_project(work: Path) -> Path:
    """A copy of the field project in `work`, installing this checkout, with a session profile;
    `dbt deps` has run in it."""
    from dbt_iceberg_maint.runtime.invoke import invoke_dbt

    project = work / "project"
    shutil.copytree(PROJECT_TEMPLATE, project, ignore=shutil.ignore_patterns("target", "dbt_packages", "logs"))
    (project / "packages.yml").write_text(f"packages:\n  - local: {REPO}\n")
    (project / "profiles.yml").write_text(PROFILE.format(name="field_bench", schema=SCHEMA))
    outcome = invoke_dbt(["deps", "--quiet"], project_dir=project)
    if not outcome.success:
        raise RuntimeError(f"dbt deps failed in {project}: {outcome.exception}")
    return project


@dataclass(frozen=True)
class TimedDbt:
    """One dbt invocation: its wall time, every SQL statement's (start, end) epoch ms from dbt's
    SQLQuery / SQLQueryStatus events, and its log messages."""

    success: bool
    wall_s: float
    statements: tuple[tuple[str, int, int | None], ...]
    messages: tuple[str, ...] = field(repr=False)
    error: str | None = None
    failures: tuple[str, ...] = ()

    @property
    def sql_span_s(self) -> float | None:
        """From the first statement's start to the last one's end: the warehouse work dbt issued."""
        ended = [end for _sql, _start, end in self.statements if end is not None]
        if not self.statements or not ended:
            return None
        return (max(ended) - min(start for _sql, start, _end in self.statements)) / 1000

    def statement_span(self, prefix: str) -> tuple[int, int] | None:
        """(start, end) epoch ms of the last finished statement starting with `prefix`
        (case-insensitive; after dbt's query comment and the materialization's comments)."""
        for sql, start, end in reversed(self.statements):
            text = LEADING_COMMENTS.sub("", sql).lstrip().lower()
            if text.startswith(prefix.lower()) and end is not None:
                return start, end
        return None

    def statement_s(self, prefix: str) -> float | None:
        span = self.statement_span(prefix)
        return None if span is None else (span[1] - span[0]) / 1000


def run_dbt(project: Path, args: Sequence[str], own_paths: Path | None = None) -> TimedDbt:
    """dbt in this process (the product's invoke_dbt), timed; statements of nodes and of
    run-operations alike."""
    from dbt_iceberg_maint.runtime.invoke import invoke_dbt

    # own_paths: a target and log folder of this process's own (several dbt processes, one project).
    extra = ["--target-path", str(own_paths / "target"), "--log-path", str(own_paths / "logs")] if own_paths else []
    started = time.perf_counter()
    outcome = invoke_dbt([*args, "--quiet", *extra], project_dir=project)
    wall = time.perf_counter() - started
    return TimedDbt(outcome.success, wall, outcome.sql_statements, outcome.log_messages, outcome.exception,
                    tuple(str(node.message) for node in outcome.failed_nodes()))


def run_benchmark(name: str, args: argparse.Namespace,
                  run: Callable[[Lake, Path, harness.RunStart], dict[str, Any]],
                  plot: Callable[[dict[str, Any], Path], None], summary: Callable[[dict[str, Any]], None]) -> None:
    """`run` on the lake (given or started here) in a scratch folder, with the moment it started
    (for `provenance`); then the JSON, the plot and the summary table."""
    start = harness.run_start()
    work = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
    try:
        with bench_lake(work, args.master, catalog_properties(args)) as lake:
            figures = run(lake, work, start)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    harness.publish(name, figures, args.results, plot, summary)

