"""dbt parses the whole project again whenever `--vars`, the profile or the target differ from its
one saved partial-parse state; invoke_dbt keeps a state per set of inputs, so a process that goes
back to earlier vars parses partially again. dbt still checks every state it is given. No Spark:
the macro sends no statement."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dbt_iceberg_maint.runtime.invoke import invoke_dbt, kept_parse_state
from dbt_iceberg_maint.runtime.parse_states import MAX_PARSE_STATES, PARSE_STATES, parse_key, parse_state


@pytest.fixture(autouse=True)
def _dbt_default_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read the project's own target folder: no DBT_TARGET_PATH (a pytest-xdist worker
    sets one, tests/conftest.py)."""
    monkeypatch.delenv("DBT_TARGET_PATH", raising=False)
    monkeypatch.delenv("DBT_LOG_PATH", raising=False)


def _project(root: Path) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "macros").mkdir()
    (root / "models" / "always.sql").write_text("select 1 as id\n")
    # Vars change what parses: the model exists only when `extra` is set.
    (root / "models" / "extra.sql").write_text("{{ config(enabled=var('extra', false)) }}\nselect 2 as id\n")
    (root / "macros" / "count_models.sql").write_text(
        "{% macro count_models() %}{{ log('models: ' ~ (graph.nodes.values() | selectattr('resource_type', "
        "'equalto', 'model') | list | length), info=True) }}{% endmacro %}\n")
    (root / "dbt_project.yml").write_text("name: p\nversion: '1.0'\nconfig-version: 2\nprofile: p\n")
    (root / "profiles.yml").write_text(
        "p:\n  target: t\n  outputs:\n    t: {type: spark, method: thrift, host: 127.0.0.1, port: 1, schema: s}\n")
    return root


def _count(project: Path, *flags: str) -> tuple[str, str]:
    """The model count the macro saw, and how dbt parsed ('full' or 'partial')."""
    done = invoke_dbt(["run-operation", "count_models", *flags], project, project)
    assert done.success, done.exception
    how = "full" if "UnableToPartialParse" in {e.name for e in done.events} else "partial"
    (count,) = [m for m in done.log_messages if m.startswith("models: ")]
    return count, how


def test_earlier_vars_parse_partially_and_still_parse_right(tmp_path: Path) -> None:
    project = _project(tmp_path / "p")
    extra = ("--vars", "{extra: true}")
    assert _count(project)[0] == "models: 1"
    assert _count(project, *extra) == ("models: 2", "full")  # new vars: dbt parses it all
    assert _count(project) == ("models: 1", "partial")  # the first state, put back
    assert _count(project, *extra) == ("models: 2", "partial")
    # A changed file is still seen: dbt checks the state it is given.
    (project / "models" / "third.sql").write_text("select 3 as id\n")
    assert _count(project)[0] == "models: 2"
    assert _count(project, *extra)[0] == "models: 3"
    assert len(list((project / "target" / PARSE_STATES).glob("*.msgpack"))) == 1  # the other is in use


def _fake_state(target: Path, content: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    (target / "partial_parse.msgpack").write_text(content)


def test_a_state_is_kept_per_inputs_and_the_oldest_go(tmp_path: Path) -> None:
    target = tmp_path / "t"
    args = ["run", "--target-path", str(target)]
    with parse_state([*args, "--vars", "{n: 0}"], tmp_path):
        _fake_state(target, "state 0")
    for n in range(1, MAX_PARSE_STATES + 3):
        with parse_state([*args, "--vars", f"{{n: {n}}}"], tmp_path):
            # Without a state of its own, dbt gets the last one (it may still parse partially).
            assert (target / "partial_parse.msgpack").read_text() == f"state {n - 1}"
            _fake_state(target, f"state {n}")
    kept = sorted(p.read_text() for p in (target / PARSE_STATES).glob("*.msgpack"))
    assert len(kept) == MAX_PARSE_STATES and "state 0" not in kept
    with parse_state([*args, "--vars", "{n: 5}"], tmp_path):
        assert (target / "partial_parse.msgpack").read_text() == "state 5"


def test_the_key_follows_parse_inputs_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "profiles.yml").write_text(
        "p:\n  outputs:\n    t: {schema: \"{{ env_var('SCHEMA_OF_THE_PROFILE') }}\"}\n")
    (tmp_path / "dbt_project.yml").write_text("name: p\npackages-install-path: \"{{ env_var('PACKAGES_AT') }}\"\n")
    base = parse_key(["run", "--vars", "{a: 1}", "--target", "dev"], tmp_path)
    assert base == parse_key(["run", "--target=dev", "--select", "x", "--vars", "{a: 1}", "--target-path", "t2"],
                              tmp_path)
    assert base != parse_key(["run", "--vars", "{a: 2}", "--target", "dev"], tmp_path)
    assert base != parse_key(["run", "--vars", "{a: 1}", "--target", "prod"], tmp_path)
    # Variables only models read (a batch, a run id): dbt re-parses just those models.
    monkeypatch.setenv("DBT_TARGET_PATH", "elsewhere")
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another test")
    monkeypatch.setenv("A_BATCH_MODELS_READ", "7")
    assert parse_key(["run", "--vars", "{a: 1}", "--target", "dev"], tmp_path) == base
    # What the profile, the project file or dbt's own flags read: dbt parses in full when it changes.
    for name in ("SCHEMA_OF_THE_PROFILE", "PACKAGES_AT", "DBT_TARGET"):
        monkeypatch.setenv(name, "changed")
        assert parse_key(["run", "--vars", "{a: 1}", "--target", "dev"], tmp_path) != base, name
        monkeypatch.delenv(name)
    other = tmp_path / "other_profiles"
    other.mkdir()
    (other / "profiles.yml").write_text("p: {}\n")
    elsewhere = parse_key(["run", "--profiles-dir", str(other)], tmp_path)
    monkeypatch.setenv("SCHEMA_OF_THE_PROFILE", "changed")  # read by the profiles.yml not in use
    assert parse_key(["run", "--profiles-dir", str(other)], tmp_path) == elsewhere


def test_a_project_naming_its_own_target_path_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "dbt_project.yml").write_text("name: p\ntarget-path: build\n")
    with parse_state(["run", "--vars", "{a: 1}"], tmp_path):
        pass
    assert not list(tmp_path.rglob(PARSE_STATES)) and "DBT_TARGET_PATH" not in os.environ


def test_a_state_put_where_kept_parse_state_says_is_what_dbt_starts_from(tmp_path: Path) -> None:
    """A state made in one target folder, put in another's keeping for the same inputs, gives that
    folder's first invocation of those inputs a partial parse; a stale one is still checked."""
    project = _project(tmp_path / "p")
    extra = ("--vars", "{extra: true}")
    assert _count(project, *extra) == ("models: 2", "full")
    made = (project / "target" / "partial_parse.msgpack").read_bytes()
    other = tmp_path / "other_target"
    kept = kept_parse_state(["run-operation", "count_models", *extra, "--target-path", str(other)], project, project)
    assert kept is not None and kept.parent == other / PARSE_STATES
    kept.parent.mkdir(parents=True)
    kept.write_bytes(made)
    assert _count(project, *extra, "--target-path", str(other)) == ("models: 2", "partial")
    (project / "models" / "third.sql").write_text("select 3 as id\n")
    stale = kept_parse_state(["run-operation", "count_models", *extra, "--target-path", str(tmp_path / "t3")], project,
                             project)
    assert stale is not None
    stale.parent.mkdir(parents=True)
    stale.write_bytes(made)
    assert _count(project, *extra, "--target-path", str(tmp_path / "t3"))[0] == "models: 3"
