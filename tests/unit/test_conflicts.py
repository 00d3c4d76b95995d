"""conflicts.classify: every kind, from Iceberg 1.10's real message templates, in every wrapper."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import FrozenInstanceError, dataclass
from pathlib import Path

import pytest

from dbt_iceberg_maint.conflicts import CONFLICT_KINDS, SUMMARIES, Classification, ConflictKind, classify

VALIDATION = "org.apache.iceberg.exceptions.ValidationException"
COMMIT_FAILED = "org.apache.iceberg.exceptions.CommitFailedException"
STATE_UNKNOWN = "org.apache.iceberg.exceptions.CommitStateUnknownException"
ISE = "java.lang.IllegalStateException"
RUNTIME = "java.lang.RuntimeException"

DATA_A = "file:/tmp/wh/analytics/events/data/event_ts_day=2026-11-04/00000-3-8c1d-00001.parquet"
DATA_B = "file:/tmp/wh/analytics/events/data/event_ts_day=2026-11-04/00001-4-8c1d-00001.parquet"
DELETE_A = "s3://bucket/wh/db/t/data/id=1/00000-9-77aa-00001-deletes.parquet"
DV_PUFFIN = "s3://bucket/wh/db/t/data/00000-1-dv.puffin"

# Exactly as Iceberg 1.10 formats them (ValidationException templates, CommitStateUnknownException).
COMMON_INFO = (
    "Cannot determine whether the commit was successful or not, the underlying data files may or "
    "may not be needed. Manual intervention via the Remove Orphan Files Action can remove these "
    "files when a connection to the Catalog can be re-established if the commit was actually "
    "unsuccessful.\nPlease check to see whether or not your commit was successful before retrying "
    "this commit. Retrying an already successful operation will result in duplicate records or "
    "unintentional modifications.\nAt this time no files will be deleted including possibly unused "
    "manifest lists."
)
REWRITE_WRAPPER = (
    "Cannot commit rewrite because of a ValidationException or CommitFailedException. This usually "
    "means that this rewrite has conflicted with another concurrent Iceberg operation. To reduce the "
    "likelihood of conflicts, set partial-progress.enabled which will break up the rewrite into "
    "multiple smaller commits controlled by partial-progress.max-commits. Separate smaller rewrite "
    "commits can succeed independently while any commits that conflict with another Iceberg "
    "operation will be ignored. This mode will create additional snapshots in the table history, "
    "one for each commit."
)
COMMIT_SERVICE_TIMEOUT = (
    "Timeout occurred when waiting for commits to complete. {} file groups committed. {} file groups "
    "remain uncommitted. Retry this operation to attempt rewriting the failed groups. [3, 2]"
)
GENERIC_DATA_FILE = (
    f"GenericDataFile{{content=data, file_path={DATA_A}, file_format=PARQUET, spec_id=0, "
    "partition=PartitionData{event_ts_day=20396}, record_count=3, file_size_in_bytes=1543, "
    "column_sizes=null, value_counts=null}"
)


@dataclass(frozen=True)
class Case:
    id: str
    exception_class: str
    message: str
    kind: ConflictKind
    files: tuple[str, ...] = ()


CASES: tuple[Case, ...] = (
    Case(
        "missing_files_to_delete",
        VALIDATION,
        f"Missing required files to delete: {DATA_A},{DATA_B}",
        ConflictKind.MISSING_FILES_TO_DELETE,
        (DATA_A, DATA_B),
    ),
    Case(
        "missing_files_to_delete_spaced",
        VALIDATION,
        f"Missing required files to delete: {DATA_A}, {DATA_B}",
        ConflictKind.MISSING_FILES_TO_DELETE,
        (DATA_A, DATA_B),
    ),
    Case(
        "missing_data_files",
        VALIDATION,
        f"Cannot commit, missing data files: [{DATA_A}, {DATA_B}]",
        ConflictKind.MISSING_DATA_FILES,
        (DATA_A, DATA_B),
    ),
    Case(
        "new_position_delete",
        VALIDATION,
        f"Cannot commit, found new position delete for replaced data file: {GENERIC_DATA_FILE}",
        ConflictKind.NEW_DELETE_FOR_REPLACED_FILE,
        (DATA_A,),
    ),
    Case(
        "new_delete",
        VALIDATION,
        f"Cannot commit, found new delete for replaced data file: {GENERIC_DATA_FILE}",
        ConflictKind.NEW_DELETE_FOR_REPLACED_FILE,
        (DATA_A,),
    ),
    Case(
        "conflicting_added_expr",
        VALIDATION,
        f'Found conflicting files that can contain records matching ref(name="id") == 1: [{DATA_A}]',
        ConflictKind.CONFLICTING_ADDED_FILES,
        (DATA_A,),
    ),
    Case(
        "conflicting_added_true",
        VALIDATION,
        f"Found conflicting files that can contain records matching true: [{DATA_A}, {DATA_B}]",
        ConflictKind.CONFLICTING_ADDED_FILES,
        (DATA_A, DATA_B),
    ),
    Case(
        "conflicting_added_partitions",
        VALIDATION,
        f"Found conflicting files that can contain records matching partitions [id=1]: [{DATA_B}]",
        ConflictKind.CONFLICTING_ADDED_FILES,
        (DATA_B,),
    ),
    Case(
        "conflicting_delete_files",
        VALIDATION,
        "Found new conflicting delete files that can apply to records matching "
        f'(ref(name="dep") == "hr" and true): [{DELETE_A}]',
        ConflictKind.CONFLICTING_DELETE_FILES,
        (DELETE_A,),
    ),
    Case(
        "conflicting_deleted_expr",
        VALIDATION,
        f"Found conflicting deleted files that can contain records matching true: [{DATA_A}]",
        ConflictKind.CONFLICTING_DELETED_FILES,
        (DATA_A,),
    ),
    Case(
        "conflicting_deleted_partitions",
        VALIDATION,
        f"Found conflicting deleted files that can apply to records matching [dep=hr]: [{DATA_A}]",
        ConflictKind.CONFLICTING_DELETED_FILES,
        (DATA_A,),
    ),
    Case(
        "concurrent_dv",
        VALIDATION,
        f"Found concurrently added DV for {DATA_A}: "
        f"DV{{location={DV_PUFFIN}, offset=4, length=40, referencedDataFile={DATA_A}}}",
        ConflictKind.CONCURRENT_DV,
        (DV_PUFFIN, DATA_A),
    ),
    Case(
        "history_starting",
        VALIDATION,
        "Cannot determine history between starting snapshot 5273456720914564213 "
        "and the last known ancestor 8714591923450412312",
        ConflictKind.HISTORY_BROKEN,
    ),
    Case(
        "history_read",
        VALIDATION,
        "Cannot determine history between read snapshot 12 and the last known ancestor null",
        ConflictKind.HISTORY_BROKEN,
    ),
    Case(
        "partial_row_delete",
        VALIDATION,
        f'Cannot delete file where some, but not all, rows match filter ref(name="event_date") == 20396: {DATA_A}',
        ConflictKind.PARTIAL_ROW_DELETE,
        (DATA_A,),
    ),
    Case(
        "manifest_rewrite",
        VALIDATION,
        "Deleted manifest file:/tmp/wh/db/t/metadata/4f1-m0.avro could not be found in the latest snapshot 7023",
        ConflictKind.MANIFEST_REWRITE_CONFLICT,
    ),
    Case(
        "runtime_filtering",
        ISE,
        "Runtime file filtering is not possible: the table has been concurrently modified. Row-level "
        "operation scan snapshot ID: 101, current table snapshot ID: 102. If an external process modifies "
        "the table, enable table caching in the catalog. If multiple threads modify the table, use "
        "independent Spark sessions in each thread.",
        ConflictKind.CONCURRENT_MODIFICATION,
    ),
    Case(
        "partial_progress",
        RUNTIME,
        "partial-progress.enabled is true but 3 rewrite commits failed. This is more than the maximum "
        "allowed failures of 0. Check the logs to determine why the individual commits failed. If this is "
        "persistent it may help to increase partial-progress.max-commits which will split the rewrite "
        "operation into smaller commits.",
        ConflictKind.REWRITE_COMMIT_CONFLICT,
    ),
    Case("rewrite_wrapper_without_cause", RUNTIME, REWRITE_WRAPPER, ConflictKind.REWRITE_COMMIT_CONFLICT),
    Case(
        "commit_service_timeout",
        "java.lang.IllegalArgumentException",
        "Timeout occurred when waiting for commits to complete. {} file groups committed. {} file groups "
        "remain uncommitted. Retry this operation to attempt rewriting the failed groups. [3, 2]",
        ConflictKind.REWRITE_COMMIT_CONFLICT,
    ),
    # Catalog CAS failures, every catalog.
    Case("stale_metastore", COMMIT_FAILED, "Cannot commit: stale table metadata", ConflictKind.COMMIT_FAILED),
    Case(
        "hadoop_stale", COMMIT_FAILED, "Cannot commit changes based on stale table metadata", ConflictKind.COMMIT_FAILED
    ),
    Case(
        "hadoop_lock",
        COMMIT_FAILED,
        "Failed to acquire lock on file: /wh/t/metadata/v3.metadata.json with owner: 7e1",
        ConflictKind.COMMIT_FAILED,
    ),
    Case(
        "hadoop_version",
        COMMIT_FAILED,
        "Version 4 already exists: /wh/t/metadata/v4.metadata.json",
        ConflictKind.COMMIT_FAILED,
    ),
    Case(
        "hadoop_rename",
        COMMIT_FAILED,
        "Failed to commit changes using rename: /wh/t/metadata/v4.metadata.json",
        ConflictKind.COMMIT_FAILED,
    ),
    Case(
        "hive_base_location",
        COMMIT_FAILED,
        "Cannot commit: Base metadata location 's3://b/t/metadata/00003.metadata.json' is not same as the "
        "current table metadata location 's3://b/t/metadata/00004.metadata.json' for db.t",
        ConflictKind.COMMIT_FAILED,
    ),
    Case("hive_modified", COMMIT_FAILED, "The table db.t has been modified concurrently", ConflictKind.COMMIT_FAILED),
    Case(
        "hive_lock",
        COMMIT_FAILED,
        "org.apache.iceberg.hive.LockException: Timed out after 180003 ms waiting for lock on db.t",
        ConflictKind.COMMIT_FAILED,
    ),
    Case(
        "jdbc_location",
        COMMIT_FAILED,
        "Cannot commit db.t: metadata location file:/wh/t/metadata/v5.json "
        "has changed from file:/wh/t/metadata/v4.json",
        ConflictKind.COMMIT_FAILED,
    ),
    Case("jdbc_update", COMMIT_FAILED, "Failed to update table db.t from catalog local", ConflictKind.COMMIT_FAILED),
    Case(
        "glue_location",
        COMMIT_FAILED,
        "Cannot commit db.t because base metadata location 's3://a' is not same as the current Glue location 's3://b'",
        ConflictKind.COMMIT_FAILED,
    ),
    Case(
        "glue_concurrent",
        COMMIT_FAILED,
        "Cannot commit db.t because Glue detected concurrent update",
        ConflictKind.COMMIT_FAILED,
    ),
    Case(
        "rest_409",
        COMMIT_FAILED,
        "Commit failed: Requirement failed: branch main has changed: expected id 1 != 2",
        ConflictKind.COMMIT_FAILED,
    ),
    Case(
        "nessie_hash",
        COMMIT_FAILED,
        "Cannot commit: Reference hash is out of date. Update the reference 'main' and try again",
        ConflictKind.COMMIT_FAILED,
    ),
    # Unknown commit state, REST 5xx included.
    Case("state_unknown", STATE_UNKNOWN, f"Read timed out\n{COMMON_INFO}", ConflictKind.COMMIT_STATE_UNKNOWN),
    Case(
        "rest_503", STATE_UNKNOWN, f"Service failed: 503: Slow down\n{COMMON_INFO}", ConflictKind.COMMIT_STATE_UNKNOWN
    ),
    Case(
        "hive_heartbeat",
        STATE_UNKNOWN,
        "Failed to heartbeat for hive lock while committing changes. This can lead to a concurrent commit "
        "attempt be able to overwrite this commit. Please check the commit history. If you are running into "
        f"this issue, try reducing iceberg.hive.lock-heartbeat-interval-ms.\nLock is not active\n{COMMON_INFO}",
        ConflictKind.COMMIT_STATE_UNKNOWN,
    ),
    Case(
        "rest_io_on_commit",
        "org.apache.iceberg.exceptions.RESTException",
        "Error occurred while processing POST request",
        ConflictKind.COMMIT_STATE_UNKNOWN,
    ),
    # Guards and bad arguments.
    Case(
        "orphan_guard",
        "java.lang.IllegalArgumentException",
        "Cannot remove orphan files with an interval less than 24 hours. Executing this procedure with a short "
        "interval may corrupt the table if other operations are happening at the same time.",
        ConflictKind.INVALID_REQUEST,
    ),
    Case(
        "retain_last",
        "java.lang.IllegalArgumentException",
        "Number of snapshots to retain must be at least 1, cannot be: 0",
        ConflictKind.INVALID_REQUEST,
    ),
    Case(
        "unknown_argument",
        "org.apache.spark.sql.AnalysisException",
        "Could not build name to arg map: Unknown argument: prefix_listing",
        ConflictKind.INVALID_REQUEST,
    ),
    Case(
        "unparsable_where",
        "java.lang.IllegalArgumentException",
        "Cannot parse predicates in where option: event_ts >>> 3",
        ConflictKind.INVALID_REQUEST,
    ),
    Case(
        "invalid_isolation",
        "java.lang.IllegalArgumentException",
        "Invalid isolation level: strict",
        ConflictKind.INVALID_REQUEST,
    ),
    Case(
        "bad_option",
        "java.lang.IllegalArgumentException",
        "Cannot use options [min-input-file], they are not supported by the action or the rewriter "
        "BinPackRewriteFilePlanner",
        ConflictKind.INVALID_REQUEST,
    ),
    Case(
        "missing_parameters",
        "org.apache.spark.sql.AnalysisException",
        "Missing required parameters: [table]",
        ConflictKind.INVALID_REQUEST,
    ),
    Case(
        "gc_disabled",
        VALIDATION,
        "Cannot expire snapshots: GC is disabled (deleting files may corrupt other tables)",
        ConflictKind.INVALID_REQUEST,
    ),
    # Everything else.
    Case(
        "table_not_found",
        "org.apache.spark.sql.AnalysisException",
        "[TABLE_OR_VIEW_NOT_FOUND] The table or view `analytics`.`nope` cannot be found.",
        ConflictKind.NOT_ICEBERG_CONFLICT,
    ),
    Case(
        "unresolved_column",
        "org.apache.spark.sql.catalyst.ExtendedAnalysisException",
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column or function parameter with name `no_such_column` "
        "cannot be resolved.",
        ConflictKind.NOT_ICEBERG_CONFLICT,
    ),
    Case(
        "stage_failure",
        "org.apache.spark.SparkException",
        "Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: "
        "java.lang.OutOfMemoryError: Java heap space",
        ConflictKind.NOT_ICEBERG_CONFLICT,
    ),
)

FRAMES = (
    "\tat org.apache.iceberg.ManifestFilterManager.validateRequiredDeletes(ManifestFilterManager.java:250)\n"
    "\tat org.apache.iceberg.SnapshotProducer.apply(SnapshotProducer.java:240)\n"
    "\tat org.apache.spark.sql.execution.datasources.v2.V2TableWriteExec"
    ".writeWithV2(WriteToDataSourceV2Exec.scala:399)\n"
)


def py4j(cls: str, msg: str, frames: str) -> str:
    return f"An error occurred while calling o87.sql.\n: {cls}: {msg}\n{frames}"


def py4j_repr(cls: str, msg: str, frames: str) -> str:
    return f"py4j.protocol.Py4JJavaError: {py4j(cls, msg, frames)}"


def dbt_run_results(cls: str, msg: str, frames: str) -> str:
    body = py4j(cls, msg, frames)
    return "Runtime Error in model events (models/events.sql)\n" + "\n".join(f"  {line}" for line in body.splitlines())


def thrift(cls: str, msg: str, frames: str) -> str:
    return (
        "Database Error in model events (models/events.sql)\n"
        f"  org.apache.hive.service.cli.HiveSQLException: Error running query: {cls}: {msg}\n"
        "  \tat org.apache.spark.sql.hive.thriftserver.HiveThriftServerErrors$"
        ".runningQueryError(HiveThriftServerErrors.scala:46)\n"
        f"{frames}"
    )


def log_excerpt(cls: str, msg: str, frames: str) -> str:
    return (
        "\x1b[0m07:31:22.104512 [debug] [Thread-1 (]: Spark adapter: Error while running:\nmerge into ...\n"
        f"\x1b[0m07:31:22.105120 [error] [Thread-1 (]: 1 of 3 ERROR creating sql incremental model analytics.events\n"
        f"\x1b[0m07:31:22.106002 [debug] [Thread-1 (]: Runtime Error in model events (models/events.sql)\n"
        f"  An error occurred while calling o87.sql.\n  : {cls}: {msg}\n{frames}"
        "\x1b[0m07:31:22.200000 [info ] [MainThread]: Finished running 3 models in 0 hours 0 minutes.\n"
    )


def caused_by(cls: str, msg: str, frames: str) -> str:
    return (
        "An error occurred while calling o87.sql.\n: org.apache.spark.SparkException: Writing job failed.\n"
        "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.writingJobFailedError(QueryExecutionErrors.scala:916)\n"
        f"Caused by: {cls}: {msg}\n{frames}\t... 42 more\n"
    )


def spark_connect(cls: str, msg: str, frames: str) -> str:
    return f"pyspark.errors.exceptions.connect.SparkConnectGrpcException: ({cls}) {msg}"


HIVE_SQL_EXCEPTION = "org.apache.hive.service.cli.HiveSQLException"
HIVE_ERROR_FRAME = (
    "\tat org.apache.spark.sql.hive.thriftserver.HiveThriftServerErrors$"
    ".runningQueryError(HiveThriftServerErrors.scala:46)\n"
)


def hive_chain(cls: str, msg: str, frames: str) -> str:
    """The Thrift Server's exception chain as Java prints it: HiveSQLException, caused by the error."""
    header = f"{HIVE_SQL_EXCEPTION}: Error running query: {cls}: {msg}"
    return f"{header}\n{HIVE_ERROR_FRAME}Caused by: {cls}: {msg}\n{frames}"


def hive_packed(java: str) -> list[str]:
    """A Java chain packed as Hive's HiveSQLException.toString(Throwable) does for `infoMessages`:
    `*class:message:n:m` per exception, `class:method:file:line` per frame."""
    exceptions: list[tuple[str, list[str], list[str]]] = []  # class, message lines, packed frames
    for line in java.splitlines():
        frame = re.fullmatch(r"\s*at ([\w$.]+)\.([\w$<>]+)\(([^:()]*):(\d+)\)", line)
        if frame:
            exceptions[-1][2].append(":".join(frame.groups()))
        elif re.fullmatch(r"\s*\.\.\. \d+ more", line):
            continue
        elif line.startswith("Caused by: ") or not exceptions:
            cls, _, message = line.removeprefix("Caused by: ").partition(": ")
            exceptions.append((cls, [message], []))
        else:
            exceptions[-1][1].append(line)
    packed: list[str] = []
    for cls, message, frames in exceptions:
        packed.append(f"*{cls}:{chr(10).join(message)}:{len(frames)}:{len(frames)}")
        packed.extend(frames)
    return packed


def pyhive(cls: str, msg: str, frames: str) -> str:
    """str() of the OperationalError PyHive raises: the server's TExecuteStatementResp."""
    info = hive_packed(hive_chain(cls, msg, frames))
    status = (f"TStatus(statusCode=3, infoMessages={info!r}, sqlState=None, errorCode=0, "
              f"errorMessage={f'Error running query: {cls}: {msg}'!r})")
    return f"TExecuteStatementResp(status={status}, operationHandle=None)"


def beeline(cls: str, msg: str, frames: str) -> str:
    """pyspark's bin/beeline -e: its prompt, `Error: `, the chain (verbose) and the JDBC state."""
    prompt = "0: jdbc:hive2://127.0.0.1:10000/default> "
    if not frames:
        return f"{prompt}Error: {HIVE_SQL_EXCEPTION}: Error running query: {cls}: {msg} (state=,code=0)\n"
    return f"{prompt}Error: {hive_chain(cls, msg, frames)}\t... 16 more (state=,code=0)\n"


# The JVM launcher's notice on stderr when JAVA_TOOL_OPTIONS (or _JAVA_OPTIONS, JDK_JAVA_OPTIONS)
# is set, as many company machines set it: each JVM prints it before anything else.
JVM_NOTICE = "Picked up JAVA_TOOL_OPTIONS: -Xmx2g -Djavax.net.ssl.trustStore=/etc/ssl/company.jks"


def beeline_java_options(cls: str, msg: str, frames: str) -> str:
    """beeline with JAVA_TOOL_OPTIONS set: its JVMs' notices, the first right after the prompt."""
    prompt = "0: jdbc:hive2://127.0.0.1:10000/default> "
    return beeline(cls, msg, frames).replace(prompt, f"{prompt}{JVM_NOTICE}\n{JVM_NOTICE}\n", 1)


def jvm_notice(cls: str, msg: str, frames: str) -> str:
    """A bare Java trace (a log excerpt) after the launcher's notice (JDK_JAVA_OPTIONS)."""
    return f"NOTE: Picked up JDK_JAVA_OPTIONS: -Xss4m\n{cls}: {msg}\n{frames}"


WRAPPERS: dict[str, Callable[[str, str, str], str]] = {
    "py4j": py4j,
    "py4j_repr": py4j_repr,
    "dbt_run_results": dbt_run_results,
    "thrift": thrift,
    "log_excerpt": log_excerpt,
    "caused_by": caused_by,
    "spark_connect": spark_connect,
    "pyhive": pyhive,
    "beeline": beeline,
    "beeline_java_options": beeline_java_options,
    "jvm_notice": jvm_notice,
}


@pytest.mark.parametrize("frames", [FRAMES, ""], ids=["frames", "no_frames"])
@pytest.mark.parametrize("wrapper", WRAPPERS.values(), ids=WRAPPERS.keys())
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_kind_in_every_wrapper(case: Case, wrapper: Callable[[str, str, str], str], frames: str) -> None:
    result = classify(wrapper(case.exception_class, case.message, frames))
    assert result.kind == case.kind.value
    assert result.files == case.files
    if case.kind is not ConflictKind.NOT_ICEBERG_CONFLICT:
        assert result.exception_class in {case.exception_class, None}
        assert result.exception_class == case.exception_class or case.kind is ConflictKind.INVALID_REQUEST
    assert result.retryable is (case.kind in CONFLICT_KINDS or case.kind is ConflictKind.COMMIT_FAILED)
    assert "\n" not in result.summary and result.summary


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.kind not in {ConflictKind.NOT_ICEBERG_CONFLICT}], ids=lambda c: c.id
)
def test_truncated_tail_keeps_the_kind_and_drops_cut_paths(case: Case) -> None:
    text = py4j(case.exception_class, case.message, FRAMES)
    # Cut 10 characters before the end of the message (in the middle of the last named path),
    # keeping at least the first 40 characters that say what happened.
    keep = max(len(case.message) - 10, min(len(case.message), 40))
    result = classify(text[: text.index(case.message) + keep])
    assert result.kind == case.kind.value
    assert set(result.files) <= set(case.files)
    assert all(path in case.files for path in result.files)


def test_truncated_missing_files_keeps_the_complete_paths() -> None:
    text = py4j(VALIDATION, f"Missing required files to delete: {DATA_A},{DATA_B}", FRAMES)
    result = classify(text[: text.index(DATA_B) + 20])
    assert result.kind == "missing_files_to_delete"
    assert result.files == (DATA_A,)


# Spark Connect prints no `Caused by:`; every other form can show the wrapper's cause.
CAUSE_WRAPPERS = {name: wrapper for name, wrapper in WRAPPERS.items() if name != "spark_connect"}
REWRITE_FRAMES = (
    "\tat org.apache.iceberg.spark.actions.RewriteDataFilesSparkAction"
    ".doExecute(RewriteDataFilesSparkAction.java:329)\n"
)


def rewrite_failure(wrapper: Callable[[str, str, str], str], cause_class: str, cause_message: str) -> str:
    """rewrite_data_files' wrapper with its `Caused by:`, in one of the forms users meet."""
    return wrapper(RUNTIME, REWRITE_WRAPPER, f"{REWRITE_FRAMES}Caused by: {cause_class}: {cause_message}\n{FRAMES}")


@pytest.mark.parametrize("wrapper", CAUSE_WRAPPERS.values(), ids=CAUSE_WRAPPERS.keys())
@pytest.mark.parametrize(
    "cause", [c for c in CASES if c.kind in CONFLICT_KINDS and c.exception_class == VALIDATION], ids=lambda c: c.id
)
def test_rewrite_wrapper_takes_the_kind_of_its_cause(cause: Case, wrapper: Callable[[str, str, str], str]) -> None:
    result = classify(rewrite_failure(wrapper, cause.exception_class, cause.message))
    assert (result.kind, result.exception_class) == (cause.kind.value, VALIDATION)
    assert result.files == cause.files
    assert result.retryable


@pytest.mark.parametrize("wrapper", CAUSE_WRAPPERS.values(), ids=CAUSE_WRAPPERS.keys())
def test_rewrite_wrapper_with_a_catalog_cause_is_commit_failed(wrapper: Callable[[str, str, str], str]) -> None:
    result = classify(rewrite_failure(wrapper, COMMIT_FAILED, "Cannot commit: stale table metadata"))
    assert (result.kind, result.exception_class) == ("commit_failed", COMMIT_FAILED)


@pytest.mark.parametrize("wrapper", CAUSE_WRAPPERS.values(), ids=CAUSE_WRAPPERS.keys())
def test_rewrite_wrapper_with_an_unrecognised_cause_is_what_that_cause_is_alone(
    wrapper: Callable[[str, str, str], str],
) -> None:
    # The cause is visible, so the wrapper's "conflicted with another concurrent Iceberg
    # operation" does not decide; this ValidationException is no conflict a re-run resolves.
    message = "Cannot add snapshot with sequence number 5 older than last sequence number 6"
    alone = classify(f"{VALIDATION}: {message}")
    result = classify(rewrite_failure(wrapper, VALIDATION, message))
    assert (result.kind, result.retryable, result.exception_class) == (
        alone.kind,
        alone.retryable,
        alone.exception_class,
    )
    assert (result.kind, result.retryable, result.exception_class) == ("not_iceberg_conflict", False, VALIDATION)


@pytest.mark.parametrize("wrapper", CAUSE_WRAPPERS.values(), ids=CAUSE_WRAPPERS.keys())
@pytest.mark.parametrize(
    "cut_after",
    [f"Caused by: {VALIDATION[:24]}", REWRITE_WRAPPER[:80]],
    ids=["inside_the_cause_class", "inside_the_wrapper_message"],
)
def test_rewrite_wrapper_cut_before_its_cause_is_a_rewrite_conflict(
    wrapper: Callable[[str, str, str], str], cut_after: str
) -> None:
    text = rewrite_failure(wrapper, VALIDATION, f"Missing required files to delete: {DATA_A}")
    # PyHive packs a cause as `'*<class>:...` instead of `Caused by: <class>: ...`.
    marker = cut_after if cut_after in text else cut_after.replace("Caused by: ", "'*")
    result = classify(text[: text.index(marker) + len(marker)])
    assert (result.kind, result.retryable, result.exception_class) == ("rewrite_commit_conflict", True, RUNTIME)


@pytest.mark.parametrize("wrapper", CAUSE_WRAPPERS.values(), ids=CAUSE_WRAPPERS.keys())
def test_rewrite_wrapper_cut_inside_its_cause_keeps_the_kind_of_the_cause(
    wrapper: Callable[[str, str, str], str],
) -> None:
    text = rewrite_failure(wrapper, VALIDATION, f"Missing required files to delete: {DATA_A},{DATA_B}")
    result = classify(text[: text.index(DATA_B) + 20])
    assert (result.kind, result.files) == ("missing_files_to_delete", (DATA_A,))


def test_spark_connect_prints_no_cause_so_the_wrapper_is_a_rewrite_conflict() -> None:
    result = classify(rewrite_failure(spark_connect, VALIDATION, f"Missing required files to delete: {DATA_A}"))
    assert (result.kind, result.retryable) == ("rewrite_commit_conflict", True)


def test_unknown_state_wins_over_everything_else_in_the_chain() -> None:
    text = (
        f"{COMMIT_FAILED}: Commit failed: x\n{FRAMES}"
        f"Caused by: {STATE_UNKNOWN}: Service failed: 502: bad gateway\n{COMMON_INFO}\n"
    )
    assert classify(text) == Classification(
        kind="commit_state_unknown",
        retryable=False,
        exception_class=STATE_UNKNOWN,
        summary=classify(text).summary,
    )
    # Even when the class line was lost, Iceberg's fixed explanation gives it away.
    assert classify(COMMON_INFO).kind == "commit_state_unknown"


FAILURES = Path(__file__).parent / "failures"
FIXTURES = sorted(path.stem for path in FAILURES.glob("*.txt"))


@pytest.mark.parametrize("name", FIXTURES)
def test_recorded_failure_texts(name: str) -> None:
    """`failures/<name>.txt` (the text, byte for byte) classifies as `failures/<name>.json` says."""
    text = (FAILURES / f"{name}.txt").read_bytes().decode("utf-8")
    expected = json.loads((FAILURES / f"{name}.json").read_text())
    result = classify(text)
    got = {"kind": result.kind, "retryable": result.retryable, "exception_class": result.exception_class,
           "files": list(result.files)}
    assert got == expected
    assert result.summary == SUMMARIES[ConflictKind(result.kind)]


def test_every_failure_text_has_its_expected_verdict_and_none_is_missing() -> None:
    assert len(FIXTURES) >= 34
    assert sorted(path.stem for path in FAILURES.glob("*.json")) == FIXTURES
    # Texts that must never be read as a conflict, whatever Iceberg words they quote.
    never = [name for name in FIXTURES if name.startswith("not_a_conflict__")]
    assert len(never) == 23
    for name in never:
        assert json.loads((FAILURES / f"{name}.json").read_text())["kind"] == "not_iceberg_conflict"


def test_missing_files_summary_names_the_remediation() -> None:
    summary = classify(py4j(VALIDATION, f"Missing required files to delete: {DATA_A}", "")).summary
    assert "compaction" in summary and "re-run is safe for idempotent models" in summary and "where" in summary


def test_every_contract_kind_is_covered_by_a_case() -> None:
    assert {case.kind for case in CASES} == set(ConflictKind)


def test_classification_is_frozen_and_text_must_be_str() -> None:
    result = classify("x")
    with pytest.raises(FrozenInstanceError):
        result.kind = "commit_failed"  # type: ignore[misc]
    with pytest.raises(TypeError, match="expects the failure text as str, got bytes"):
        classify(b"x")  # type: ignore[arg-type]


def test_commit_state_unknown_points_to_the_runners_landed_verification() -> None:
    summary = classify(f"{STATE_UNKNOWN}: Service failed: 502: bad gateway\n{COMMON_INFO}").summary
    assert "`dbt-iceberg-maint run` checks the table's snapshots" in summary and "`write_landed`" in summary
    assert "never re-run blindly" in summary
