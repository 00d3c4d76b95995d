"""P6 fleet: a lake, not a table. One maintenance night over a lake of Iceberg tables on the
PostgreSQL JDBC catalog, through a Spark Thrift Server running as an application of the
standalone cluster (dbt Cloud's path), by three variants from the same starting state:

  (a) `iceberg_maintenance` as the package had it when fleet work began (commit LEGACY_COMMIT:
      one table after another, table_health's whole query per table, no fixed point), the
      package checked out from git at that commit;
  (b) `iceberg_maintenance` now (tiered planning, the cost gate, the fixed point, leases);
  (c) the fleet engine (`run_fleet`: metadata planning, worst first) at concurrency 1, 2 and 4.

The lake (built with pyiceberg appends, no Spark): every table is a dbt model of a generated
project; a first night (the fleet engine, concurrency 2) maintains all of it, then the night's
changes: about 10 % of the tables get fresh small files, 3 % old orphan files, 2 % are large;
the rest is unchanged since its last maintenance. The warehouse and the catalog's pointers are
saved then, and restored before each variant. Measured per variant: wall time, statements sent,
CALLs run, and the end health of every table (data files, small files, delete files, data
manifests), compared table by table with variant (b)'s. Scales: --tables (default 100,300,1000);
(a) runs up to --legacy-max-tables. Writes benchmarks/results/fleet.{json,png}."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import harness

if TYPE_CHECKING:
    from lab.cluster import SparkCluster
    from lab.postgres import PostgresServer

NAME = "fleet"
LEGACY_COMMIT = "a146bb7"
# Orphan removal keeps its default interval (12 h): the measured night comes within it of night 0,
# so where a variant removes the orphans planted after night 0 is reported (orphans_left).
POLICY = ("{compaction: {min_input_files: 5}, expire_snapshots: {older_than_hours: 168, retain_last: 5}, "
          "remove_orphan_files: {older_than_hours: 72}, rewrite_manifests: {min_manifests: 5}}")
MIX = (("small_files", 0.10), ("orphans", 0.03), ("large", 0.02))
# The kinds a day of writers changes after night 0 (night_changes); large tables are not written.
CHANGED_KINDS = ("small_files", "orphans")
HEALTH_KEYS = ("data_files", "small_files", "delete_files", "data_manifests")
FULL_SCALES = (100, 300, 1000)
QUICK_SCALES = (8,)
CONCURRENCY = (1, 2, 4)


# ---- the lake -----------------------------------------------------------------------------------

def table_kinds(tables: int) -> dict[str, str]:
    """name -> kind ('unchanged' for the rest of the mix), deterministic."""
    counts = {kind: max(1, round(share * tables)) for kind, share in MIX}
    kinds = [kind for kind, _ in MIX for _ in range(counts[kind])]
    kinds += ["unchanged"] * (tables - len(kinds))
    return {f"t{i:04d}": kind for i, kind in enumerate(kinds)}


def _append(table: Any, first_id: int, rows: int) -> None:
    import pyarrow as pa

    table.append(pa.table({"id": pa.array(range(first_id, first_id + rows), pa.int64()),
                           "kind": pa.array(["x"] * rows, pa.string())}))


def build_lake(catalog: Any, namespace: str, kinds: Mapping[str, str]) -> None:
    """Two small appends per table (a large table: 6 appends of 20,000 rows)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "kind", StringType(),
                                                                               required=False))
    catalog.create_namespace_if_not_exists(namespace)
    for name, kind in kinds.items():
        table = catalog.create_table((namespace, name), schema, properties={"format-version": "2"})
        for batch in range(6 if kind == "large" else 2):
            _append(table, batch * 20000, 20000 if kind == "large" else 3)


def table_dir(catalog: Any, namespace: str, name: str) -> Path:
    return Path(str(catalog.load_table((namespace, name)).location()).removeprefix("file:"))


def night_changes(catalog: Any, namespace: str, kinds: Mapping[str, str]) -> None:
    """What a day of writers leaves: fresh small files, and files of failed writes 4 days old."""
    for name, kind in kinds.items():
        if kind == "small_files":
            table = catalog.load_table((namespace, name))
            for batch in range(6):
                _append(table, 1000 + batch, 2)
        elif kind == "orphans":
            data = table_dir(catalog, namespace, name) / "data"
            data.mkdir(parents=True, exist_ok=True)
            old = time.time() - 96 * 3600
            for i in range(3):
                orphan = data / f"orphan-{i}.parquet"
                orphan.write_bytes(b"left by a failed write")
                os.utime(orphan, (old, old))


def write_project(root: Path, namespace: str, names: Sequence[str], package: Path, host: str, port: int) -> Path:
    """A dbt project whose models are the lake's tables (never run: the tables exist), with the policy."""
    (root / "models").mkdir(parents=True)
    (root / "macros").mkdir()
    for name in names:
        (root / "models" / f"{name}.sql").write_text("select 1 as id\n")
    (root / "macros" / "schema.sql").write_text(
        "{% macro generate_schema_name(custom, node) %}{{ custom or target.schema }}{% endmacro %}\n")
    (root / "dbt_project.yml").write_text(
        "name: lake\nversion: '1.0'\nconfig-version: 2\nprofile: lake\n"
        f"models:\n  lake:\n    +materialized: table\n    +file_format: iceberg\n    +schema: {namespace}\n"
        f"    +meta:\n      iceberg_maint: {POLICY}\n")
    write_profile(root, namespace, host, port)
    (root / "packages.yml").write_text(f"packages:\n  - local: {package}\n")
    from dbt_iceberg_maint.runtime.invoke import invoke_dbt

    for args in (["deps", "--quiet"], ["parse", "--quiet"]):
        outcome = invoke_dbt(args, root, root)
        if not outcome.success:
            raise RuntimeError(f"dbt {args[0]} failed in {root}: {outcome.exception}")
    return root


def write_profile(root: Path, namespace: str, host: str, port: int) -> None:
    (root / "profiles.yml").write_text(
        f"lake:\n  target: thrift\n  outputs:\n    thrift: {{type: spark, method: thrift, host: {host}, port: {port}, "
        f"user: dbt, schema: {namespace}, threads: 1, connect_retries: 3, connect_timeout: 10}}\n")


class ThriftService:
    """The Thrift Server the variants reach, one long-running (warm) server as a nightly job meets
    it. A variant that fails gets the next one a new server: variant (a) at 1,000 tables once ran a
    4 GB driver out of heap, and the server it left could not allocate memory for the next
    variant's steps (20 s for a 0.2 s manifest rewrite, then none)."""

    def __init__(self, start: Callable[[int], Any]) -> None:
        self.start, self.starts = start, 1
        self.server = start(self.starts)

    def restart(self) -> None:
        self.server.stop()
        self.starts += 1
        self.server = self.start(self.starts)

    def stop(self) -> None:
        self.server.stop()


def legacy_package(work: Path) -> Path:
    """The package as it was at LEGACY_COMMIT (git archive: no worktree left behind)."""
    target = work / f"package-{LEGACY_COMMIT}"
    target.mkdir()
    archive = subprocess.run(["git", "archive", LEGACY_COMMIT], cwd=harness.REPO, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


class Snapshot:
    """The lake's state: its tables' files (one folder holds the namespace's tables) and each
    table's metadata pointer in the catalog."""

    def __init__(self, catalog: Any, namespace: str, root: Path, backup: Path) -> None:
        self.catalog, self.namespace, self.root, self.backup = catalog, namespace, root, backup
        shutil.copytree(root, backup, symlinks=True)
        self.pointers = self._pointers()

    def _pointers(self) -> dict[str, str]:
        return {name: self.catalog.load_table((self.namespace, name)).metadata_location
                for (_, name) in self.catalog.list_tables(self.namespace)}

    def restore(self) -> None:
        from sqlalchemy import text

        shutil.rmtree(self.root)
        shutil.copytree(self.backup, self.root, symlinks=True)
        with self.catalog.engine.begin() as connection:
            for name, location in self.pointers.items():
                connection.execute(text("update iceberg_tables set metadata_location = :location where "
                                        "table_namespace = :namespace and table_name = :name"),
                                   {"location": location, "namespace": self.namespace, "name": name})
        if self._pointers() != self.pointers:
            raise RuntimeError("the lake was not restored")


def end_health(metadata: Any, namespace: str, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    from dbt_iceberg_maint.metadata.health import read_health

    records = read_health(metadata, [f"{namespace}.{name}" for name in names])
    return {r.table: ({k: r.figures[k] for k in HEALTH_KEYS} if r.figures else {"error": r.error}) for r in records}


def record_swept(iceberg: Any, namespace: str, kinds: Mapping[str, str]) -> None:
    """Every table as swept for orphans by night 0. Its tables are minutes old, and a never-swept
    table younger than the orphan window is not swept; a real night 1 comes a day after a night 0
    that swept them, within their interval (12 h) no more."""
    from dbt_iceberg_maint.policy.engine import CHECKED_FORMAT, checked_property

    now = time.strftime(CHECKED_FORMAT, time.gmtime())
    for name in kinds:
        with iceberg.load_table(f"{namespace}.{name}").transaction() as transaction:
            transaction.set_properties({checked_property("remove_orphan_files"): now})


def orphans_left(root: Path) -> int:
    return sum(1 for _ in root.glob("*/data/orphan-*.parquet"))


# ---- the variants -------------------------------------------------------------------------------

def macro_night(project: Path) -> dict[str, Any]:
    from dbt_iceberg_maint.fleet.steps import is_call
    from dbt_iceberg_maint.maintenance.results import parse_result_lines
    from dbt_iceberg_maint.runtime.invoke import invoke_dbt

    started = time.perf_counter()
    outcome = invoke_dbt(["run-operation", "dbt_iceberg_maint.iceberg_maintenance"], project, project)
    wall = time.perf_counter() - started
    statements = outcome.sql_statements
    results = parse_result_lines(outcome.log_messages)
    return {"ok": outcome.success, "error": outcome.exception, "wall_s": round(wall, 2),
            "statements": len(statements), "calls": sum(is_call(sql) for sql, _, _ in statements),
            "results": {s: sum(r.status == s for r in results) for s in ("success", "skipped", "failed")},
            "steps_run": _steps_run((r.table, r.operation) for r in results if r.executed)}


def fleet_night(project: Path, catalog_config: Any, concurrency: int) -> dict[str, Any]:
    from dbt_iceberg_maint.fleet import run_fleet

    started = time.perf_counter()
    report = run_fleet(project_dir=project, profiles_dir=project, catalog=catalog_config, concurrency=concurrency)
    wall = time.perf_counter() - started
    document = report.to_dict()
    return {"ok": report.exit_code == 0, "wall_s": round(wall, 2), "statements": document["totals"]["statements"],
            "calls": document["totals"]["calls"], "planning_s": document["totals"]["planning_s"],
            "results": {s: document["counts"][s] for s in ("success", "skipped", "failed")},
            "steps_run": _steps_run((r["table"], r["operation"]) for r in document["results"]
                                    if r["status"] in ("success", "failed")),
            "failed": [(r["table"], r["operation"], (r["reason"] or "")[:300]) for r in document["results"]
                       if r["status"] == "failed"]}


def _steps_run(steps: Iterable[tuple[str, str]]) -> list[str]:
    """`<table> <operation>` of every step that ran, the table without its namespace."""
    return sorted(f"{table.rsplit('.', 1)[-1]} {operation}" for table, operation in steps)


def run_scale(tables: int, work: Path, catalog: Any, service: ThriftService, legacy: Path | None,
              concurrency: Sequence[int]) -> dict[str, Any]:
    from dbt_iceberg_maint.metadata.catalog import CatalogConfig, open_catalog

    namespace = f"lake_{tables}"
    kinds = table_kinds(tables)
    config = CatalogConfig("local", catalog.properties())
    metadata = open_catalog(config)
    iceberg = metadata.catalog
    began = time.perf_counter()
    build_lake(iceberg, namespace, kinds)
    built_s = time.perf_counter() - began
    server = service.server
    current = write_project(work / f"project-{tables}", namespace, list(kinds), harness.REPO, server.host, server.port)
    # Night 0: everything maintained once, at concurrency 2 (4 was slower than 2 on two cores).
    first = fleet_night(current, config, 2)
    record_swept(iceberg, namespace, kinds)
    night_changes(iceberg, namespace, kinds)
    root = table_dir(iceberg, namespace, next(iter(kinds))).parent
    state = Snapshot(iceberg, namespace, root, work / f"backup-{tables}")
    measured: dict[str, dict[str, Any]] = {}
    healths: dict[str, dict[str, Any]] = {}
    plan: list[tuple[str, Any]] = [("b_macros_now", lambda: macro_night(current))]
    plan += [(f"c_fleet_{n}", (lambda n=n: fleet_night(current, config, n))) for n in concurrency]
    projects = [current]
    if legacy is not None:
        # (a) runs last: the heap its long night leaves must not slow the others (it meets a
        # server they warmed, which can only favour it).
        old = write_project(work / f"legacy-{tables}", namespace, list(kinds), legacy, server.host, server.port)
        plan.append(("a_macros_legacy", lambda: macro_night(old)))
        projects.append(old)
    for name, night in plan:
        state.restore()
        measured[name] = night()
        healths[name] = end_health(metadata, namespace, list(kinds))
        measured[name]["orphans_left"] = orphans_left(root)
        if not measured[name]["ok"]:
            service.restart()
            measured[name]["server_restarted_after"] = True
            for project in projects:
                write_profile(project, namespace, service.server.host, service.server.port)
        print(f"  {tables} tables, {name}: {measured[name]['wall_s']} s, {measured[name]['calls']} CALL(s), "
              f"{measured[name]['statements']} statement(s)", flush=True)
    variants = dict(sorted(measured.items()))  # a, b, c by concurrency
    reference = healths["b_macros_now"]
    for name in variants:
        differing = sorted(t for t in reference if healths[name].get(t) != reference[t])
        variants[name]["health_differs_from_b"] = differing
        # The fixed point: a table nothing wrote to since night 0 gets no step.
        variants[name]["unchanged_tables_maintained"] = sorted(
            {step.split()[0] for step in variants[name]["steps_run"] if kinds[step.split()[0]] == "unchanged"})
    unhealthy = {t: h for t, h in reference.items() if h.get("small_files", 0) >= 5 or "error" in h}
    return {"tables": tables, "kinds": {k: sum(v == k for v in kinds.values()) for k in set(kinds.values())},
            "build_s": round(built_s, 1), "first_night": first, "variants": variants,
            "tables_left_unhealthy_by_b": sorted(unhealthy)}


def run(scales: Sequence[int], legacy_max: int, concurrency: Sequence[int], quick: bool,
        postgres: PostgresServer | None = None, cluster: SparkCluster | None = None,
        partial: Callable[[dict[str, Any]], object] | None = None, driver_memory: str = "8g") -> dict[str, Any]:
    """The benchmark; `postgres` and `cluster` given (the test suite's) are used and left running;
    `partial` gets the figures so far after each scale; `driver_memory`: the Thrift Server's heap,
    the same for every variant."""
    from lab.cluster import JdbcCatalog, start_cluster, start_cluster_thrift_server
    from lab.postgres import start_server

    start = harness.run_start()
    work = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    owned: list[Any] = []
    try:
        with harness.LoadSampler() as load:
            if postgres is None:
                postgres = start_server()
                owned.append(postgres)
            catalog = JdbcCatalog(postgres, work / "warehouse")
            if cluster is None:
                cluster = start_cluster(work / "cluster")
                owned.append(cluster)
            # No table cache: the lake is restored under the server between variants. The driver's
            # heap: at 768 MB (the lab's default) the legacy variant's 300-table night ran it out
            # of heap (Task serialization failed: OutOfMemoryError), at 4 GB its 1,000-table one.
            service = ThriftService(lambda n: start_cluster_thrift_server(
                cluster, catalog, work / f"thrift-{n}", name=f"fleet-{n}", driver_memory=driver_memory,
                extra_conf={"spark.sql.catalog.local.cache-enabled": "false"}))
            owned.append(service)
            legacy = legacy_package(work)
            figures: list[dict[str, Any]] = []
            for tables in scales:
                figures.append(run_scale(tables, work, catalog, service, legacy if tables <= legacy_max else None,
                                         concurrency))
                if partial is not None:  # a long run keeps what it measured if a later scale fails
                    partial(results(figures, quick, False, start, load))
    finally:
        for running in reversed(owned):
            running.stop()
        shutil.rmtree(work, ignore_errors=True)
    return results(figures, quick, True, start, load)


# fleet.json's variant names (docs/benchmarks-fleet.md) for the keys run_scale uses.
CONTRACT_NAMES = {"a_macros_legacy": "iceberg_maintenance", "b_macros_now": "iceberg_maintenance_tiered"}


def contract_variants(scales: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """fleet.json's `variants`: one flat record per variant and scale, named as the contract names
    them (the macro paths run one table at a time: concurrency 1); the per-scale detail stays
    under `scales`."""
    flat = []
    for scale in scales:
        changed = sum(scale["kinds"].get(kind, 0) for kind in CHANGED_KINDS)
        for key, v in scale["variants"].items():
            fleet_workers = key.removeprefix("c_fleet_")
            name, concurrency = ("fleet", int(fleet_workers)) if fleet_workers != key else (CONTRACT_NAMES[key], 1)
            flat.append({"name": name, "key": key, "tables": scale["tables"], "changed_tables": changed,
                         "concurrency": concurrency,
                         "ok": v["ok"], "wall_s": v["wall_s"], "calls": v["calls"], "statements": v["statements"],
                         "end_health_equal": v["ok"] and not v["health_differs_from_b"]})
    return flat


def results(scales: list[dict[str, Any]], quick: bool, complete: bool, start: harness.RunStart,
            load: harness.LoadSampler) -> dict[str, Any]:
    """fleet.json: the contract's flat `variants`, `commit` and `load` (the load average at start
    and end), then the detail of every scale and the rest of the provenance."""
    provenance = harness.provenance(start, load)
    return {"benchmark": NAME, "complete": complete, "quick": quick, "variants": contract_variants(scales),
            "commit": provenance["commit"], "load": provenance["load_average"], "legacy_commit": LEGACY_COMMIT,
            "policy": POLICY, "scales": scales, **provenance}


def plot(figures: Mapping[str, Any], path: Path) -> None:
    fig, ax = harness.pyplot().subplots(figsize=(8, 4.5))
    names = sorted({name for scale in figures["scales"] for name in scale["variants"]})
    for name in names:
        points = [(s["tables"], s["variants"][name]["wall_s"]) for s in figures["scales"] if name in s["variants"]]
        ax.plot(*zip(*points, strict=True), marker="o", label=name)
    ax.set_xlabel("tables in the lake")
    ax.set_ylabel("one night's wall time (s)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title(f"P6 fleet: one maintenance night (commit {str(figures.get('commit'))[:8]})")
    harness.save_figure(fig, path)


def summary(figures: Mapping[str, Any]) -> None:
    for scale in figures["scales"]:
        print(f"{scale['tables']} tables (built in {scale['build_s']} s): {scale['kinds']}")
        for name, v in scale["variants"].items():
            print(f"  {name:16} {v['wall_s']:8.1f} s  {v['calls']:5} CALLs  {v['statements']:6} statements  "
                  f"ok={v['ok']}  health differs from b on {len(v['health_differs_from_b'])} table(s), "
                  f"unchanged tables maintained: {len(v['unchanged_tables_maintained'])}")


def main() -> None:
    parser = harness.parser(NAME, __doc__, f"one lake of {QUICK_SCALES[0]} tables, every variant")
    parser.add_argument("--tables", default=None, help="scales, comma separated (default 100,300,1000)")
    parser.add_argument("--legacy-max-tables", type=int, default=1000,
                        help="run variant (a) only on lakes up to this size (default 1000)")
    # At 1,000 tables variant (a) planned for 21 minutes, then ran a 4 GB driver out of heap.
    parser.add_argument("--driver-memory", default="8g", help="the Thrift Server's driver heap (default 8g)")
    args = parser.parse_args()
    scales = tuple(int(t) for t in args.tables.split(",")) if args.tables else (
        QUICK_SCALES if args.quick else FULL_SCALES)
    figures = run(scales, args.legacy_max_tables, CONCURRENCY, args.quick,
                  partial=lambda so_far: harness.write_results(f"{NAME}.partial", so_far, args.results),
                  driver_memory=args.driver_memory)
    harness.publish(NAME, figures, args.results, plot, summary)
    (args.results / f"{NAME}.partial.json").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
