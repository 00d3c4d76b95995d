"""runner: the re-run plan from recorded run results, and the bounded retry loop around it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from dbt_iceberg_maint.errors import UsageError
from dbt_iceberg_maint.invoke import DbtInvocation, NodeResult
from dbt_iceberg_maint.runner import (
    NodeOutcome,
    exponential_backoff,
    plan_reruns,
    rerun_args,
    run_dbt_with_retries,
    strip_selection,
)

PKG = "iceberg_maint_integration_tests"
MISSING_FILES = (
    "Runtime Error in model {name} (models/{name}.sql)\n"
    "  An error occurred while calling o412.sql.\n"
    "  : org.apache.iceberg.exceptions.ValidationException: Missing required files to delete: "
    "file:/wh/analytics/{name}/data/event_ts_day=2026-11-04/00000-7-1c2d-00001.parquet\n"
    "  \tat org.apache.iceberg.ManifestFilterManager.validateRequiredDeletes(ManifestFilterManager.java:250)\n"
)
SQL_ERROR = (
    "Runtime Error in model broken (models/broken.sql)\n  [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column or "
    "function parameter with name `no_such_column` cannot be resolved."
)
STATE_UNKNOWN = (
    "Runtime Error in model {name} (models/{name}.sql)\n  : org.apache.iceberg.exceptions."
    "CommitStateUnknownException: Service failed: 503: unavailable\n  Cannot determine whether the commit "
    "was successful or not, the underlying data files may or may not be needed."
)
RUNTIME_FILTERING = (
    "Runtime Error in model {name} (models/{name}.sql)\n  An error occurred while calling o88.sql.\n"
    "  : java.lang.IllegalStateException: Runtime file filtering is not possible: the table has been "
    "concurrently modified. Row-level operation scan snapshot ID: 1, current table snapshot ID: 2."
)


def model(name: str, materialized: str = "table", parents: Sequence[str] = (), **config: Any) -> dict[str, Any]:
    return {
        "unique_id": f"model.{PKG}.{name}",
        "name": name,
        "resource_type": "model",
        "fqn": [PKG, name],
        "config": {"materialized": materialized, **config},
        "depends_on": {"nodes": [f"model.{PKG}.{p}" for p in parents]},
    }


def data_test(name: str, parent: str) -> dict[str, Any]:
    return {
        "unique_id": f"test.{PKG}.{name}",
        "name": name,
        "resource_type": "test",
        "fqn": [PKG, name],
        "config": {"severity": "ERROR"},
        "depends_on": {"nodes": [f"model.{PKG}.{parent}"]},
    }


# The project of the integration tests, as the manifest describes it.
NODES = {
    n["unique_id"]: n
    for n in (
        model("events", "incremental", incremental_strategy="merge", unique_key="event_id"),
        model("event_log", "incremental", incremental_strategy="append"),
        model("user_summary", "table", parents=["events"]),
        model("country_summary", "table", parents=["user_summary"]),
        model("log_summary", "table", parents=["event_log"]),
        model("both", "table", parents=["events", "event_log"]),
        model("broken", "table"),
        data_test("unique_events_event_id", "events"),
    )
}


def uid(name: str) -> str:
    return next(key for key in NODES if key.endswith(f".{name}"))


def recorded(results: dict[str, tuple[str, str | None]]) -> list[NodeOutcome]:
    """Outcomes as read back from a run_results.json (`results[*]`)."""
    document = {"results": [{"unique_id": uid(name), "status": status, "message": message}
                            for name, (status, message) in results.items()]}
    return [NodeOutcome.from_run_result(r) for r in json.loads(json.dumps(document))["results"]]


def test_reruns_the_idempotent_conflict_and_its_skipped_descendants_only() -> None:
    outcomes = recorded({
        "events": ("error", MISSING_FILES.format(name="events")),
        "event_log": ("success", None),
        "user_summary": ("skipped", None),
        "country_summary": ("skipped", None),
        "unique_events_event_id": ("skipped", None),
        "log_summary": ("success", None),
        "broken": ("error", SQL_ERROR),
    })
    plan = plan_reruns(outcomes, NODES)
    assert plan.rerun == (uid("events"),)
    assert set(plan.rerun_skipped) == {uid("user_summary"), uid("country_summary"), uid("unique_events_event_id")}
    assert plan.decisions[uid("events")].classification.kind == "missing_files_to_delete"  # type: ignore[union-attr]
    assert "not_iceberg_conflict" in plan.decisions[uid("broken")].reason
    assert not plan.decisions[uid("broken")].rerun
    # Successful nodes are never part of the plan.
    assert uid("event_log") not in plan.decisions and uid("log_summary") not in plan.decisions


def test_a_conflict_on_a_non_idempotent_model_is_refused_with_its_children() -> None:
    outcomes = recorded({
        "event_log": ("error", MISSING_FILES.format(name="event_log")),
        "log_summary": ("skipped", None),
    })
    plan = plan_reruns(outcomes, NODES)
    assert plan.selected == ()
    assert "not idempotent" in plan.decisions[uid("event_log")].reason
    assert "duplicates rows" in plan.decisions[uid("event_log")].reason
    assert "event_log failed and is not re-run" in plan.decisions[uid("log_summary")].reason


def test_meta_override_makes_an_append_re_runnable() -> None:
    nodes = dict(NODES)
    nodes[uid("event_log")] = {**NODES[uid("event_log")],
                               "config": {**NODES[uid("event_log")]["config"],
                                          "meta": {"iceberg_maint": {"idempotent": True}}}}
    plan = plan_reruns(recorded({"event_log": ("error", MISSING_FILES.format(name="event_log"))}), nodes)
    assert plan.rerun == (uid("event_log"),)


def test_skipped_child_of_two_failures_waits_for_both_to_be_re_runnable() -> None:
    outcomes = recorded({
        "events": ("error", MISSING_FILES.format(name="events")),
        "event_log": ("error", MISSING_FILES.format(name="event_log")),
        "both": ("skipped", None),
    })
    plan = plan_reruns(outcomes, NODES)
    assert plan.rerun == (uid("events"),)
    assert plan.rerun_skipped == ()
    assert "event_log failed and is not re-run" in plan.decisions[uid("both")].reason


def test_unknown_commit_state_is_never_re_run_even_when_idempotent() -> None:
    plan = plan_reruns(recorded({"events": ("error", STATE_UNKNOWN.format(name="events"))}), NODES)
    assert plan.selected == ()
    assert plan.decisions[uid("events")].reason.startswith("commit_state_unknown: not a retryable")


def test_failed_post_hook_follows_the_same_rule() -> None:
    # A compaction post-hook that lost a conflict after the model's MERGE committed.
    hook_failure = (
        "Runtime Error in model events (models/events.sql)\n  An error occurred while calling o99.sql.\n"
        "  : java.lang.RuntimeException: Cannot commit rewrite because of a ValidationException or "
        "CommitFailedException. This usually means that this rewrite has conflicted with another concurrent "
        "Iceberg operation.\n  Caused by: org.apache.iceberg.exceptions.ValidationException: Cannot commit, "
        "found new position delete for replaced data file: GenericDataFile{content=data, file_path=file:/a.parquet, }"
    )
    assert plan_reruns(recorded({"events": ("error", hook_failure)}), NODES).rerun == (uid("events"),)
    assert plan_reruns(recorded({"event_log": ("error", hook_failure)}), NODES).rerun == ()


def test_failed_test_is_not_re_run() -> None:
    outcomes = recorded({"unique_events_event_id": ("fail", "Got 3 results, configured to fail if != 0")})
    assert plan_reruns(outcomes, NODES).selected == ()


def test_unknown_node_is_not_re_run() -> None:
    plan = plan_reruns([NodeOutcome("model.other.x", "error", MISSING_FILES.format(name="x"))], NODES)
    assert plan.selected == ()
    assert "not in the manifest" in plan.decisions["model.other.x"].reason


def test_strip_selection_keeps_everything_else() -> None:
    args = ["--vars", "{batch: 2}", "--select", "events", "event_log", "--exclude", "x", "--full-refresh",
            "-s", "y", "--select=z", "--threads", "2"]
    assert strip_selection(args) == ["--vars", "{batch: 2}", "--full-refresh", "--threads", "2"]


def test_rerun_args_select_exact_nodes_by_fqn() -> None:
    outcomes = recorded({"events": ("error", MISSING_FILES.format(name="events")), "user_summary": ("skipped", None)})
    plan = plan_reruns(outcomes, NODES)
    args = rerun_args("build", ["--vars", "{batch: 2}", "-s", "tag:maintained"], plan, NODES)
    assert args == ["build", "--vars", "{batch: 2}", "--select", f"fqn:{PKG}.events", f"fqn:{PKG}.user_summary"]


def test_backoff_doubles_caps_and_jitters() -> None:
    assert [exponential_backoff(n, 1.0, 5.0, rng=lambda: 1.0) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    assert exponential_backoff(3, 1.0, 5.0, rng=lambda: 0.0) == 2.0


class RecordedDbt:
    """Replays recorded per-attempt results: the retry loop's I/O boundary, not Spark."""

    def __init__(self, attempts: list[dict[str, tuple[str, str | None]]]) -> None:
        self.attempts = attempts
        self.calls: list[list[str]] = []

    def __call__(self, args: Sequence[str]) -> DbtInvocation:
        self.calls.append(list(args))
        results = self.attempts[len(self.calls) - 1]
        nodes = tuple(
            NodeResult(uid(name), name, status, message, NODES[uid(name)]["resource_type"], NODES[uid(name)])
            for name, (status, message) in results.items()
        )
        success = all(status in {"success", "pass"} for status, _ in results.values())
        return DbtInvocation(tuple(args), success, nodes, ())


def test_loop_re_runs_then_succeeds_with_backoff_between_attempts() -> None:
    dbt = RecordedDbt([
        {"events": ("error", MISSING_FILES.format(name="events")), "user_summary": ("skipped", None),
         "event_log": ("success", None), "broken": ("error", SQL_ERROR)},
        {"events": ("error", RUNTIME_FILTERING.format(name="events")), "user_summary": ("skipped", None)},
        {"events": ("success", None), "user_summary": ("success", None)},
    ])
    waits: list[float] = []
    report = run_dbt_with_retries(["--vars", "{batch: 2}"], command="run", max_attempts=3,
                                  invoke=dbt, sleep=waits.append, backoff=lambda n: n * 0.5)
    assert waits == [0.5, 1.0]
    assert dbt.calls[1] == ["run", "--vars", "{batch: 2}", "--select", f"fqn:{PKG}.events", f"fqn:{PKG}.user_summary"]
    events = report.node("events")
    assert (events.final_status, len(events.attempts)) == ("success", 3)
    assert [a.kind for a in events.attempts] == ["missing_files_to_delete", "concurrent_modification", None]
    assert report.node("event_log").attempts[0].status == "success" and len(report.node("event_log").attempts) == 1
    assert "not_iceberg_conflict" in (report.node("broken").not_rerun_reason or "")
    assert not report.success and report.exit_code == 1  # `broken` still failed
    document = json.loads(report.to_json())
    assert document["nodes"][0]["kinds"] == ["missing_files_to_delete", "concurrent_modification", None]


def test_loop_is_bounded_by_max_attempts() -> None:
    failing = {"events": ("error", MISSING_FILES.format(name="events"))}
    dbt = RecordedDbt([failing, failing])
    report = run_dbt_with_retries([], max_attempts=2, invoke=dbt, sleep=lambda s: None)
    assert len(dbt.calls) == 2
    assert report.exit_code == 1
    assert "after 2 attempt(s)" in (report.node("events").not_rerun_reason or "")


def test_loop_success_exits_zero() -> None:
    dbt = RecordedDbt([{"events": ("success", None)}])
    report = run_dbt_with_retries([], invoke=dbt, sleep=lambda s: None)
    assert (report.success, report.exit_code, report.attempts) == (True, 0, 1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"command": "test"}, "command 'test' is not supported; expected one of run, build"),
        ({"max_attempts": 0}, "max_attempts is 0; expected an integer >= 1"),
        ({"dbt_args": ["run", "--select", "x"]}, "start with the command 'run'"),
    ],
)
def test_bad_arguments_are_usage_errors(kwargs: dict[str, Any], message: str) -> None:
    dbt = RecordedDbt([])
    with pytest.raises(UsageError, match=message):
        run_dbt_with_retries(invoke=dbt, **kwargs)
    assert dbt.calls == []


# Recorded from a real run (python_udfs.conflict_gate scenario: dbt MERGE models against a
# rewrite_data_files committed from another Spark session): target/run_results.json and the
# manifest's nodes for the same invocation.
RECORDED = Path(__file__).parent / "recorded"


def test_plan_from_a_recorded_real_conflict_run() -> None:
    run_results = json.loads((RECORDED / "conflict_run_results.json").read_text())
    manifest_nodes = json.loads((RECORDED / "conflict_manifest_nodes.json").read_text())
    outcomes = [NodeOutcome.from_run_result(result) for result in run_results["results"]]
    plan = plan_reruns(outcomes, manifest_nodes)
    prefix = f"model.{PKG}."
    assert plan.rerun == (f"{prefix}conflict_merge",)
    assert plan.rerun_skipped == (f"{prefix}conflict_merge_child",)
    merge = plan.decisions[f"{prefix}conflict_merge"].classification
    assert merge is not None and merge.kind == "missing_files_to_delete"
    assert len(merge.files) == 2 and all(f.endswith(".parquet") and "/conflict_merge/data/" in f for f in merge.files)
    unsafe = plan.decisions[f"{prefix}conflict_merge_unsafe"]
    assert not unsafe.rerun and "meta.iceberg_maint.idempotent: false" in unsafe.reason
    assert plan.decisions[f"{prefix}conflict_sql_error"].reason.startswith("not_iceberg_conflict")
    assert rerun_args("run", ["--select", "path:models/conflicts", "--vars", "{batch: 2}"], plan, manifest_nodes) == [
        "run", "--vars", "{batch: 2}", "--select",
        f"fqn:{PKG}.conflicts.conflict_merge", f"fqn:{PKG}.conflicts.conflict_merge_child",
    ]


def test_default_profiles_dir_follows_dbt(tmp_path: Path) -> None:
    from dbt_iceberg_maint.runner import default_profiles_dir

    assert default_profiles_dir(tmp_path, {"DBT_PROFILES_DIR": "/etc/dbt"}) == Path("/etc/dbt")
    assert default_profiles_dir(tmp_path, {}) == Path.home() / ".dbt"
    (tmp_path / "profiles.yml").write_text("x: {}\n")
    assert default_profiles_dir(tmp_path, {}) == tmp_path
