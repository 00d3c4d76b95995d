"""Classify Iceberg commit failures from the text a user meets (pure, no I/O).

Input is any failure text: a raw `Py4JJavaError` string, a dbt `run_results.json` message
("Runtime Error in model ..."), a Spark Thrift Server error (`HiveSQLException: Error running
query: ...`), a dbt log excerpt, a Spark driver log, with or without Java stack frames,
`Caused by:` chains or a truncated tail. The text is split into exception records (`<class>:
<message>`), each record is matched against Iceberg 1.10's own message templates, and the most
cautious verdict wins: an unknown commit state beats a bad request, which beats a data conflict,
which beats a catalog CAS failure. Anything not recognised is `not_iceberg_conflict` and is never
retryable.

Only text where an exception really starts is read as a record (see `_records`): Spark echoes
SQL, plans and data inside its messages, dbt and Spark log SQL, and users raise their own
exceptions, so Iceberg-looking text anywhere else never makes a failure retryable.

`retryable` answers one question: would re-running the *same idempotent statement* be safe?
Whether the statement is idempotent is decided elsewhere (`dbt_iceberg_maint.idempotency`).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
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
        "a rewrite (compaction) did not commit: a concurrent commit won, or under partial progress a "
        "file group failed to rewrite (the Spark driver log says which); re-running the compaction is "
        "safe; narrow the `where` filter to cold partitions"
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
    """One exception found in the text.

    `class_name` is None for a message printed without its class: PySpark's captured
    exceptions (IllegalArgumentException, AnalysisException) print only the Java message, and
    dbt prints the message of the error it wraps. `cause_visible`: a `Caused by:` of this
    record (or a cause chained on its line) is in the text.
    """

    class_name: str | None
    message: str
    cause_visible: bool = False

    @property
    def simple_name(self) -> str:
        return (self.class_name or "").rsplit(".", 1)[-1].rsplit("$", 1)[-1]

    @property
    def java_class(self) -> str | None:
        """The Java class behind the record: PySpark re-raises some as its own classes."""
        return _PYSPARK_CAPTURED.get(self.class_name or "", self.class_name)


_CLASS = r"(?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*(?:Exception|Error)"
# An exception header where a record starts: `<class>: `, or Spark Connect's `(<class>) `;
# the Thrift server prefixes `Error running query: ` to the exception's `toString()`.
_HEADER = re.compile(
    rf"(?:Error running query: )?(?:\((?P<paren>{_CLASS})\)[ \t]+|(?P<plain>{_CLASS}):[ \t]*)"
)
# A line that ends the message before it: a Java or Python stack frame.
_FRAME = re.compile(
    r"[ \t]*(?:at [\w$.<>/]+\(|\.\.\. \d+ (?:more|elided)|Traceback \(most recent call last\):"
    r"|File \"[^\"\n]*\", line \d+)"
)
_CAUSE = re.compile(r"[ \t]*(?P<via>Caused by|Suppressed): ")
# A line after which a Java stack trace starts: py4j's `Py4JJavaError` ("...calling o87.sql.\n:
# <trace>") and PySpark's captured exceptions with spark.sql.pyspark.jvmStacktrace.enabled.
_TRACE_ANNOUNCEMENT = re.compile(
    r"(?:(?:py4j\.protocol\.)?Py4JJavaError: )?An error occurred while calling \S+\.|JVM stacktrace:"
)
_TRACE_START = re.compile(r"[ \t]*(?:: )?")
# dbt's `<Type> Error[ in <node>]` title: the lines below it are the message of the error it wraps.
_DBT_TITLE = re.compile(r"(?:^|: )[A-Z][a-z]+ Error(?: in \w+ .*)?$")
_DBT_LOG_LINE = re.compile(r"\d\d:\d\d:\d\d(?:\.\d+)?[ \t]+(?:\[[^\]\n]*\][ \t]+\[[^\]\n]*\]:[ \t]?)?")
_LOG4J_LINE = re.compile(
    r"\d{2,4}[-/]\d\d[-/]\d\d[ T]\d\d:\d\d:\d\d\S*[ \t]+(?:\[[^\]\n]*\][ \t]+)?"
    r"(?P<level>TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\b"
)
# Iceberg logs every CommitFailedException it retries (WARN Tasks: Retrying task after failure):
# below ERROR a logged exception is not the failure.
_QUIET_LEVELS = frozenset({"TRACE", "DEBUG", "INFO", "WARN", "WARNING"})
# User Python code can print anything, including Iceberg-looking text: never read it.
# A Python worker's traceback: in the JVM's text after `PythonException:`, and in PySpark's own
# text (a captured PythonException prints the worker's sentence, no class). A driver-side
# traceback (Py4JJavaError with the Java exception after it) has neither and stays readable.
_PYTHON_WORKER = r"An exception was thrown from the Python worker\. Please see the stack trace below\."
_PYTHON_TRACEBACK = re.compile(
    rf"((?:PythonException:\s*)(?:{_PYTHON_WORKER}\s*)?|{_PYTHON_WORKER}\s*)Traceback \(most recent call last\):.*?"
    r"(?=\n[ \t]*at [\w$.<>/]+\(|\n[ \t]*Caused by:|\Z)",
    re.DOTALL,
)
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# PySpark raises these Java exceptions as its own classes (printing the Java message only).
_PYSPARK_CAPTURED: dict[str, str] = {
    f"{module}.IllegalArgumentException": "java.lang.IllegalArgumentException"
    for module in (
        "pyspark.errors.exceptions.captured",  # classic (py4j)
        "pyspark.errors.exceptions.connect",  # Spark Connect
        "pyspark.sql.utils",  # PySpark <= 3.3
    )
}

_ICEBERG_PACKAGE = "org.apache.iceberg."
_ICEBERG_EXCEPTIONS = f"{_ICEBERG_PACKAGE}exceptions."
_PATH = r"[A-Za-z][\w+.-]*:/[^\s,\]\[]*|/[^\s,\]\[]+"
_FILE_EXTENSIONS = (".parquet", ".avro", ".orc", ".puffin")


@dataclass
class _Draft:
    """A record while `_records` collects its message lines."""

    chain: int  # records of one chain: an exception, its causes and what wraps it
    class_name: str | None
    is_cause: bool = False
    lines: list[str] = field(default_factory=list)


def _records(text: str) -> list[_Record]:
    """The exception records of `text`, in order.

    A record starts only where an exception really starts: at the start of a line that is not
    inside another record's message; after `Caused by: ` or `Suppressed: `; on the line that
    py4j (`An error occurred while calling o87.sql.` + `: `) or PySpark (`JVM stacktrace:`)
    announces a Java trace; chained at the start of a record's message (Java prints an
    exception made from a cause as `Outer: Inner: message`, Thrift as `HiveSQLException: Error
    running query: Inner: message`, Spark Connect as `(Inner) message`); or on the first line of
    a dbt error's message. A message runs until a stack frame, a log line or the next record:
    whatever else it contains (Spark's SQL echo and plans, data values, a user's text) is
    message, never a record. A message at the start of the text or of a dbt log line with no
    class before it is a record of its own (PySpark prints captured exceptions that way).
    An exception on the line after a log4j line is the one it logs (log4j prints `%m%n%ex`): it
    and its causes are dropped when the level is below ERROR.
    """
    text = _ANSI_ESCAPE.sub("", text)  # dbt colours its console log
    text = _PYTHON_TRACEBACK.sub(r"\1<python traceback>", text)
    drafts: list[_Draft] = []
    quiet_chains: set[int] = set()
    chains = itertools.count()
    chain = next(chains)
    current: _Draft | None = None  # the record whose message the next line continues
    opening = False  # the next non-blank line may be the error the dbt error `current` wraps
    fresh = True  # at the start of the text or of a dbt log message
    logged = False  # the previous line is a log4j line: an exception here is the one it logs
    previous = ""  # the previous line, for py4j's and PySpark's trace announcements

    def start(line: str, in_chain: int, is_cause: bool) -> _Draft:
        """Records for the header(s) that start `line`; the innermost one gets the message."""
        while header := _HEADER.match(line):
            drafts.append(_Draft(in_chain, header["paren"] or header["plain"], is_cause))
            line, is_cause = line[header.end() :], True
        drafts[-1].lines.append(line)
        return drafts[-1]

    def message(in_chain: int, is_cause: bool, lines: list[str]) -> _Draft:
        drafts.append(_Draft(in_chain, None, is_cause, lines=lines))
        return drafts[-1]

    for raw in text.splitlines():
        if log := _LOG4J_LINE.match(raw):
            chain = next(chains)
            if log["level"] in _QUIET_LEVELS:
                quiet_chains.add(chain)
            current, opening, fresh, logged, previous = None, False, False, True, ""
            continue
        line = raw
        if dbt := _DBT_LOG_LINE.match(raw):
            current, opening, fresh, line = None, False, True, raw[dbt.end() :]
        content = line.strip()
        cause = _CAUSE.match(line)
        trace = _TRACE_START.match(line) if _TRACE_ANNOUNCEMENT.fullmatch(previous) else None
        header = _HEADER.match(content)
        title = header is None and _DBT_TITLE.search(content) is not None
        if _FRAME.match(line):  # the message ends; a `Caused by:` may follow
            current, opening = None, False
        elif cause:  # Java's own structure, even inside a message
            has_header = _HEADER.match(line, cause.end()) is not None
            current = start(line[cause.end() :], chain, cause["via"] == "Caused by") if has_header else None
            opening = False
        elif trace and _HEADER.match(line, trace.end()):
            current, opening = start(line[trace.end() :], chain, True), False
        elif current is not None and not (opening and content):  # the message goes on
            current.lines.append(line)
        elif current is not None:  # the first line of the error a dbt error wraps
            opening = title  # dbt errors nest: `Runtime Error in model x` / `Runtime Error` / ...
            if header:
                current = start(content, current.chain, True)
            elif title:
                current = message(current.chain, True, [])
            else:
                current.lines.append(line)
        elif header:  # outside any message: a new exception (or the one a log line logs)
            chain = chain if logged else next(chains)
            current = start(content, chain, False)
        elif title or (fresh and content):  # outside any message: a dbt error or a bare message
            chain = next(chains)
            current, opening = message(chain, False, [] if title else [line]), title
        fresh, logged, previous = fresh and not content, False, content
    return _freeze(drafts, quiet_chains)


def _freeze(drafts: list[_Draft], quiet_chains: set[int]) -> list[_Record]:
    """The records of `drafts`, without the chains logged below ERROR."""
    records: list[_Record] = []
    chains_with_cause: set[int] = set()  # chains with a cause after the draft at hand
    for draft in reversed(drafts):
        if draft.chain not in quiet_chains:
            message = _strip_message("\n".join(draft.lines))
            records.append(_Record(draft.class_name, message, draft.chain in chains_with_cause))
        if draft.is_cause:
            chains_with_cause.add(draft.chain)
    return records[::-1]


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
    # Java classes (fully qualified) that carry this message; None: any class, or none.
    classes: frozenset[str] | None
    files_group: str | None = None
    # Also read from a message printed without its class (PySpark's captured exceptions).
    bare: bool = False


def _template(
    kind: ConflictKind,
    pattern: str,
    classes: set[str] | None,
    files_group: str | None = None,
    *,
    bare: bool = False,
) -> _Template:
    allowed = None if classes is None else frozenset(classes)
    return _Template(kind, re.compile(pattern), allowed, files_group, bare)


# Java prints fully qualified class names; an unqualified `ValidationException` is a Python
# class (a builtin or the user's own), never Iceberg's.
_VALIDATION = {f"{_ICEBERG_EXCEPTIONS}ValidationException"}
_RUNTIME = {"java.lang.RuntimeException"}

# Iceberg 1.10 message templates (reference, sections 1-3). Order matters only within a kind.
_CONFLICT_TEMPLATES: tuple[_Template, ...] = (
    _template(
        ConflictKind.MISSING_FILES_TO_DELETE, r"^Missing required files to delete: (?P<files>.*)", _VALIDATION, "files"
    ),
    _template(
        ConflictKind.MISSING_DATA_FILES,
        r"^Cannot commit, missing data files: \[?(?P<files>[^\]\n]*)",
        _VALIDATION,
        "files",
    ),
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
    _template(
        ConflictKind.CONFLICTING_ADDED_FILES,
        r"^Found conflicting files that can contain records matching ",
        _VALIDATION,
    ),
    _template(
        ConflictKind.CONFLICTING_DELETE_FILES,
        r"^Found new conflicting delete files that can apply to records matching .*?: \[(?P<files>[^\]\n]*)",
        _VALIDATION,
        "files",
    ),
    _template(
        ConflictKind.CONFLICTING_DELETE_FILES,
        r"^Found new conflicting delete files that can apply to records matching ",
        _VALIDATION,
    ),
    _template(
        ConflictKind.CONFLICTING_DELETED_FILES,
        r"^Found conflicting deleted files that can (?:contain|apply to) records matching .*?: \[(?P<files>[^\]\n]*)",
        _VALIDATION,
        "files",
    ),
    _template(
        ConflictKind.CONFLICTING_DELETED_FILES,
        r"^Found conflicting deleted files that can (?:contain|apply to) records matching ",
        _VALIDATION,
    ),
    _template(
        ConflictKind.CONCURRENT_DV,
        r"^Found concurrently added DV for (?P<files>\S+): DV\{location=(?P<dv>[^,}\s]+)",
        _VALIDATION,
        "dv",
    ),
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
    _template(
        ConflictKind.PARTIAL_ROW_DELETE, r"^Cannot delete file where some, but not all, rows match filter ", _VALIDATION
    ),
    _template(
        ConflictKind.MANIFEST_REWRITE_CONFLICT,
        r"^Deleted manifest \S+ could not be found in the latest",
        _VALIDATION,
    ),
    _template(
        ConflictKind.CONCURRENT_MODIFICATION,
        r"^Runtime file filtering is not possible: the table has been concurrently modified",
        {"java.lang.IllegalStateException"},
    ),
)

_REWRITE_TEMPLATES: tuple[_Template, ...] = (
    _template(
        ConflictKind.REWRITE_COMMIT_CONFLICT,
        r"^Cannot commit rewrite because of a ValidationException or CommitFailedException",
        _RUNTIME,
    ),
    _template(
        ConflictKind.REWRITE_COMMIT_CONFLICT,
        r"^partial-progress\.enabled is true but \d+ rewrite commits failed",
        _RUNTIME,
    ),
    _template(
        ConflictKind.REWRITE_COMMIT_CONFLICT,
        r"^Timeout occurred when waiting for commits to complete\. .*Retry this operation",
        {"java.lang.IllegalArgumentException"},
        bare=True,  # PySpark's captured IllegalArgumentException prints only the message
    ),
)

# CAS failures of every catalog (Hadoop, Hive, JDBC, Glue, DynamoDB, REST 409, Nessie) are all
# `org.apache.iceberg.exceptions.CommitFailedException`, whatever their wording (reference 2.x),
# and PySpark never strips that class name: the class alone is the verdict.
_COMMIT_FAILED_CLASS = f"{_ICEBERG_EXCEPTIONS}CommitFailedException"
_STATE_UNKNOWN_CLASS = f"{_ICEBERG_EXCEPTIONS}CommitStateUnknownException"

_STATE_UNKNOWN_TEMPLATES: tuple[_Template, ...] = (
    _template(ConflictKind.COMMIT_STATE_UNKNOWN, r"Cannot determine whether the commit was successful or not", None),
    _template(ConflictKind.COMMIT_STATE_UNKNOWN, r"^Failed to heartbeat for hive lock while committing changes", None),
    # REST: an I/O failure of a POST (commits are POSTs) is neither cleaned nor known to have
    # failed (RESTException is not a CleanableFailure): treat it as an unknown commit state.
    _template(
        ConflictKind.COMMIT_STATE_UNKNOWN,
        r"^Error occurred while processing POST",
        {f"{_ICEBERG_EXCEPTIONS}RESTException"},
    ),
)

# Guards and bad arguments: Iceberg-specific wording, so they are recognised with or without
# a class name (PySpark's captured IllegalArgumentException prints only the message), anywhere
# in a message: a false match only makes a failure less retryable.
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
        return template.bare
    return record.java_class in template.classes


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
            match = template.pattern.search(record.message)
            if match is None:
                continue
            return _classification(template.kind, record.java_class, _files(template, match, record.message))
    return None


def _classification(kind: ConflictKind, exception_class: str | None, files: tuple[str, ...] = ()) -> Classification:
    return Classification(
        kind=kind.value,
        retryable=kind in RETRYABLE_KINDS,
        exception_class=exception_class,
        summary=SUMMARIES[kind],
        files=files,
    )


def _records_of_class(records: list[_Record], class_name: str) -> list[_Record]:
    return [record for record in records if record.class_name == class_name]


def classify(text: str) -> Classification:
    """Classify one failure text; conservative: when in doubt, not retryable.

    The most cautious verdict wins: an unknown commit state beats a bad request, which beats a
    data conflict, which beats a catalog CAS failure, which beats a rewrite wrapper. A rewrite
    wrapper takes the kind of its `Caused by:`: it is judged by its own words only when no cause
    is visible (`rewrite_commit_conflict`); with a visible cause that is no known conflict, it is
    what that cause is alone.
    """
    if not isinstance(text, str):
        raise TypeError(f"classify() expects the failure text as str, got {type(text).__name__}")
    records = _records(text)

    unknown = _records_of_class(records, _STATE_UNKNOWN_CLASS)
    if unknown:
        return _classification(ConflictKind.COMMIT_STATE_UNKNOWN, unknown[0].class_name)
    found = _match(_STATE_UNKNOWN_TEMPLATES, records) or _match(_INVALID_REQUEST_TEMPLATES, records)
    found = found or _match(_CONFLICT_TEMPLATES, records)
    if found is not None:
        return found
    failed = _records_of_class(records, _COMMIT_FAILED_CLASS)
    if failed:
        return _classification(ConflictKind.COMMIT_FAILED, failed[0].class_name)
    found = _match(_REWRITE_TEMPLATES, [record for record in records if not record.cause_visible])
    if found is not None:
        return found
    class_records = [record for record in records if record.class_name is not None]
    iceberg_class = next(
        (r.class_name for r in class_records if (r.class_name or "").startswith(_ICEBERG_PACKAGE)), None
    )
    return _classification(ConflictKind.NOT_ICEBERG_CONFLICT, iceberg_class or _root_class(class_records))


def _root_class(class_records: list[_Record]) -> str | None:
    """The most informative class of a chain: the last one that is not a generic wrapper."""
    wrappers = {"Py4JJavaError", "HiveSQLException", "DbtRuntimeError", "DbtDatabaseError"}
    meaningful = [r.class_name for r in class_records if r.simple_name not in wrappers]
    return meaningful[-1] if meaningful else None
