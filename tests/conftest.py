"""Shared fixtures: one local Spark + Iceberg session per pytest session (one JVM)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from dbt_iceberg_maint.cli.demo import BATCH_ENV
from dbt_iceberg_maint.maintenance.leases import RUN_ID_ENV

# The conflict gate's one import for the new tests (it may move to tests/support): they take it
# through the `conflict_gate` fixture below.
from dbt_iceberg_maint.runtime._conflict_gate import ConflictGate
from dbt_iceberg_maint.runtime.invoke import (
    DbtInvocation,
    invoke_dbt,
    kept_parse_state,
)
from dbt_iceberg_maint.runtime.spark import (
    WAREHOUSE_ENV,
    resolve_iceberg_runtime,
    start_session,
    switch_warehouse,
)
from lab.postgres import ensure_jdbc_jar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Session-scoped lab fixtures (PostgreSQL, the Spark standalone cluster, the JDBC catalog, in
# tests/lab_fixtures.py), registered once here: importing them into several modules would start
# each several times.
pytest_plugins = ["tests.lab_fixtures"]


# The suite's JVMs (Spark sessions, Thrift Servers, the cluster, the metastore, the lab's workers)
# live for seconds to minutes and run small queries: the C1 compiler alone compiles them well
# enough, and skipping the bytecode verification of the trusted jars they load saves more. Both
# leave behaviour alone. Measured: a session started, a table written, compacted and counted took
# 17-21 core-seconds at the JVM's defaults and 9-13 with them; three integration files in one
# process 134 and 96.
# C1 alone also shrinks the JVM's default code cache from 240 to 48 MB, which Spark's generated
# classes can fill: the wheel demo's JVM did on a fresh clone ("Out of space in CodeCache for
# adapters" killed its executor, then its dbt run-operation). So the default size is restored.
# The environment variable reaches every JVM the suite starts, directly or through a subprocess;
# users' JVMs and `./scripts/bench` keep the JVM's defaults.
SUITE_JAVA_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m", "-XX:+UnlockDiagnosticVMOptions",
                      "-XX:-BytecodeVerificationRemote")
# The session JVM of each pytest worker (the `spark` fixture) too, though it lives as long as the
# worker: its C2 compiler never paid back. Spark plans every statement with code it has not run
# hot yet, so C2 kept compiling all along (about 130 methods a second after six minutes), and its
# compiler threads took 185 of the JVM's 329 core-seconds over four integration files on two
# workers. Those files took 267 s with C2, 188 s with C1 alone (both workers alike).


def suite_java_options(current: str) -> str:
    """`current` (a user's own JAVA_TOOL_OPTIONS come first) with the suite's options, once."""
    options = current.split()
    return " ".join([*options, *(o for o in SUITE_JAVA_OPTIONS if o not in options)])


def pytest_configure(config: pytest.Config) -> None:
    """The suite's JVM options (SUITE_JAVA_OPTIONS). Under pytest-xdist (./scripts/test runs most
    of the suite on two workers) each worker gets dbt target and log folders of its own for the
    invocations that name none: two processes never write one partial-parse state or one set of
    artifacts. The target folder is relative, so dbt puts it under each project's own folder: an
    absolute one would give every project (a test's lake project too) one manifest.json, and the
    fleet engine would read another project's."""
    os.environ["JAVA_TOOL_OPTIONS"] = suite_java_options(os.environ.get("JAVA_TOOL_OPTIONS", ""))
    controller = not os.environ.get("PYTEST_XDIST_WORKER")
    if controller and getattr(getattr(config, "option", None), "dist", "no") == "loadgroup":
        os.environ[GROUPS_ENV] = tempfile.mkdtemp(prefix="dbt_iceberg_maint_test_groups_")  # workers inherit it
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        os.environ.setdefault("DBT_TARGET_PATH", f"target/{worker}")
        logs = Path(__file__).resolve().parents[1] / "integration_tests" / "logs" / worker
        os.environ.setdefault("DBT_LOG_PATH", str(logs))


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    # The PostgreSQL JDBC driver must be on the driver's classpath from the start (a JDBC
    # catalog is added to this session by tests/integration/test_metadata_jdbc.py); start_session
    # adds the SQLite driver of the embedded catalog itself.
    jdbc_jar = ensure_jdbc_jar()
    extra: dict[str, str] = {}
    if jdbc_jar:
        extra["spark.jars"] = ",".join([*resolve_iceberg_runtime().jars, str(jdbc_jar)])
    session = start_session(tmp_path_factory.mktemp("initial_warehouse"), extra_conf=extra)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


PACKAGES_PATH_ENV = "DBT_ICEBERG_MAINT_PACKAGES_PATH"  # integration_tests/dbt_project.yml reads it


@pytest.fixture(scope="session")
def installed_package(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """`dbt deps` once per pytest process (each xdist worker) into a packages folder of its own
    (packages.yml: local ../, a link to this checkout), which every dbt call on the integration
    project then reads: no process writes another's install, and no module repeats it."""
    folder = tmp_path_factory.mktemp("dbt_packages")
    previous = os.environ.get(PACKAGES_PATH_ENV)
    os.environ[PACKAGES_PATH_ENV] = str(folder)
    try:
        invocation = invoke_dbt(["deps", "--quiet"])
        assert invocation.success, f"dbt deps into {folder} failed: {invocation.exception}"
        yield folder
    finally:
        if previous is None:
            os.environ.pop(PACKAGES_PATH_ENV, None)
        else:
            os.environ[PACKAGES_PATH_ENV] = previous


@pytest.fixture(scope="session")
def render_target(tmp_path_factory: pytest.TempPathFactory, installed_package: Path) -> Path:
    """The dbt target folder of the worker's render-only run-operations (tests/unit: macros that
    render SQL or check arguments and log the outcome). One per pytest process, so its partial-parse
    states (one per set of --vars and profile inputs, runtime/parse_states.py) outlive a test: each set is
    parsed in full once per worker, not once per test (4-6 s each). A process's in-process dbt
    invocations never overlap."""
    return tmp_path_factory.mktemp("render_target")


# The session services a module may use (fixture -> group). Each xdist worker starts a session
# fixture the first time one of its tests asks for it, so modules spread over both workers would
# start a Thrift Server, PostgreSQL and a Hive Metastore twice. Under `--dist loadgroup` (what
# ./scripts/test runs) every module that uses one service's fixtures runs on one worker; every
# other module is a work unit of its own, as under --dist loadfile. A module that asks for a
# service by name at run time (request.getfixturevalue) lists it in `SESSION_SERVICES`.
# (xdist's own loadgroup reads `xdist_group` marks through a node id suffix that pytest 9 no
# longer keeps, so the workers hand the groups to the controller's scheduler in a file.)
SERVICE_GROUPS = {"thrift_server": "thrift_server", "thrift_project": "thrift_server",
                  "postgres_server": "postgres", "hive_metastore": "postgres", "jdbc_catalog": "postgres"}
GROUPS_ENV = "DBT_ICEBERG_MAINT_TEST_GROUPS"  # the folder the workers write their module groups to


def module_groups(items: list[pytest.Item]) -> dict[str, str]:
    """Each collected module's work unit: the service group of the fixtures it uses, or itself."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    groups = {}
    for path, module_items in modules.items():
        used = {name for item in module_items for name in getattr(item, "fixturenames", ())}
        used.update(getattr(getattr(module_items[0], "module", None), "SESSION_SERVICES", ()))
        groups[path] = next((g for fixture, g in SERVICE_GROUPS.items() if fixture in used), path)
    return groups


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> Iterator[None]:
    result = yield
    folder, worker = os.environ.get(GROUPS_ENV), os.environ.get("PYTEST_XDIST_WORKER")
    if folder and worker:  # before the worker reports its collection, so before the controller schedules
        written = Path(folder) / f"{worker}.json.tmp"
        written.write_text(json.dumps(module_groups(items)))
        written.rename(written.with_suffix(""))
    return result


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = os.environ.get(GROUPS_ENV)
    if folder and not os.environ.get("PYTEST_XDIST_WORKER"):
        shutil.rmtree(folder, ignore_errors=True)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist", "no") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ServiceGroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """Work units by module, modules that share a service in one unit (module_groups)."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                self.groups = {k: v for f in Path(os.environ[GROUPS_ENV]).glob("*.json")
                               for k, v in json.loads(f.read_text()).items()}
            module = nodeid.split("::", 1)[0]
            return self.groups.get(module, module)

    return ServiceGroupScheduling(config, log)


# integration_tests/profiles.yml's `session` target reads the catalog type from it (default jdbc).
CATALOG_TYPE_ENV = "DBT_ICEBERG_MAINT_CATALOG_TYPE"


# The profile's `session` target reads the catalog URI from it (default: the embedded SQLite file).
CATALOG_URI_ENV = "DBT_ICEBERG_MAINT_CATALOG_URI"
HIVE_METASTORE = "hive_metastore"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module that names `CATALOGS` (e.g. `("embedded", "hive_metastore")`) runs all its tests
    once per catalog: the `catalog` fixture (and with it the module's warehouse, dbt project and
    every module-scoped fixture built on them) is parametrised at module scope. The first catalog
    named is the module's own; a repeat on another is marked `catalogs`: it runs in the lab tier
    (./scripts/lab). A module about one catalog alone runs in the test tier."""
    catalogs = getattr(metafunc.module, "CATALOGS", None)
    if catalogs and "catalog" in metafunc.fixturenames:
        params = [pytest.param(name, marks=pytest.mark.catalogs) if name != catalogs[0] else name
                  for name in catalogs]
        metafunc.parametrize("catalog", params, indirect=True, scope="module")


@pytest.fixture(scope="module")
def catalog(request: pytest.FixtureRequest) -> str:
    """Which catalog the module's warehouse is: `embedded` (the default, or the module's
    `CATALOG_PROPERTIES`) or `hive_metastore` (the session's real Hive Metastore)."""
    return str(getattr(request, "param", "embedded"))


@pytest.fixture(scope="module")
def warehouse(
    spark: SparkSession, catalog: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Path]:
    """A fresh warehouse for this test module, made the session's default catalog: the embedded
    default (Iceberg's JDBC catalog on a SQLite file in the warehouse). A module about a Hadoop
    catalog's own behaviour (its rename commit, its lock manager, version-hint.text) says so with
    `CATALOG_PROPERTIES = {"type": "hadoop"}`; one whose checks also hold on a Hive Metastore names
    `CATALOGS` (see pytest_generate_tests)."""
    path = tmp_path_factory.mktemp("warehouse")
    properties = dict(getattr(request.module, "CATALOG_PROPERTIES", {}))
    if catalog == HIVE_METASTORE:
        properties = request.getfixturevalue(HIVE_METASTORE).spark_catalog_properties(str(path.resolve()))
        properties.pop("warehouse")
    switch_warehouse(spark, path, properties=properties)
    saved = {name: os.environ.get(name) for name in (WAREHOUSE_ENV, CATALOG_TYPE_ENV, CATALOG_URI_ENV)}
    os.environ[WAREHOUSE_ENV] = str(path.resolve())
    os.environ[CATALOG_TYPE_ENV] = properties.get("type", "jdbc")
    if "uri" in properties:
        os.environ[CATALOG_URI_ENV] = properties["uri"]
    else:
        os.environ.pop(CATALOG_URI_ENV, None)
    yield path
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def invocation_env(env: dict[str, str], batch: int | None, run_id: str | None) -> dict[str, str]:
    """The seed batch the models load and the run id maintenance records, given to one dbt
    invocation through the environment (BATCH_ENV, RUN_ID_ENV) rather than --vars: dbt parses the
    whole project again whenever --vars change (about 3 s), only the files that read an
    environment variable when its value does."""
    return {**env, **({BATCH_ENV: str(batch)} if batch is not None else {}),
            **({RUN_ID_ENV: run_id} if run_id is not None else {})}


# The schema of every module whose warehouse is its own (the embedded or a Hadoop catalog in the
# module's folder). dbt's partial-parse check compares the profile's connection keys, schema
# among them, so one schema lets each module start from the states the worker's previous modules
# left (ParseSeed) instead of a full parse (4-6 s a module). Modules on a catalog that outlives
# them (PostgreSQL, the Hive Metastore, a Thrift Server's) keep a schema of their own.
SHARED_SCHEMA = "it"
PARSE_FLAGS = frozenset({"--vars", "--target", "-t"})  # the flags a ParseSeed keeps a state per


class ParseSeed:
    """The worker's latest partial-parse state of the integration project for each set of parse
    flags (--vars, --target), handed to a module's target folder the first time the module uses
    that set (runtime/parse_states.py keeps it from there). dbt checks every state it is given (files,
    profile, vars), so a stale seed costs a full parse, never a wrong one."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _seed(self, args: tuple[str, ...]) -> Path:
        flags = [a for i, a in enumerate(args)
                 if a.partition("=")[0] in PARSE_FLAGS or (i and args[i - 1] in PARSE_FLAGS)]
        return self.folder / f"{hashlib.sha256(json.dumps(flags).encode()).hexdigest()[:24]}.msgpack"

    def plant(self, args: tuple[str, ...], env: dict[str, str]) -> None:
        kept = kept_parse_state(args, env=env)
        seed = self._seed(args)
        if kept is None or kept.is_file() or not seed.is_file():
            return
        current = kept.parent / "current"
        if not (current.is_file() and current.read_text() == kept.stem):
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(seed, kept)

    def keep(self, args: tuple[str, ...], target: Path) -> None:
        state = target / "partial_parse.msgpack"
        if state.is_file():
            shutil.copyfile(state, self._seed(args))


class DbtProject:
    """The integration dbt project, invoked in-process against the module's warehouse.

    `folder`: the module's own dbt target and log folders (artifacts and dbt.log never leak
    between modules, so `-k`, `--lf` and reruns see what a whole run sees). The package is
    installed once per pytest process (`installed_package`); `seed` gives the module the
    worker's last partial-parse state for each set of parse flags it uses.
    """

    def __init__(self, schema: str, folder: Path | None = None, seed: ParseSeed | None = None) -> None:
        self.schema = schema
        self.env = {"DBT_ICEBERG_MAINT_SCHEMA": schema}
        self.target = folder / "target" if folder is not None else None
        self.seed = seed if self.target is not None else None
        if folder is not None:
            self.env.update({"DBT_TARGET_PATH": str(folder / "target"), "DBT_LOG_PATH": str(folder / "logs")})

    def __call__(self, *args: str, expect_success: bool = True, batch: int | None = None,
                 run_id: str | None = None) -> DbtInvocation:
        env = invocation_env(self.env, batch, run_id)
        if self.seed is not None:
            self.seed.plant(args, env)
        invocation = invoke_dbt([*args], env=env)
        if self.seed is not None and self.target is not None:
            self.seed.keep(args, self.target)
        if expect_success and not invocation.success:
            failures = [(n.name, n.message) for n in invocation.failed_nodes()]
            raise AssertionError(f"dbt {' '.join(args)} failed: {failures or invocation.exception}")
        return invocation

    def table(self, name: str) -> str:
        return f"local.{self.schema}.{name}"


@pytest.fixture(scope="module")
def dbt_project(
    warehouse: Path, installed_package: Path, catalog: str, parse_seed: ParseSeed, request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> DbtProject:
    module = request.module.__name__.rsplit(".", 1)[-1]
    folder = tmp_path_factory.mktemp(f"dbt_{module}")
    if catalog != "embedded" or uses_session_service(request):
        return DbtProject(schema=f"it_{module}", folder=folder)
    return DbtProject(schema=SHARED_SCHEMA, folder=folder, seed=parse_seed)


@pytest.fixture(scope="session")
def parse_seed(tmp_path_factory: pytest.TempPathFactory) -> ParseSeed:
    return ParseSeed(tmp_path_factory.mktemp("parse_seed"))


def uses_session_service(request: pytest.FixtureRequest) -> bool:
    """Whether the requesting module uses a service that outlives it (SERVICE_GROUPS)."""
    module = request.node.nodeid.split("::", 1)[0]
    items = [item for item in request.session.items if item.nodeid.split("::", 1)[0] == module]
    return module_groups(items).get(module, module) != module


@pytest.fixture(scope="module")
def conflict_gate(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> ConflictGate:
    """The conflict gate UDF registered on the shared session, with this module's own markers."""
    gate = ConflictGate(tmp_path_factory.mktemp("gate"))
    gate.register(spark)
    return gate

