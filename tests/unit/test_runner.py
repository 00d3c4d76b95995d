"""runner: the re-run plan from recorded run results, and the bounded retry loop around it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from dbt_iceberg_maint.errors import UsageError
from dbt_iceberg_maint.runner import (
    NodeOutcome,
    NotSelectable,
    exact_selector,
    exponential_backoff,
    plan_reruns,
    rerun_args,
    run_dbt_with_retries,
    strip_selection,
)
from dbt_iceberg_maint.runtime.invoke import DbtInvocation, ManifestGraph, NodeResult

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


def model(
    name: str, materialized: str = "table", parents: Sequence[str] = (), folder: str = "", **config: Any
) -> dict[str, Any]:
    """A model node in manifest.json form, in models/<folder>/<name>.sql."""
    folders = [folder] if folder else []
    return {
        "unique_id": f"model.{PKG}.{name}",
        "name": name,
        "resource_type": "model",
        "package_name": PKG,
        "fqn": [PKG, *folders, name],
        "original_file_path": "/".join(["models", *folders, f"{name}.sql"]),
        "config": {"materialized": materialized, **config},
        "depends_on": {"nodes": [f"model.{PKG}.{p}" for p in parents]},
    }


def data_test(name: str, *parents: str) -> dict[str, Any]:
    return {
        "unique_id": f"test.{PKG}.{name}",
        "name": name,
        "resource_type": "test",
        "package_name": PKG,
        "fqn": [PKG, name],
        "original_file_path": "models/schema.yml",
        "config": {"severity": "ERROR"},
        "depends_on": {"nodes": [f"model.{PKG}.{parent}" for parent in parents]},
    }


def unit_test(name: str, tested: str) -> dict[str, Any]:
    return {
        "unique_id": f"unit_test.{PKG}.{tested}.{name}",
        "name": name,
        "resource_type": "unit_test",
        "package_name": PKG,
        "fqn": [PKG, tested, name],  # under the model's fqn, as dbt names unit tests
        "original_file_path": "models/schema.yml",
        "config": {},
        "depends_on": {"nodes": [f"model.{PKG}.{tested}"]},
    }


# The project of the integration tests, as the manifest describes it, plus an ephemeral model
# and a folder named like a model (models/events/ beside models/events.sql).
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
        model("staged_events", "ephemeral", parents=["events"]),
        model("daily_counts", "table", parents=["staged_events"]),
        model("events_archive", "incremental", folder="events", incremental_strategy="append"),
        model("hourly", "incremental", incremental_strategy="microbatch"),
        data_test("unique_events_event_id", "events"),
        data_test("not_null_event_log_event_id", "event_log"),
        unit_test("dedups_events", "events"),
    )
}


def uid(name: str) -> str:
    return next(key for key in NODES if key.endswith(f".{name}"))


def recorded(results: dict[str, tuple[str, str | None]]) -> list[NodeOutcome]:
    """Outcomes as read back from a run_results.json (`results[*]`)."""
    document = {
        "results": [
            {"unique_id": uid(name), "status": status, "message": message}
            for name, (status, message) in results.items()
        ]
    }
    return [NodeOutcome.from_run_result(r) for r in json.loads(json.dumps(document))["results"]]


def with_meta(name: str, meta: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    node = NODES[uid(name)]
    return {**NODES, uid(name): {**node, "config": {**node["config"], "meta": meta}}}


def test_reruns_the_idempotent_conflict_and_its_skipped_descendants_only() -> None:
    outcomes = recorded(
        {
            "events": ("error", MISSING_FILES.format(name="events")),
            "event_log": ("success", None),
            "user_summary": ("skipped", None),
            "country_summary": ("skipped", None),
            "unique_events_event_id": ("skipped", None),
            "log_summary": ("success", None),
            "broken": ("error", SQL_ERROR),
        }
    )
    plan = plan_reruns(outcomes, NODES)
    assert plan.rerun == (uid("events"),)
    assert set(plan.rerun_skipped) == {uid("user_summary"), uid("country_summary"), uid("unique_events_event_id")}
    assert plan.decisions[uid("events")].classification.kind == "missing_files_to_delete"  # type: ignore[union-attr]
    assert "not_iceberg_conflict" in plan.decisions[uid("broken")].reason
    assert not plan.decisions[uid("broken")].rerun
    # Successful nodes are never part of the plan.
    assert uid("event_log") not in plan.decisions and uid("log_summary") not in plan.decisions


def test_a_conflict_on_a_non_idempotent_model_is_refused_with_its_children() -> None:
    outcomes = recorded(
        {
            "event_log": ("error", MISSING_FILES.format(name="event_log")),
            "log_summary": ("skipped", None),
        }
    )
    plan = plan_reruns(outcomes, NODES)
    assert plan.selected == ()
    assert "not idempotent" in plan.decisions[uid("event_log")].reason
    assert "duplicates rows" in plan.decisions[uid("event_log")].reason
    assert "event_log failed and is not re-run" in plan.decisions[uid("log_summary")].reason


def test_meta_override_makes_an_append_re_runnable() -> None:
    nodes = with_meta("event_log", {"iceberg_maint": {"idempotent": True}})
    plan = plan_reruns(recorded({"event_log": ("error", MISSING_FILES.format(name="event_log"))}), nodes)
    assert plan.rerun == (uid("event_log"),)


def test_skipped_child_of_two_failures_waits_for_both_to_be_re_runnable() -> None:
    outcomes = recorded(
        {
            "events": ("error", MISSING_FILES.format(name="events")),
            "event_log": ("error", MISSING_FILES.format(name="event_log")),
            "both": ("skipped", None),
        }
    )
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


# --- Skipped nodes: ancestry runs through the whole manifest, and every one gets a reason ---------


def test_a_child_skipped_through_an_ephemeral_model_is_re_run_with_its_failed_ancestor() -> None:
    # events -> staged_events (ephemeral: never in run results) -> daily_counts
    outcomes = recorded({"events": ("error", MISSING_FILES.format(name="events")), "daily_counts": ("skipped", None)})
    plan = plan_reruns(outcomes, NODES)
    assert plan.rerun == (uid("events"),)
    assert plan.rerun_skipped == (uid("daily_counts"),)
    assert plan.decisions[uid("daily_counts")].reason == f"skipped because {uid('events')} failed; re-run with it"


def test_a_node_skipped_without_a_failed_ancestor_is_not_re_run_and_says_so() -> None:
    # e.g. --fail-fast: dbt skipped log_summary, whose ancestors all succeeded.
    outcomes = recorded(
        {
            "events": ("error", MISSING_FILES.format(name="events")),
            "event_log": ("success", None),
            "log_summary": ("skipped", None),
        }
    )
    plan = plan_reruns(outcomes, NODES)
    assert plan.rerun_skipped == ()
    decision = plan.decisions[uid("log_summary")]
    assert not decision.rerun
    assert decision.reason == "skipped by dbt, not because of a failed ancestor (e.g. --fail-fast); not re-run"


def test_build_a_node_downstream_of_a_failed_data_test_stays_skipped() -> None:
    # `both` waits on events (a re-runnable conflict) and on event_log's failed test: re-running
    # it with events alone would build it on data its test rejected.
    outcomes = recorded(
        {
            "events": ("error", MISSING_FILES.format(name="events")),
            "event_log": ("success", None),
            "not_null_event_log_event_id": ("fail", "Got 2 results, configured to fail if != 0"),
            "both": ("skipped", None),
        }
    )
    plan = plan_reruns(outcomes, NODES)
    assert plan.rerun == (uid("events"),)
    assert plan.rerun_skipped == ()
    assert plan.decisions[uid("both")].reason == (
        f"skipped because {uid('not_null_event_log_event_id')} failed and is not re-run"
    )


def test_build_a_model_skipped_by_its_failed_unit_test_names_the_unit_test() -> None:
    outcomes = recorded({"dedups_events": ("fail", "actual differs from expected"), "events": ("skipped", None)})
    plan = plan_reruns(outcomes, NODES)
    assert plan.selected == ()
    assert plan.decisions[uid("events")].reason == f"skipped because {uid('dedups_events')} failed and is not re-run"


# --- Decisions that must never lose the report ------------------------------------------------


def test_an_invalid_idempotent_override_is_that_node_s_decision_not_a_usage_error() -> None:
    nodes = with_meta("events", {"iceberg_maint": {"idempotent": "yes"}})
    plan = plan_reruns(
        recorded({"events": ("error", MISSING_FILES.format(name="events")), "user_summary": ("skipped", None)}), nodes
    )
    assert plan.selected == ()
    assert plan.decisions[uid("events")].reason == (
        "missing_files_to_delete is retryable, but not re-run: invalid meta.iceberg_maint.idempotent value "
        f"'yes' on '{uid('events')}' (allowed: true/false)"
    )
    assert plan.decisions[uid("user_summary")].reason == f"skipped because {uid('events')} failed and is not re-run"


def test_partial_success_is_not_a_success_and_not_re_run() -> None:
    plan = plan_reruns(recorded({"hourly": ("partial success", "2 of 24 batches failed")}), NODES)
    assert plan.selected == ()
    assert plan.decisions[uid("hourly")].reason.startswith(
        "partial success: some batches of this microbatch model failed"
    )


# --- Exact selection ---------------------------------------------------------------------------


def test_rerun_args_select_exactly_the_planned_nodes() -> None:
    # fqn:proj.events alone would also select models/events/events_archive.sql (a successful
    # append: re-running it duplicates rows) and the unit test dedups_events, both under
    # [proj, events, ...]; type and file pin it down, and no tests are added indirectly.
    outcomes = recorded(
        {
            "events": ("error", MISSING_FILES.format(name="events")),
            "events_archive": ("success", None),
            "dedups_events": ("pass", None),
            "user_summary": ("skipped", None),
        }
    )
    plan = plan_reruns(outcomes, NODES, root_project=PKG)
    args = rerun_args("build", ["--vars", "{batch: 2}", "-s", "tag:maintained", "--indirect-selection", "eager"], plan)
    assert args == [
        "build",
        "--vars",
        "{batch: 2}",
        "--select",
        f"fqn:{PKG}.events,resource_type:model,path:models/events.sql",
        f"fqn:{PKG}.user_summary,resource_type:model,path:models/user_summary.sql",
        "--indirect-selection",
        "empty",
    ]


def test_exact_selector_of_a_test_and_of_a_file_name_with_glob_characters() -> None:
    nodes = {**NODES, uid("events"): {**NODES[uid("events")], "original_file_path": "models/events[v2].sql"}}
    assert exact_selector(uid("unique_events_event_id"), nodes, PKG) == (
        f"fqn:{PKG}.unique_events_event_id,resource_type:test,path:models/schema.yml"
    )
    # dbt globs `path:`; escaped, the pattern matches only the file itself.
    assert exact_selector(uid("events"), nodes, PKG) == (
        f"fqn:{PKG}.events,resource_type:model,path:models/events[[]v2].sql"
    )


def package_model(name: str, folder: str = "") -> dict[str, Any]:
    node = model(name, folder=folder)
    return {
        **node,
        "unique_id": f"model.elementary.{name}",
        "package_name": "elementary",
        "fqn": ["elementary", *node["fqn"][1:]],
    }


def test_a_package_node_is_narrowed_by_package_unless_another_node_extends_its_fqn() -> None:
    # dbt resolves `path:` against the root project, so it cannot name a package's file.
    runs = package_model("dbt_runs")
    nodes = {**NODES, runs["unique_id"]: runs}
    assert exact_selector(runs["unique_id"], nodes, PKG) == (
        "fqn:elementary.dbt_runs,resource_type:model,package:elementary"
    )
    extension = package_model("history", folder="dbt_runs")  # models/dbt_runs/history.sql
    nodes[extension["unique_id"]] = extension
    with pytest.raises(NotSelectable, match="fqn:elementary.dbt_runs also selects model.elementary.history"):
        exact_selector(runs["unique_id"], nodes, PKG)
    plan = plan_reruns(
        [NodeOutcome(runs["unique_id"], "error", MISSING_FILES.format(name="dbt_runs"))], nodes, root_project=PKG
    )
    assert plan.selected == ()
    assert "cannot be selected exactly" in plan.decisions[runs["unique_id"]].reason


def test_a_node_whose_file_has_a_space_cannot_be_selected() -> None:
    nodes = {**NODES, uid("events"): {**NODES[uid("events")], "original_file_path": "models/my events.sql"}}
    plan = plan_reruns(recorded({"events": ("error", MISSING_FILES.format(name="events"))}), nodes)
    assert plan.selected == ()
    assert "space or comma" in plan.decisions[uid("events")].reason


def test_strip_selection_keeps_everything_else() -> None:
    args = [
        "--vars",
        "{batch: 2}",
        "--select",
        "events",
        "event_log",
        "--exclude",
        "x",
        "--full-refresh",
        "-s",
        "y",
        "--select=z",
        "--indirect-selection",
        "cautious",
        "--threads",
        "2",
    ]
    assert strip_selection(args) == ["--vars", "{batch: 2}", "--full-refresh", "--threads", "2"]


def test_backoff_doubles_caps_and_jitters() -> None:
    assert [exponential_backoff(n, 1.0, 5.0, rng=lambda: 1.0) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 5.0]
    assert exponential_backoff(3, 1.0, 5.0, rng=lambda: 0.0) == 2.0
    # The CLI's default base of 2 s: 1-2 s, then 2-4 s, then 4-8 s, ... at most 60 s.
    bounds = [(exponential_backoff(n, rng=lambda: 0.0), exponential_backoff(n, rng=lambda: 1.0)) for n in (1, 2, 3, 7)]
    assert bounds == [(1.0, 2.0), (2.0, 4.0), (4.0, 8.0), (30.0, 60.0)]


# --- The loop ----------------------------------------------------------------------------------


class RecordedDbt:
    """Replays recorded per-attempt results: the retry loop's I/O boundary, not Spark.

    Like dbt, it reports the nodes that ran and, with `manifest`, the whole project.
    """

    def __init__(
        self,
        attempts: list[dict[str, tuple[str, str | None]]],
        nodes: Mapping[str, Any] = NODES,
        manifest: bool = False,
    ) -> None:
        self.attempts = attempts
        self.nodes = nodes
        self.manifest = ManifestGraph(PKG, nodes) if manifest else None
        self.calls: list[list[str]] = []

    def __call__(self, args: Sequence[str]) -> DbtInvocation:
        self.calls.append(list(args))
        results = self.attempts[len(self.calls) - 1]
        nodes = tuple(
            NodeResult(uid(name), name, status, message, self.nodes[uid(name)]["resource_type"], self.nodes[uid(name)])
            for name, (status, message) in results.items()
        )
        success = all(status in {"success", "pass"} for status, _ in results.values())
        return DbtInvocation(tuple(args), success, nodes, (), manifest=self.manifest)


def selection(*names: str) -> list[str]:
    return [
        "--select",
        *(f"fqn:{PKG}.{n},resource_type:model,path:models/{n}.sql" for n in names),
        "--indirect-selection",
        "empty",
    ]


def test_loop_re_runs_then_succeeds_with_backoff_between_attempts() -> None:
    dbt = RecordedDbt(
        [
            {
                "events": ("error", MISSING_FILES.format(name="events")),
                "user_summary": ("skipped", None),
                "event_log": ("success", None),
                "broken": ("error", SQL_ERROR),
            },
            {"events": ("error", RUNTIME_FILTERING.format(name="events")), "user_summary": ("skipped", None)},
            {"events": ("success", None), "user_summary": ("success", None)},
        ]
    )
    waits: list[float] = []
    report = run_dbt_with_retries(
        ["--vars", "{batch: 2}"],
        command="run",
        max_attempts=3,
        invoke=dbt,
        sleep=waits.append,
        backoff=lambda n: n * 0.5,
    )
    assert waits == [0.5, 1.0]
    assert dbt.calls[1] == ["run", "--vars", "{batch: 2}", *selection("events", "user_summary")]
    events = report.node("events")
    assert (events.final_status, len(events.attempts)) == ("success", 3)
    assert [a.kind for a in events.attempts] == ["missing_files_to_delete", "concurrent_modification", None]
    assert report.node("event_log").attempts[0].status == "success" and len(report.node("event_log").attempts) == 1
    assert "not_iceberg_conflict" in (report.node("broken").not_rerun_reason or "")
    assert not report.success and report.exit_code == 1  # `broken` still failed
    document = json.loads(report.to_json())
    assert document["nodes"][0]["kinds"] == ["missing_files_to_delete", "concurrent_modification", None]


def test_loop_follows_the_manifest_through_an_ephemeral_model() -> None:
    dbt = RecordedDbt(
        [
            {"events": ("error", MISSING_FILES.format(name="events")), "daily_counts": ("skipped", None)},
            {"events": ("success", None), "daily_counts": ("success", None)},
        ],
        manifest=True,
    )
    report = run_dbt_with_retries([], invoke=dbt, sleep=lambda s: None)
    assert dbt.calls[1] == ["run", *selection("events", "daily_counts")]
    assert report.node("daily_counts").final_status == "success" and report.exit_code == 0


def test_loop_every_node_that_did_not_succeed_has_a_reason() -> None:
    dbt = RecordedDbt(
        [
            {
                "events": ("error", MISSING_FILES.format(name="events")),
                "user_summary": ("skipped", None),
                "log_summary": ("skipped", None),
                "hourly": ("partial success", None),
                "event_log": ("success", None),
            }
        ],
        nodes=with_meta("events", {"iceberg_maint": {"idempotent": 1}}),
    )
    report = run_dbt_with_retries([], invoke=dbt, sleep=lambda s: None)
    assert len(dbt.calls) == 1 and report.exit_code == 1
    assert report.node("hourly").final_status == "partial success" and not report.node("hourly").succeeded
    reasons = {node.name: node.not_rerun_reason for node in report.nodes if not node.succeeded}
    assert set(reasons) == {"events", "user_summary", "log_summary", "hourly"}
    assert all(reasons.values()), reasons
    assert "invalid meta.iceberg_maint.idempotent value 1" in (reasons["events"] or "")


def test_loop_reports_a_selected_node_that_dbt_did_not_run() -> None:
    dbt = RecordedDbt(
        [
            {"events": ("error", MISSING_FILES.format(name="events")), "user_summary": ("skipped", None)},
            {"events": ("success", None)},
        ]
    )
    report = run_dbt_with_retries([], invoke=dbt, sleep=lambda s: None)
    assert report.node("user_summary").final_status == "skipped"
    assert report.node("user_summary").not_rerun_reason == "selected for attempt 2, but dbt did not run it"
    assert report.exit_code == 1


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


# Recorded from a real run (dbt_iceberg_maint.runtime._conflict_gate scenario: dbt MERGE models against a
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
    assert rerun_args("run", ["--select", "path:models/conflicts", "--vars", "{batch: 2}"], plan) == [
        "run",
        "--vars",
        "{batch: 2}",
        "--select",
        f"fqn:{PKG}.conflicts.conflict_merge,resource_type:model,path:models/conflicts/conflict_merge.sql",
        f"fqn:{PKG}.conflicts.conflict_merge_child,resource_type:model,path:models/conflicts/conflict_merge_child.sql",
        "--indirect-selection",
        "empty",
    ]


def test_default_profiles_dir_follows_dbt(tmp_path: Path) -> None:
    from dbt_iceberg_maint.runtime.invoke import default_profiles_dir

    assert default_profiles_dir(tmp_path, {"DBT_PROFILES_DIR": "/etc/dbt"}) == Path("/etc/dbt")
    assert default_profiles_dir(tmp_path, {}) == Path.home() / ".dbt"
    (tmp_path / "profiles.yml").write_text("x: {}\n")
    assert default_profiles_dir(tmp_path, {}) == tmp_path
