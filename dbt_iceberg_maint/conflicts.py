"""Classify Iceberg commit failures from the text a user meets (pure, no I/O).

Input is any failure text: a raw `Py4JJavaError` string, a dbt `run_results.json` message
("Runtime Error in model ..."), a Spark Thrift Server error (`HiveSQLException: Error running
query: ...`), a dbt log excerpt, with or without Java stack frames, `Caused by:` chains or a
truncated tail. The text is split into exception records (`<class>: <message>`), each record
is matched against Iceberg 1.10's own message templates, and the most cautious verdict wins:
an unknown commit state beats a bad request, which beats a data conflict, which beats a catalog
CAS failure. Anything not recognised is `not_iceberg_conflict` and is never retryable.

`retryable` answers one question: would re-running the *same idempotent statement* be safe?
Whether the statement is idempotent is decided elsewhere (`dbt_iceberg_maint.idempotency`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class ConflictKind(str, Enum):
    """The kinds of the public contract (DESIGN.md, "Python")."""

    MISSING_FILES_TO_DELETE = "missing_files_to_delete"
    MISSING_DATA_FILES = "missing_data_files"
    NEW_DELETE_FOR_REPLACED_FILE = "new_delete_for_replaced_file"
    CONFLICTING_ADDED_FILES = "conflicting_added_files"
    CONFLICTING_DELETE_FILES = "conflicting_delete_files"
    CONFLICTING_DELETED_FILES = "conflicting_deleted_files"
    CONCURRENT_DV = "concurrent_dv"
    HISTORY_BROKEN = "history_broken"
    PARTIAL_ROW_DELETE = "partial_row_delete"
    MANIFEST_REWRITE_CONFLICT = "manifest_rewrite_conflict"
    REWRITE_COMMIT_CONFLICT = "rewrite_commit_conflict"
    CONCURRENT_MODIFICATION = "concurrent_modification"
    COMMIT_FAILED = "commit_failed"
    COMMIT_STATE_UNKNOWN = "commit_state_unknown"
    INVALID_REQUEST = "invalid_request"
    NOT_ICEBERG_CONFLICT = "not_iceberg_conflict"


CONFLICT_KINDS: frozenset[ConflictKind] = frozenset(
    {
        ConflictKind.MISSING_FILES_TO_DELETE,
        ConflictKind.MISSING_DATA_FILES,
        ConflictKind.NEW_DELETE_FOR_REPLACED_FILE,
        ConflictKind.CONFLICTING_ADDED_FILES,
        ConflictKind.CONFLICTING_DELETE_FILES,
        ConflictKind.CONFLICTING_DELETED_FILES,
        ConflictKind.CONCURRENT_DV,
        ConflictKind.HISTORY_BROKEN,
        ConflictKind.PARTIAL_ROW_DELETE,
        ConflictKind.MANIFEST_REWRITE_CONFLICT,
        ConflictKind.REWRITE_COMMIT_CONFLICT,
        ConflictKind.CONCURRENT_MODIFICATION,
    }
)
RETRYABLE_KINDS: frozenset[ConflictKind] = CONFLICT_KINDS | {ConflictKind.COMMIT_FAILED}

# One line per kind: what happened, whether a re-run is safe, what prevents it next time.
SUMMARIES: dict[ConflictKind, str] = {
    ConflictKind.MISSING_FILES_TO_DELETE: (
        "a concurrent commit (usually compaction) replaced files this write read; re-run is safe "
        "for idempotent models; scope compaction to cold partitions with a `where` filter"
    ),
    ConflictKind.MISSING_DATA_FILES: (
        "a concurrent commit (usually compaction) removed data files this merge-on-read write "
        "references; re-run is safe for idempotent models; compact only cold partitions"
    ),
    ConflictKind.NEW_DELETE_FOR_REPLACED_FILE: (
        "a concurrent writer added deletes to files this commit replaces; re-run is safe for "
        "idempotent models; compact partitions writers no longer touch"
    ),
    ConflictKind.CONFLICTING_ADDED_FILES: (
        "a concurrent commit added files matching this write's filter (serializable isolation); "
        "re-run is safe for idempotent models; consider snapshot isolation or a partition "
        "predicate in the ON clause"
    ),
    ConflictKind.CONFLICTING_DELETE_FILES: (
        "a concurrent commit added delete files for rows this write reads; re-run is safe for "
        "idempotent models; serialise the writers of these partitions"
    ),
    ConflictKind.CONFLICTING_DELETED_FILES: (
        "a concurrent commit deleted files matching this write's filter; re-run is safe for "
        "idempotent models; serialise the writers of these partitions"
    ),
    ConflictKind.CONCURRENT_DV: (
        "a concurrent writer added a deletion vector for the same data file; re-run is safe for "
        "idempotent models; serialise row-level writers of this table"
    ),
    ConflictKind.HISTORY_BROKEN: (
        "the snapshot this write started from is no longer in the table history (expired or "
        "rolled back concurrently); re-run is safe for idempotent models; expire only snapshots "
        "older than the longest job"
    ),
    ConflictKind.PARTIAL_ROW_DELETE: (
        "a concurrent append added a file that the delete filter matches only partly; re-run is "
        "safe for idempotent models"
    ),
    ConflictKind.MANIFEST_REWRITE_CONFLICT: (
        "rewrite_manifests lost to a concurrent commit that replaced manifests; re-run is safe; "
        "schedule manifest rewrites away from writers"
    ),
    ConflictKind.REWRITE_COMMIT_CONFLICT: (
        "a rewrite (compaction) commit conflicted with a concurrent operation; re-run is safe; "
        "enable partial-progress.enabled or narrow the `where` filter to cold partitions"
    ),
    ConflictKind.CONCURRENT_MODIFICATION: (
        "the table changed while this copy-on-write statement was planned (shared Spark session); "
        "nothing was committed; re-run is safe for idempotent models; run maintenance in its "
        "own session"
    ),
    ConflictKind.COMMIT_FAILED: (
        "the catalog rejected the commit after Iceberg's own retries (concurrent commits); "
        "nothing was committed; re-run is safe for idempotent models; raise "
        "commit.retry.num-retries"
    ),
    ConflictKind.COMMIT_STATE_UNKNOWN: (
        "the catalog could not confirm whether the commit landed; do not re-run blindly: check "
        "the table's snapshots first (a re-run of an append duplicates rows)"
    ),
    ConflictKind.INVALID_REQUEST: (
        "Iceberg refused the request (guard or bad argument); a re-run fails the same way; fix "
        "the arguments"
    ),
    ConflictKind.NOT_ICEBERG_CONFLICT: (
        "not an Iceberg commit conflict; a re-run does not help; fix the cause"
    ),
}


@dataclass(frozen=True)
class Classification:
    """What a failure text means for a re-run.

    `retryable`: re-running the same idempotent statement is safe (it is re-planned against the
    new table state). `exception_class`: the Java class that carries the verdict, if visible.
    `files`: data/delete file paths named in the message.
    """

    kind: str
    retryable: bool
    exception_class: str | None
    summary: str
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Record:
    """One `<class>: <message>` found in the text; `class_name` is None for bare messages."""

    class_name: str | None
    message: str

    @property
    def simple_name(self) -> str:
        return (self.class_name or "").rsplit(".", 1)[-1].rsplit("$", 1)[-1]


# A Java or Python exception header. Also matches the Spark Connect form `(FQCN) message`.
_HEADER = re.compile(
    r"(?<![\w$.])\(?((?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*(?:Exception|Error))(?:\)[ \t]+|:[ \t]*)"
)
# Where a message ends: a stack frame, a `Caused by:`/`Suppressed:` line, `... N more`.
_MESSAGE_END = re.compile(
    r"\n[ \t]*(?:at [\w$.<>/]+\(|Caused by:|Suppressed:|\.\.\. \d+ more|\.\.\. \d+ elided)"
    r"|\n\d\d:\d\d:\d\d(?:\.\d+)?\s"  # the next line of a dbt log
)
# User Python code can print anything, including Iceberg-looking text: never read it.
_PYTHON_TRACEBACK = re.compile(
    r"(PythonException:\s*)(?:[ \t\n]*(?:An exception was thrown from the Python worker\. "
    r"Please see the stack trace below\.)?\s*)?Traceback \(most recent call last\):.*?"
    r"(?=\n[ \t]*at [\w$.<>/]+\(|\n[ \t]*Caused by:|\Z)",
    re.DOTALL,
)

_ICEBERG_PACKAGE = "org.apache.iceberg."
_PATH = r"[A-Za-z][\w+.-]*:/[^\s,\]\[]*|/[^\s,\]\[]+"
_FILE_EXTENSIONS = (".parquet", ".avro", ".orc", ".puffin")


_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _records(text: str) -> list[_Record]:
    text = _ANSI_ESCAPE.sub("", text)  # dbt colours its console log
    text = _PYTHON_TRACEBACK.sub(r"\1<python traceback>", text)
    headers = list(_HEADER.finditer(text))
    records = []
    for index, header in enumerate(headers):
        start = header.end()
        stop = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        end = _MESSAGE_END.search(text, start, stop)
        message = text[start : end.start() if end else stop]
        records.append(_Record(header.group(1), _strip_message(message)))
    # The whole text also counts as one bare message: PySpark's captured exceptions
    # (IllegalArgumentException, AnalysisException) print the message without a class name.
    records.append(_Record(None, text))
    return records


def _strip_message(message: str) -> str:
    lines = [line.strip() for line in message.strip().splitlines()]
    return "\n".join(line for line in lines if line)


def _split_paths(listing: str) -> tuple[str, ...]:
    """Paths from a `p1, p2` listing; a last item cut by truncation is dropped."""
    items = [item.strip().strip("[]") for item in listing.split(",")]
    paths = []
    for position, item in enumerate(items):
        if not re.fullmatch(_PATH, item):
            continue
        is_last = position == len(items) - 1
        if is_last and not item.endswith(_FILE_EXTENSIONS):
            continue  # may be cut mid-path
        paths.append(item)
    return tuple(paths)


def _first_line(message: str) -> str:
    return message.split("\n", 1)[0]


@dataclass(frozen=True)
class _Template:
    kind: ConflictKind
    pattern: re.Pattern[str]
    # Simple class names that may carry this message; None: any class, including no class
    # (for texts PySpark prints without the class name).
    classes: frozenset[str] | None
    files_group: str | None = None


def _template(
    kind: ConflictKind, pattern: str, classes: set[str] | None, files_group: str | None = None
) -> _Template:
    return _Template(kind, re.compile(pattern), None if classes is None else frozenset(classes), files_group)


_VALIDATION = {"ValidationException"}
_RUNTIME = {"RuntimeException"}

# Iceberg 1.10 message templates (reference, sections 1-3). Order matters only within a kind.
_CONFLICT_TEMPLATES: tuple[_Template, ...] = (
    _template(ConflictKind.MISSING_FILES_TO_DELETE, r"^Missing required files to delete: (?P<files>.*)", _VALIDATION, "files"),
    _template(ConflictKind.MISSING_DATA_FILES, r"^Cannot commit, missing data files: \[?(?P<files>[^\]\n]*)", _VALIDATION, "files"),
    _template(
        ConflictKind.NEW_DELETE_FOR_REPLACED_FILE,
        r"^Cannot commit, found new (?:position )?delete for replaced data file: (?P<files>.*)",
        _VALIDATION,
        "file_path",
    ),
    _template(
        ConflictKind.CONFLICTING_ADDED_FILES,
        r"^Found conflicting files that can contain records matching .*?: \[(?P<files>[^\]\n]*)",
        _VALIDATION,
        "files",
    ),
    _template(ConflictKind.CONFLICTING_ADDED_FILES, r"^Found conflicting files that can contain records matching ", _VALIDATION),
    _template(
        ConflictKind.CONFLICTING_DELETE_FILES,
        r"^Found new conflicting delete files that can apply to records matching .*?: \[(?P<files>[^\]\n]*)",
        _VALIDATION,
        "files",
    ),
    _template(ConflictKind.CONFLICTING_DELETE_FILES, r"^Found new conflicting delete files that can apply to records matching ", _VALIDATION),
    _template(
        ConflictKind.CONFLICTING_DELETED_FILES,
        r"^Found conflicting deleted files that can (?:contain|apply to) records matching .*?: \[(?P<files>[^\]\n]*)",
        _VALIDATION,
        "files",
    ),
    _template(ConflictKind.CONFLICTING_DELETED_FILES, r"^Found conflicting deleted files that can (?:contain|apply to) records matching ", _VALIDATION),
    _template(ConflictKind.CONCURRENT_DV, r"^Found concurrently added DV for (?P<files>\S+): DV\{location=(?P<dv>[^,}\s]+)", _VALIDATION, "dv"),
    _template(ConflictKind.CONCURRENT_DV, r"^Found concurrently added DV for ", _VALIDATION),
    _template(
        ConflictKind.HISTORY_BROKEN,
        r"^Cannot determine history between (?:starting|read) snapshot \S+ and the last",
        _VALIDATION,
    ),
    _template(
        ConflictKind.PARTIAL_ROW_DELETE,
        r"^Cannot delete file where some, but not all, rows match filter .*: (?P<files>\S+)(?=\n|$)",
        _VALIDATION,
        "files",
    ),
    _template(ConflictKind.PARTIAL_ROW_DELETE, r"^Cannot delete file where some, but not all, rows match filter ", _VALIDATION),
    _template(
        ConflictKind.MANIFEST_REWRITE_CONFLICT,
        r"^Deleted manifest \S+ could not be found in the latest",
        _VALIDATION,
    ),
    _template(
        ConflictKind.CONCURRENT_MODIFICATION,
        r"^Runtime file filtering is not possible: the table has been concurrently modified",
        {"IllegalStateException"},
    ),
)

_REWRITE_TEMPLATES: tuple[_Template, ...] = (
    _template(
        ConflictKind.REWRITE_COMMIT_CONFLICT,
        r"^Cannot commit rewrite because of a ValidationException or CommitFailedException",
        _RUNTIME,
    ),
    _template(ConflictKind.REWRITE_COMMIT_CONFLICT, r"^partial-progress\.enabled is true but \d+ rewrite commits failed", _RUNTIME),
    _template(
        ConflictKind.REWRITE_COMMIT_CONFLICT,
        r"^Timeout occurred when waiting for commits to complete\. .*Retry this operation",
        {"IllegalArgumentException"},
    ),
)

# CAS failures of every catalog (Hadoop, Hive, JDBC, Glue, DynamoDB, REST 409, Nessie) are all
# `org.apache.iceberg.exceptions.CommitFailedException`, whatever their wording (reference 2.x),
# and PySpark never strips that class name: the class alone is the verdict.
_COMMIT_FAILED_CLASS = "CommitFailedException"
_STATE_UNKNOWN_CLASS = "CommitStateUnknownException"

_STATE_UNKNOWN_TEMPLATES: tuple[_Template, ...] = (
    _template(ConflictKind.COMMIT_STATE_UNKNOWN, r"Cannot determine whether the commit was successful or not", None),
    _template(ConflictKind.COMMIT_STATE_UNKNOWN, r"^Failed to heartbeat for hive lock while committing changes", None),
    # REST: an I/O failure of a POST (commits are POSTs) is neither cleaned nor known to have
    # failed (RESTException is not a CleanableFailure): treat it as an unknown commit state.
    _template(ConflictKind.COMMIT_STATE_UNKNOWN, r"^Error occurred while processing POST", {"RESTException"}),
)

# Guards and bad arguments: Iceberg-specific wording, so they are recognised with or without
# a class name (PySpark's captured IllegalArgumentException prints only the message).
_INVALID_REQUEST_TEMPLATES: tuple[_Template, ...] = tuple(
    _template(ConflictKind.INVALID_REQUEST, pattern, None)
    for pattern in (
        r"Cannot remove orphan files with an interval less than 24 hours",
        r"Number of snapshots to retain must be at least 1",
        r"Could not build name to arg map: Unknown argument: ",
        r"Missing required parameters: \[",
        r"Duplicate procedure argument: ",
        r"Named and positional arguments cannot be mixed",
        r"Too many arguments for procedure",
        r"Wrong arg type for \S+: cannot cast ",
        r"Cannot parse predicates in where option: ",
        r"Invalid isolation level: ",
        r"Cannot use options \[.*\], they are not supported by the action or the rewriter",
        r"Cannot set \S+ to \S+, the value must be positive",
        r"Cannot set rewrite mode, it has already been set to ",
        r"'\S+' is set to \S+ but must be > 0",
        r"unsupported strategy: .*Only binpack or sort is supported",
        r"Cannot mix identity sort columns and a Zorder sort expression",
        r"max_concurrent_deletes should have value > 0, value: ",
        r"Invalid mode: ",
        r"Cannot (?:expire snapshots|delete orphan files): GC is disabled",
        r"Cannot expire \S+\. Still referenced by refs: ",
        r"Unable to determine whether certain files are orphan\.",
        r"Couldn't load table '.*' in catalog '",
        r"Cannot run procedure in catalog '",
        r"Cannot commit: Reference '.*' no longer exists",  # Nessie: ref deleted
    )
)

def _class_allows(template: _Template, record: _Record) -> bool:
    if template.classes is None:
        return True
    if record.class_name is None:
        return False
    if record.simple_name not in template.classes:
        return False
    # Iceberg's own exceptions must come from Iceberg, not from a look-alike class.
    is_iceberg_class = record.simple_name in {"ValidationException", "CommitFailedException"}
    return not is_iceberg_class or "." not in record.class_name or record.class_name.startswith(_ICEBERG_PACKAGE)


def _files(template: _Template, match: re.Match[str], message: str) -> tuple[str, ...]:
    if template.files_group is None:
        return ()
    if template.files_group == "file_path":
        return tuple(dict.fromkeys(re.findall(r"file_path=([^,}\s]+)", message)))
    if template.files_group == "dv":
        return (match.group("dv"), match.group("files"))
    return _split_paths(_first_line(match.group(template.files_group)))


def _match(templates: tuple[_Template, ...], records: list[_Record]) -> Classification | None:
    for record in records:
        for template in templates:
            if not _class_allows(template, record):
                continue
            # Bare records (the whole text) are searched anywhere; class records start the message.
            match = (
                template.pattern.search(record.message)
                if record.class_name is None
                else template.pattern.search(record.message.lstrip())
            )
            if match is None:
                continue
            return _classification(template.kind, record.class_name, _files(template, match, record.message))
    return None


def _classification(kind: ConflictKind, exception_class: str | None, files: tuple[str, ...] = ()) -> Classification:
    return Classification(
        kind=kind.value,
        retryable=kind in RETRYABLE_KINDS,
        exception_class=exception_class,
        summary=SUMMARIES[kind],
        files=files,
    )


def _records_of_class(records: list[_Record], simple_name: str) -> list[_Record]:
    return [
        record
        for record in records
        if record.simple_name == simple_name
        and (record.class_name is not None)
        and ("." not in record.class_name or record.class_name.startswith(_ICEBERG_PACKAGE))
    ]


def classify(text: str) -> Classification:
    """Classify one failure text; conservative: when in doubt, not retryable.

    The most cautious verdict wins: an unknown commit state beats a bad request, which beats a
    data conflict, which beats a catalog CAS failure, which beats a bare rewrite wrapper (whose
    `Caused by:` is not visible). A rewrite wrapper therefore takes the kind of its cause.
    """
    if not isinstance(text, str):
        raise TypeError(f"classify() expects the failure text as str, got {type(text).__name__}")
    records = _records(text)
    class_records = [record for record in records if record.class_name is not None]

    unknown = _records_of_class(class_records, _STATE_UNKNOWN_CLASS)
    if unknown:
        return _classification(ConflictKind.COMMIT_STATE_UNKNOWN, unknown[0].class_name)
    found = _match(_STATE_UNKNOWN_TEMPLATES, records) or _match(_INVALID_REQUEST_TEMPLATES, records)
    found = found or _match(_CONFLICT_TEMPLATES, class_records)
    if found is not None:
        return found
    failed = _records_of_class(class_records, _COMMIT_FAILED_CLASS)
    if failed:
        return _classification(ConflictKind.COMMIT_FAILED, failed[0].class_name)
    found = _match(_REWRITE_TEMPLATES, class_records)
    if found is not None:
        return found
    iceberg_class = next(
        (r.class_name for r in class_records if (r.class_name or "").startswith(_ICEBERG_PACKAGE)), None
    )
    return _classification(ConflictKind.NOT_ICEBERG_CONFLICT, iceberg_class or _root_class(class_records))


def _root_class(class_records: list[_Record]) -> str | None:
    """The most informative class of a chain: the last one that is not a generic wrapper."""
    wrappers = {"Py4JJavaError", "HiveSQLException", "DbtRuntimeError", "DbtDatabaseError"}
    meaningful = [r.class_name for r in class_records if r.simple_name not in wrappers]
    return meaningful[-1] if meaningful else None
