"""Side by side with a peer (issue 57): our `dbt-iceberg-maint maintain` and iceberg-zamboni's
`zamboni maintenance` on the same lake, each from the same restored state.

The lake: --tables tables (default 20) of --appends small appends each (default 30), one Iceberg
table partitioned by day (each of its appends spans 5 days: 5 files), built once with Spark on the
embedded catalog (Iceberg's JDBC catalog on a SQLite file in the warehouse). The warehouse
directory, catalog file included, is then copied aside: the restore point. Table locations in
Iceberg metadata are absolute, so each tool gets a fresh copy restored at the same path.

The work, the same for both: compaction of every table, then snapshot expiry keeping only the
newest snapshot (older than 0 h); no manifest rewrite, no orphan removal. With --metadata-files N
each tool also runs once more from the same state with the metadata-file retention added: ours
`expire_snapshots: {retain_metadata_files: N}`, theirs its config's `metadata` block
(`previous_versions_max: N`, `delete_after_commit: true`) and the `apply-properties` operation.
  ours:   `dbt-iceberg-maint maintain --include-catalog 'lake.*' --concurrency N --output json` in a
          dbt project that declares none of the tables (so the fleet engine takes them from the
          catalog with the var `dbt_iceberg_maint_catalog_policy`), its profile the `session`
          target of integration_tests/profiles.yml as docs/getting-started.md tells a user to copy
          it, the environment from `dbt-iceberg-maint env`;
  theirs: `zamboni maintenance --local-warehouse DIR --db local --yes` (pyiceberg and DuckDB, no
          JVM), installed into the benchmark's own venv (.venv-peers, created on first
          use; never a dependency of the product), with a table-config.json from its own
          `table-config generate`, edited to the same work. Its `--local-warehouse` opens
          `DIR/catalog.db` as SQL catalog `local`: a symbolic link to the warehouse's
          `iceberg_catalog.db` (Iceberg's JDBC catalog schema, which pyiceberg's SqlCatalog reads).

Recorded for each tool: wall time of the command (process start to exit), and before and after it:
data files and snapshots of every table (from its metadata), data files on disk that no snapshot
references, files and bytes on disk (every regular file under the warehouse, split into the lake's
tables, other tables and the catalog file), and each table's rows (count and an order-independent
hash, computed by Spark in a process of its own, lab/peer_lake.py, the same way for every state).
For ours also where the time goes (the fleet report's planning, steps, CALLs and statements).
Writes benchmarks/results/peers.{json,png} (peers.partial.json while it runs)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks import harness
from lab.peer_lake import NAMESPACE, table_names

NAME = "peers"
PEER = "iceberg-zamboni"
PEER_VERSION = "0.7.0"
# The peer's own venv, beside the project's .venv (outside the folders the suite scans as sources).
PEER_VENV = harness.REPO / ".venv-peers"
FULL_SHAPE = (20, 30)  # tables, appends per table
QUICK_SHAPE = (3, 5)
CONCURRENCY = (1,)  # maintain's default concurrency is 1 too
CATALOG_FILE = "iceberg_catalog.db"
PEER_CATALOG_LINK = "catalog.db"  # what zamboni's --local-warehouse opens
# Compaction of every table (from 2 small files), expiry keeping the newest snapshot only.
POLICY = ("{compaction: {min_input_files: 2}, expire_snapshots: {older_than_hours: 0, retain_last: 1%s}, "
          "rewrite_manifests: false, remove_orphan_files: false}")
PEER_OPERATIONS = "compact,expire"
PEER_RETENTION_OPERATION = "apply-properties"


def policy(metadata_files: int | None = None) -> str:
    """Our catalog policy; with `metadata_files`, the expiry's metadata-file retention too."""
    return POLICY % ("" if metadata_files is None else f", retain_metadata_files: {metadata_files}")


def peer_operations(metadata_files: int | None = None) -> str:
    return PEER_OPERATIONS if metadata_files is None else f"{PEER_OPERATIONS},{PEER_RETENTION_OPERATION}"


class PeerUnavailable(RuntimeError):
    """The peer's venv could not be made (no network to PyPI, most likely)."""


# ---- the peer's own venv ------------------------------------------------------------------------

def peer_command(venv: Path = PEER_VENV) -> Path:
    """`zamboni` of the benchmark's own venv, created (python -m venv + pip install) when missing."""
    zamboni = venv / "bin" / "zamboni"
    if zamboni.is_file() and _peer_version(venv) == PEER_VERSION:
        return zamboni
    steps = ([sys.executable, "-m", "venv", "--clear", str(venv)],
             [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", f"{PEER}=={PEER_VERSION}"])
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False, timeout=900)
        if done.returncode != 0:
            raise PeerUnavailable(
                f"cannot install {PEER}=={PEER_VERSION} into {venv} (`{' '.join(step)}` exited {done.returncode}; "
                f"it needs PyPI): {(done.stderr or done.stdout).strip()[-1500:]}")
    if not zamboni.is_file():
        raise PeerUnavailable(f"{PEER}=={PEER_VERSION} installed into {venv} but {zamboni} is missing")
    return zamboni


def _peer_version(venv: Path) -> str | None:
    done = subprocess.run([str(venv / "bin" / "python"), "-c",
                           f"from importlib.metadata import version; print(version('{PEER}'))"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def peer_versions(venv: Path = PEER_VENV) -> dict[str, str | None]:
    script = ("import json; from importlib.metadata import version as v; "
              "print(json.dumps({d: v(d) for d in ('iceberg-zamboni', 'pyiceberg', 'pyarrow', 'duckdb')}))")
    done = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else {}


# ---- the lake, its restore point and its figures ------------------------------------------------

def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This checkout's code first on the path of every child process (the commit measured)."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(harness.REPO) + (os.pathsep + path if path else ""), **(extra or {})}


def spark_job(job: str, warehouse: Path, tables: int, appends: int = 0) -> Any:
    """lab/peer_lake.py's `build` or `checksum` in a process (and JVM) of its own."""
    done = subprocess.run([sys.executable, "-m", "lab.peer_lake", job, "--warehouse", str(warehouse),
                           "--tables", str(tables), "--appends", str(appends)],
                          capture_output=True, text=True, env=_env(), check=False, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"lab.peer_lake {job} failed ({done.returncode}): {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def restore(point: Path, warehouse: Path) -> None:
    shutil.rmtree(warehouse, ignore_errors=True)
    shutil.copytree(point, warehouse, symlinks=True)


def _metadata_locations(warehouse: Path) -> dict[tuple[str, str], str]:
    import sqlite3

    connection = sqlite3.connect(warehouse / CATALOG_FILE)
    try:
        rows = connection.execute("select table_namespace, table_name, metadata_location from iceberg_tables "
                                  "where catalog_name = 'local'").fetchall()
    finally:
        connection.close()
    return {(namespace, name): location for namespace, name, location in rows}


def _disk(root: Path) -> tuple[int, int]:
    """(regular files, bytes) under root; symbolic links are not counted."""
    files = size = 0
    for folder, _, names in os.walk(root):
        for name in names:
            stat = os.lstat(os.path.join(folder, name))
            if not os.path.islink(os.path.join(folder, name)):
                files, size = files + 1, size + stat.st_size
    return files, size


def lake_figures(warehouse: Path, tables: int) -> dict[str, Any]:
    """Per lake table: data files (current snapshot), snapshots, data files on disk, and those of
    them no snapshot references; for the warehouse: files and bytes on disk, split."""
    from pyiceberg.table import StaticTable

    locations = _metadata_locations(warehouse)
    per_table: dict[str, dict[str, int]] = {}
    for name in table_names(tables):
        table = StaticTable.from_metadata(locations[(NAMESPACE, name)])
        referenced: set[str] = set()
        for snapshot in table.metadata.snapshots:
            for manifest in snapshot.manifests(table.io):
                referenced.update(entry.data_file.file_path.removeprefix("file:")
                                  for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True))
        current = table.current_snapshot()
        summary = current.summary if current is not None and current.summary is not None else {}
        on_disk = {str(p) for p in (warehouse / NAMESPACE / name / "data").rglob("*.parquet")}
        per_table[name] = {"data_files": int(summary.get("total-data-files", 0)),
                           "snapshots": len(table.metadata.snapshots), "data_files_on_disk": len(on_disk),
                           "unreferenced_data_files_on_disk": len(on_disk - referenced)}
    lake_files = lake_bytes = 0
    for name in table_names(tables):
        files, size = _disk(warehouse / NAMESPACE / name)
        lake_files, lake_bytes = lake_files + files, lake_bytes + size
    all_files, all_bytes = _disk(warehouse)
    catalog_files = [p for p in warehouse.glob(CATALOG_FILE + "*") if not p.is_symlink()]
    catalog_bytes = sum(p.stat().st_size for p in catalog_files)
    return {"data_files": sum(t["data_files"] for t in per_table.values()),
            "snapshots": sum(t["snapshots"] for t in per_table.values()),
            "data_files_on_disk": sum(t["data_files_on_disk"] for t in per_table.values()),
            "unreferenced_data_files_on_disk": sum(t["unreferenced_data_files_on_disk"] for t in per_table.values()),
            "files_on_disk": all_files, "bytes_on_disk": all_bytes,
            "lake_tables": {"files": lake_files, "bytes": lake_bytes},
            "other_tables": {"files": all_files - lake_files - len(catalog_files),
                             "bytes": all_bytes - lake_bytes - catalog_bytes},
            "catalog_file": {"files": len(catalog_files), "bytes": catalog_bytes},
            "tables": per_table}


# ---- ours ---------------------------------------------------------------------------------------

def our_project(work: Path, warehouse: Path, metadata_files: int | None = None) -> tuple[Path, dict[str, str]]:
    """A dbt project declaring none of the lake's tables, its profile the integration project's
    `session` target (docs/getting-started.md), and the environment `dbt-iceberg-maint env` prints."""
    import yaml  # type: ignore[import-untyped]

    project = work / ("project" if metadata_files is None else f"project-metadata-{metadata_files}")
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(
        f"name: peers\nversion: '1.0'\nconfig-version: 2\nprofile: peers\n"
        f"vars:\n  dbt_iceberg_maint_catalog_policy: {policy(metadata_files)}\n")
    session = yaml.safe_load((harness.REPO / "integration_tests" / "profiles.yml").read_text())[
        "iceberg_maint_integration_tests"]["outputs"]["session"]
    output = {"type": "spark", "method": "session", "host": "NA", "schema": NAMESPACE, "threads": 1,
              "server_side_parameters": session["server_side_parameters"]}
    (project / "profiles.yml").write_text(yaml.safe_dump({"peers": {"target": "dev", "outputs": {"dev": output}}}))
    (project / "packages.yml").write_text(f"packages:\n  - local: {harness.REPO}\n")
    done = subprocess.run([str(_cli()), "env", "--warehouse", str(warehouse), "--output", "json"],
                          capture_output=True, text=True, env=_env(), check=True)
    env = {key: str(value) for key, value in json.loads(done.stdout).items()}
    deps = subprocess.run([str(Path(sys.executable).parent / "dbt"), "deps", "--quiet", "--project-dir",
                           str(project), "--profiles-dir", str(project)], capture_output=True, text=True,
                          env=_env(env), check=False, cwd=project)
    if deps.returncode != 0:
        raise RuntimeError(f"dbt deps failed: {deps.stdout[-2000:]} {deps.stderr[-2000:]}")
    return project, env


def _cli() -> Path:
    return Path(sys.executable).parent / "dbt-iceberg-maint"


def run_ours(project: Path, env: Mapping[str, str], concurrency: int, work: Path) -> dict[str, Any]:
    report_path = work / f"ours-{project.name}-{concurrency}.json"
    command = [str(_cli()), "maintain", "--include-catalog", f"{NAMESPACE}.*", "--concurrency", str(concurrency),
               "--output", "json", "--report", str(report_path), "--project-dir", str(project),
               "--profiles-dir", str(project)]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=_env(env), cwd=project, check=False)
    wall = time.perf_counter() - began
    (work / f"ours-{project.name}-{concurrency}.stderr").write_text(done.stderr)
    report = json.loads(report_path.read_text()) if report_path.is_file() else None
    return {"command": " ".join(["dbt-iceberg-maint", *command[1:]]).replace(str(project), "PROJECT"),
            "exit_code": done.returncode, "wall_s": round(wall, 2),
            "error": None if done.returncode == 0 else done.stderr[-2000:],
            "time": our_time(report, wall) if report else None}


def our_time(report: Mapping[str, Any], wall: float) -> dict[str, Any]:
    """Where our wall time goes: outside the engine (process, JVM and dbt start), planning, and per
    operation its steps' time, of which the CALLs' own time, and the statements sent."""
    totals = report["totals"]
    operations: dict[str, dict[str, Any]] = {}
    for result in report["results"]:
        if result.get("status") not in ("success", "failed"):
            continue
        op = operations.setdefault(result["operation"], {"steps": 0, "step_s": 0.0, "call_s": 0.0, "statements": 0,
                                                         "failed": 0})
        op["steps"] += 1
        op["failed"] += result["status"] == "failed"
        op["step_s"] += result.get("duration_s") or 0.0
        op["call_s"] += sum((c["ended_ms"] - c["started_ms"]) / 1000 for c in result.get("calls") or [])
        op["statements"] += result.get("statements") or 0
    steps = [{"table": r["table"], "operation": r["operation"], "status": r["status"],
              "duration_s": r.get("duration_s"),
              "call_s": round(sum((c["ended_ms"] - c["started_ms"]) / 1000 for c in r.get("calls") or []), 2),
              "statements": r.get("statements")}
             for r in report["results"] if r.get("status") in ("success", "failed")]
    for op in operations.values():
        op["step_s"], op["call_s"] = round(op["step_s"], 2), round(op["call_s"], 2)
        op["outside_call_s"] = round(op["step_s"] - op["call_s"], 2)
    engine = totals["planning_s"] + totals["execution_s"]
    return {"outside_engine_s": round(wall - engine, 2), "planning_s": round(totals["planning_s"], 2),
            "execution_s": round(totals["execution_s"], 2), "statements": totals["statements"],
            "calls": totals["calls"], "counts": report.get("counts"), "worker_mode": report.get("worker_mode"),
            "operations": operations, "steps": steps}


# ---- theirs -------------------------------------------------------------------------------------

def peer_table_config(zamboni: Path, warehouse: Path, work: Path, metadata_files: int | None = None) -> Path:
    """zamboni's own starter config of the lake, edited to the same work as ours."""
    config = work / ("table-config.json" if metadata_files is None else f"table-config-metadata-{metadata_files}.json")
    with peer_catalog(warehouse):
        subprocess.run([str(zamboni), "table-config", "generate", "--local-warehouse", str(warehouse), "--db",
                        "local", "--namespace", NAMESPACE, "-o", str(config), "--force"], capture_output=True,
                       text=True, check=True, cwd=work)
    document = json.loads(config.read_text())
    defaults = document["defaults"]
    defaults["partition_evolution"]["enabled"] = False  # its default would turn the old days into months
    defaults["min_input_files"] = 2
    retention = defaults["retention"]
    retention["expire_snapshots"].update(enabled=True, max_snapshot_age_days=0, min_snapshots_to_keep=1)
    for section in ("remove_orphan_files", "remove_dangling_deletes", "rewrite_manifests"):
        retention[section]["enabled"] = False
    if metadata_files is not None:
        retention["metadata"].update(previous_versions_max=metadata_files, delete_after_commit=True)
    config.write_text(json.dumps(document, indent=2) + "\n")
    subprocess.run([str(zamboni), "validate-config", str(config)], capture_output=True, text=True, check=True)
    return config


@contextlib.contextmanager
def peer_catalog(warehouse: Path) -> Iterator[None]:
    """`catalog.db`, the SQL catalog zamboni's --local-warehouse opens, as a link to ours while it
    runs. SQLite follows the link, so its WAL is the catalog file's own; checked after."""
    link = warehouse / PEER_CATALOG_LINK
    link.symlink_to(CATALOG_FILE)
    try:
        yield
    finally:
        link.unlink()
    if (warehouse / f"{PEER_CATALOG_LINK}-wal").exists():
        raise RuntimeError("zamboni left its commits in a WAL beside the link, not in the catalog file")


def run_theirs(zamboni: Path, config: Path, warehouse: Path, work: Path, operations: str = PEER_OPERATIONS
               ) -> dict[str, Any]:
    summary = work / "zamboni-run.jsonl"
    summary.unlink(missing_ok=True)
    command = [str(zamboni), "maintenance", "--table-config", str(config), "--local-warehouse", str(warehouse),
               "--db", "local", "--operations", operations, "--yes", "--json", str(summary)]
    with peer_catalog(warehouse):
        began = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=work, check=False)
        wall = time.perf_counter() - began
    (work / f"zamboni-{config.stem}.stdout").write_text(done.stdout + done.stderr)
    run = json.loads(summary.read_text().splitlines()[-1]) if summary.is_file() and summary.read_text() else {}
    outcomes = run.get("outcomes", [])
    by_operation: dict[str, dict[str, Any]] = {}
    for outcome in outcomes:
        op = by_operation.setdefault(outcome["operation"], {"ok": 0, "skipped": 0, "failed": 0, "files_deleted": 0})
        op["ok" if outcome["ok"] and not outcome["skipped"] else "skipped" if outcome["skipped"] else "failed"] += 1
        op["files_deleted"] += (outcome.get("result") or {}).get("files_deleted") or 0
    return {"command": " ".join(["zamboni", *command[1:]]).replace(str(work), "WORK"), "exit_code": done.returncode,
            "wall_s": round(wall, 2), "reported_duration_s": run.get("duration_seconds"),
            "error": None if done.returncode == 0 else (done.stdout + done.stderr)[-2000:],
            "operations": by_operation}


# ---- the run ------------------------------------------------------------------------------------

def run(tables: int, appends: int, concurrency: Sequence[int], quick: bool,
        partial: Callable[[dict[str, Any]], object] | None = None, venv: Path = PEER_VENV,
        keep: bool = False, metadata_files: int | None = None) -> dict[str, Any]:
    """The benchmark; `keep`: leave the work folder (each tool's lake as it left it, the logs);
    `metadata_files`: each tool also runs with that metadata-file retention added."""
    start = harness.run_start()
    zamboni = peer_command(venv)  # before anything else: without the peer there is no comparison
    work = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    warehouse, point = work / "warehouse", work / "restore-point"
    works: list[int | None] = [None] if metadata_files is None else [None, metadata_files]
    figures: dict[str, Any] = {"tables": tables, "appends": appends, "policy": policy(),
                               "peer_operations": PEER_OPERATIONS, "peer_versions": peer_versions(venv), "runs": []}
    if metadata_files is not None:
        figures.update(policy_metadata_files=policy(metadata_files),
                       peer_operations_metadata_files=peer_operations(metadata_files))
    try:
        with harness.LoadSampler() as load:
            began = time.perf_counter()
            spark_job("build", warehouse, tables, appends)
            figures["build_s"] = round(time.perf_counter() - began, 1)
            shutil.copytree(warehouse, point, symlinks=True)
            figures["before"] = lake_figures(warehouse, tables)
            figures["rows_before"] = original = spark_job("checksum", warehouse, tables)
            plan: list[tuple[str, int | None, int | None, Callable[[], dict[str, Any]]]] = []
            for kept in works:
                project, env = our_project(work, warehouse, kept)
                config = peer_table_config(zamboni, warehouse, work, kept)
                plan += [("dbt-iceberg-maint", n, kept, functools.partial(run_ours, project, env, n, work))
                         for n in concurrency]
                plan.append((PEER, None, kept, functools.partial(run_theirs, zamboni, config, warehouse, work,
                                                                 peer_operations(kept))))
            for tool, workers, kept, measure in plan:
                restore(point, warehouse)
                if lake_figures(warehouse, tables) != figures["before"]:
                    raise RuntimeError("the restored lake differs from the restore point")
                measured = {"tool": tool, "concurrency": workers, "metadata_files": kept, **measure()}
                measured["after"] = lake_figures(warehouse, tables)
                measured["rows_after"] = rows = spark_job("checksum", warehouse, tables)
                measured["rows_equal"] = rows == original
                if keep:
                    shutil.copytree(warehouse, work / f"after-{tool}-{workers}-{kept}", symlinks=True)
                figures["runs"].append(measured)
                print(f"  {tool}{'' if workers is None else f' --concurrency {workers}'}"
                      f"{'' if kept is None else f' (metadata files {kept})'}: {measured['wall_s']} s, "
                      f"exit {measured['exit_code']}, data files {measured['after']['data_files']}, snapshots "
                      f"{measured['after']['snapshots']}, bytes {measured['after']['bytes_on_disk']}, "
                      f"rows equal {measured['rows_equal']}", flush=True)
                if partial is not None:
                    partial(results(figures, quick, False, start, load))
    finally:
        if keep:
            print(f"work folder kept: {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return results(figures, quick, True, start, load)


def contract_variants(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """peers.json's `variants` (docs/benchmarks-peers.md): one flat record per tool run."""
    return [{"tool": r["tool"], "concurrency": r["concurrency"], "metadata_files": r.get("metadata_files"),
             "ok": r["exit_code"] == 0, "wall_s": r["wall_s"],
             "data_files_after": r["after"]["data_files"], "snapshots_after": r["after"]["snapshots"],
             "bytes_on_disk_after": r["after"]["bytes_on_disk"], "files_on_disk_after": r["after"]["files_on_disk"],
             "unreferenced_data_files_after": r["after"]["unreferenced_data_files_on_disk"],
             "rows_equal": r["rows_equal"]} for r in runs]


def ratio(runs: Sequence[Mapping[str, Any]], with_metadata_files: bool = False) -> float | None:
    """Our wall time over theirs (ours at concurrency 1, else our first run), on the issue's work or,
    `with_metadata_files`, on the work with the metadata-file retention."""
    runs = [r for r in runs if (r.get("metadata_files") is not None) == with_metadata_files]
    ours = [r for r in runs if r["tool"] != PEER]
    theirs = [r for r in runs if r["tool"] == PEER]
    if not ours or not theirs:
        return None
    mine = next((r for r in ours if r["concurrency"] == 1), ours[0])
    return round(float(mine["wall_s"]) / float(theirs[0]["wall_s"]), 2)


def results(figures: Mapping[str, Any], quick: bool, complete: bool, start: harness.RunStart,
            load: harness.LoadSampler) -> dict[str, Any]:
    provenance = harness.provenance(start, load)
    return {"benchmark": NAME, "complete": complete, "quick": quick, "variants": contract_variants(figures["runs"]),
            "ratio_ours_over_theirs": ratio(figures["runs"]),
            "ratio_with_metadata_files": ratio(figures["runs"], with_metadata_files=True), **figures, **provenance,
            "versions": {**provenance["versions"], **{f"peer:{k}": v for k, v in figures["peer_versions"].items()}}}


def plot(figures: Mapping[str, Any], path: Path) -> None:
    fig, axes = harness.pyplot().subplots(1, 3, figsize=(11, 4))
    names = [("theirs" if v["tool"] == PEER else f"ours -c{v['concurrency']}")
             + ("" if v.get("metadata_files") is None else f" +meta {v['metadata_files']}")
             for v in figures["variants"]]
    before = figures["before"]
    panels = (("wall time (s)", [v["wall_s"] for v in figures["variants"]], None),
              ("data files on disk", [r["after"]["data_files_on_disk"] for r in figures["runs"]],
               before["data_files_on_disk"]),
              ("bytes on disk (KiB)", [r["after"]["bytes_on_disk"] / 1024 for r in figures["runs"]],
               before["bytes_on_disk"] / 1024))
    for ax, (label, values, was) in zip(axes, panels, strict=True):
        ax.bar(names, values, color=["tab:blue" if v["tool"] != PEER else "tab:orange" for v in figures["variants"]])
        if was is not None:
            ax.axhline(was, color="grey", linestyle="--", label="before")
            ax.legend()
        ax.set_title(label)
        ax.tick_params(axis="x", labelrotation=15)
    fig.suptitle(f"peers: {figures['tables']} tables x {figures['appends']} appends, compaction + expiry "
                 f"(commit {str(figures.get('commit'))[:8]}, ours/theirs {figures.get('ratio_ours_over_theirs')}x)")
    harness.save_figure(fig, path)


def summary(figures: Mapping[str, Any]) -> None:
    before = figures["before"]
    print(f"{figures['tables']} tables x {figures['appends']} appends (built in {figures['build_s']} s): "
          f"{before['data_files']} data files, {before['snapshots']} snapshots, {before['bytes_on_disk']} bytes")
    for r in figures["runs"]:
        after = r["after"]
        print(f"  {r['tool']:18} c={r['concurrency']!s:4} metadata files {r.get('metadata_files')!s:4} "
              f"{r['wall_s']:8.1f} s  exit {r['exit_code']}  "
              f"data files {after['data_files']:4}  snapshots {after['snapshots']:4}  on disk "
              f"{after['data_files_on_disk']} data files ({after['unreferenced_data_files_on_disk']} unreferenced), "
              f"{after['files_on_disk']} files, {after['bytes_on_disk']} bytes  rows equal {r['rows_equal']}")
        if r.get("time"):
            t = r["time"]
            print(f"    outside the engine {t['outside_engine_s']} s, planning {t['planning_s']} s, steps "
                  f"{t['execution_s']} s, {t['statements']} statements, {t['calls']} CALLs")
            for name, op in t["operations"].items():
                print(f"    {name:22} {op['steps']:3} steps {op['step_s']:8.1f} s, CALLs {op['call_s']:7.1f} s, "
                      f"{op['statements']} statements")
    retained = figures.get("ratio_with_metadata_files")
    print(f"ours / theirs: {figures['ratio_ours_over_theirs']}x"
          + ("" if retained is None else f"; with the metadata-file retention: {retained}x"))


def main() -> None:
    parser = harness.parser(NAME, __doc__, f"{QUICK_SHAPE[0]} tables x {QUICK_SHAPE[1]} appends")
    parser.add_argument("--tables", type=int, default=None, help=f"tables in the lake (default {FULL_SHAPE[0]})")
    parser.add_argument("--appends", type=int, default=None, help=f"appends per table (default {FULL_SHAPE[1]})")
    parser.add_argument("--concurrency", default=None,
                        help="our maintain's --concurrency values, comma separated (default 1, its default)")
    parser.add_argument("--metadata-files", type=int, default=None,
                        help="also run each tool with this metadata-file retention (previous metadata files kept)")
    parser.add_argument("--keep-work", action="store_true",
                        help="leave the work folder: each tool's lake as it left it, the logs")
    args = parser.parse_args()
    tables = harness.count(parser, "tables", args.tables, FULL_SHAPE[0], QUICK_SHAPE[0], args)
    appends = harness.count(parser, "appends", args.appends, FULL_SHAPE[1], QUICK_SHAPE[1], args, least=2)
    concurrency = tuple(int(c) for c in args.concurrency.split(",")) if args.concurrency else CONCURRENCY
    if args.metadata_files is not None and args.metadata_files < 1:
        parser.error(f"argument --metadata-files: {args.metadata_files} is not allowed; expected a whole number >= 1")
    try:
        figures = run(tables, appends, concurrency, args.quick, keep=args.keep_work, metadata_files=args.metadata_files,
                      partial=lambda so_far: harness.write_results(f"{NAME}.partial", so_far, args.results))
    except PeerUnavailable as exc:
        parser.exit(1, f"error: {exc}\n")
    harness.publish(NAME, figures, args.results, plot, summary)
    (args.results / f"{NAME}.partial.json").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
