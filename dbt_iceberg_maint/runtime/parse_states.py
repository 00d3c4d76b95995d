"""dbt's partial-parse states kept per set of parse inputs, so that a process going back to
earlier `--vars` (or profile, or target) parses partially again (invoke.invoke_dbt uses it)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

# dbt keeps one partial-parse state (target/partial_parse.msgpack) and parses the whole project
# again whenever the command line's vars, profile or target differ from the state's: a process
# that alternates `--vars` pays a full parse each time (3-5 s on the integration project, 0.3 s
# partially). So every state is kept beside it under its inputs' key and put back when they recur.
# dbt still checks each state it is given, so a wrong key costs a full parse, never a wrong parse.
PARSE_STATES = "iceberg_maint_parse_states"
MAX_PARSE_STATES = 8
# The flags read here: --target-path says where the state lives, the others are parse inputs.
_PARSE_FLAGS = frozenset({"--vars", "--target", "-t", "--profile", "--profiles-dir", "--project-dir",
                          "--target-path"})
# The environment in the key: dbt's own variables for those flags, and whatever profiles.yml and
# dbt_project.yml read (a changed value there changes the profile or project dbt checks, a full
# parse). Not the variables only models and macros read (a run id, a batch): dbt re-parses just the
# files that read them, so keying on them would keep a state from ever being reused.
_PARSE_FLAG_ENV = ("DBT_TARGET", "DBT_PROFILE", "DBT_PROFILES_DIR", "DBT_PROJECT_DIR")
_ENV_VAR_CALL = re.compile(r"""env_var\(\s*['"]([^'"]+)['"]""")


def _flag_values(args: Sequence[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for index, arg in enumerate(args):
        name, equals, inline = arg.partition("=")
        if equals and name in _PARSE_FLAGS:
            values[name] = inline
        elif arg in _PARSE_FLAGS and index + 1 < len(args):
            values[arg] = args[index + 1]
    return values


def target_folder(args: Sequence[str], project: Path) -> Path | None:
    """Where dbt keeps this invocation's partial-parse state: --target-path, DBT_TARGET_PATH, or the
    project's `target` folder (None when dbt_project.yml names another: not worth reading YAML)."""
    chosen = _flag_values(args).get("--target-path") or os.environ.get("DBT_TARGET_PATH")
    if chosen:
        return Path(chosen) if Path(chosen).is_absolute() else project / chosen
    project_file = project / "dbt_project.yml"
    if not project_file.is_file() or "target-path" in project_file.read_text():
        return None
    return project / "target"


def _parse_env_names(args: Sequence[str], project: Path) -> set[str]:
    """The environment variables dbt's full-parse check depends on (see _PARSE_FLAG_ENV)."""
    flags = _flag_values(args)
    names = set(_PARSE_FLAG_ENV)
    for path in (Path(flags.get("--profiles-dir", project)) / "profiles.yml", project / "dbt_project.yml"):
        if path.is_file():
            names.update(_ENV_VAR_CALL.findall(path.read_text()))
    return names


def parse_key(args: Sequence[str], project: Path) -> str:
    flags = sorted((k, v) for k, v in _flag_values(args).items() if k != "--target-path")
    env = sorted((name, os.environ.get(name)) for name in _parse_env_names(args, project))
    return hashlib.sha256(json.dumps([flags, env]).encode()).hexdigest()[:24]


@contextmanager
def parse_state(args: Sequence[str], project: Path) -> Iterator[None]:
    """Put back the partial-parse state last written under these inputs, and keep the one dbt
    writes under them. Runs inside `environment`: profiles read the environment."""
    target = target_folder(args, project)
    if target is None:
        yield
        return
    states = target / PARSE_STATES
    current, current_key = target / "partial_parse.msgpack", states / "current"
    key = parse_key(args, project)
    held = current_key.read_text() if current_key.is_file() else None
    if held != key:
        states.mkdir(parents=True, exist_ok=True)
        if held is not None and current.is_file():
            shutil.copyfile(current, states / f"{held}.msgpack")
        # Without a state of its own, dbt gets the last one: it may still parse partially.
        if (states / f"{key}.msgpack").is_file():
            os.replace(states / f"{key}.msgpack", current)
        current_key.write_text(key)
        kept = sorted(states.glob("*.msgpack"), key=lambda path: path.stat().st_mtime)
        for stale in kept[:-MAX_PARSE_STATES]:
            stale.unlink(missing_ok=True)
    yield
