"""failure_log: one failure per failed node of a dbt log; run_results.json; raw text."""

from __future__ import annotations

import json
from pathlib import Path

from dbt_iceberg_maint.conflicts import classify
from dbt_iceberg_maint.runner.failure_log import FailureText, failures_in, split_log

ESC = "\x1b"
SQL_ERROR = (
    "  [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name `no_such_column` "
    "cannot be resolved. Did you mean one of the following? [`event_id`]; line 19 pos 7;"
)
CONFLICT = (
    "  An error occurred while calling o412.sql.\n"
    "  : org.apache.iceberg.exceptions.ValidationException: Missing required files to delete: "
    "file:/wh/analytics/merged/data/00000-7-1c2d-00001.parquet\n"
    "  \tat org.apache.iceberg.ManifestFilterManager.validateRequiredDeletes(ManifestFilterManager.java:250)"
)
LOGS = Path(__file__).parent / "logs"
# logs/dbt.log of a dbt 1.10/1.11 run (format: time [level] [thread]: message; a message's
# further lines carry no prefix): each node's thread logs its error, the summary repeats it.
# Built from SQL_ERROR and CONFLICT; read byte for byte (ANSI colours, trailing blanks).
FILE_LOG = (LOGS / "dbt_file_log.log").read_bytes().decode("utf-8")
# The console (stdout) form of the summary, with a failed data test.
CONSOLE = (LOGS / "dbt_console.log").read_bytes().decode("utf-8")


def test_a_log_with_two_failed_models_gives_one_failure_per_model() -> None:
    failures = split_log(FILE_LOG)
    assert [(f.source, f.status) for f in failures] == [("broken", "error"), ("merged", "error")]
    assert [classify(f.text).kind for f in failures] == ["not_iceberg_conflict", "missing_files_to_delete"]
    broken, merged = failures
    # Each failure holds only its node's blocks: the conflict never leaks into the SQL error.
    assert "Missing required files" not in broken.text and "UNRESOLVED_COLUMN" not in merged.text
    assert broken.text.startswith("Runtime Error in model broken (models/broken.sql)")
    assert "1 of 3 ERROR creating sql table model analytics.broken" in broken.text
    assert ESC not in broken.text + merged.text and "compiled code" not in broken.text


def test_console_output_with_a_failed_test() -> None:
    failures = split_log(CONSOLE)
    assert [(f.source, f.status) for f in failures] == [("not_null_merged_event_id", "fail"), ("merged", "error")]
    assert "Got 2 results" in failures[0].text
    assert classify(failures[1].text).kind == "missing_files_to_delete"


def test_the_summary_alone_without_timestamps_is_split_at_each_heading() -> None:
    text = (
        f"Runtime Error in model broken (models/broken.sql)\n{SQL_ERROR}\n\n"
        f"Compilation Error in model typo (models/typo.sql)\n  'refx' is undefined\n\n"
        f"Runtime Error in model merged (models/merged.sql)\n{CONFLICT}\n"
    )
    kinds = {f.source: classify(f.text).kind for f in split_log(text)}
    assert kinds == {
        "broken": "not_iceberg_conflict",
        "typo": "not_iceberg_conflict",
        "merged": "missing_files_to_delete",
    }


def test_text_without_failure_headings_is_one_failure() -> None:
    text = "py4j.protocol.Py4JJavaError: An error occurred while calling o61.sql.\n" + CONFLICT
    assert split_log(text) == ()
    assert failures_in(text) == (FailureText("text", "error", text),)


def test_run_results_give_each_failed_result() -> None:
    document = {
        "results": [
            {"unique_id": "model.p.merged", "status": "error", "message": "Runtime Error in model merged\n" + CONFLICT},
            {"unique_id": "model.p.child", "status": "skipped", "message": None},
            {"unique_id": "test.p.not_null", "status": "fail", "message": "Got 2 results, configured to fail if != 0"},
        ]
    }
    assert [(f.source, f.status) for f in failures_in(json.dumps(document))] == [
        ("model.p.merged", "error"),
        ("test.p.not_null", "fail"),
    ]


def json_event(ts: str, level: str, msg: str) -> str:
    """One line of dbt's structured log (`--log-format json`)."""
    return json.dumps(
        {
            "info": {
                "name": "X",
                "code": "Z000",
                "msg": msg,
                "level": level,
                "invocation_id": "i",
                "pid": 1,
                "thread": "MainThread",
                "ts": f"2026-11-23T{ts}.000000Z",
            },
            "data": {},
        }
    )


def test_a_structured_json_log_is_read_per_node_like_the_text_log() -> None:
    log = "\n".join(
        [
            json_event("07:31:21", "info", "1 of 2 START sql table model analytics.broken ...... [RUN]"),
            json_event("07:31:23", "error", "Failure in model broken (models/broken.sql)"),
            json_event(
                "07:31:23",
                "error",
                f"  Runtime Error in model broken (models/broken.sql)\n  Runtime Error\n{SQL_ERROR}",
            ),
            json_event("07:31:23", "error", "Failure in model merged (models/merged.sql)"),
            json_event("07:31:23", "error", f"  Runtime Error in model merged (models/merged.sql)\n{CONFLICT}"),
            json_event("07:31:24", "info", "Done. PASS=0 WARN=0 ERROR=2 SKIP=0 NO-OP=0 TOTAL=2"),
        ]
    )
    kinds = {failure.source: classify(failure.text).kind for failure in failures_in(log)}
    assert kinds == {"broken": "not_iceberg_conflict", "merged": "missing_files_to_delete"}


def test_a_progress_line_naming_an_alias_adds_no_second_failure() -> None:
    console = (
        "07:31:22  1 of 1 ERROR creating sql incremental model analytics.events_v2 ..... [ERROR in 2.40s]\n"
        "07:31:23  Completed with 1 error, 0 partial successes, and 0 warnings:\n"
        "07:31:23  Failure in model events (models/events.sql)\n"
        f"07:31:23    Runtime Error in model events (models/events.sql)\n{CONFLICT}\n"
    )
    [failure] = failures_in(console)
    assert (failure.source, classify(failure.text).kind) == ("events", "missing_files_to_delete")
