"""Iceberg 1.10's own message templates, one table per verdict class (pure data + matching)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dbt_iceberg_maint.conflicts.kinds import ConflictKind
from dbt_iceberg_maint.conflicts.records import Record

ICEBERG_PACKAGE = "org.apache.iceberg."
_ICEBERG_EXCEPTIONS = f"{ICEBERG_PACKAGE}exceptions."
_PATH = r"[A-Za-z][\w+.-]*:/[^\s,\]\[]*|/[^\s,\]\[]+"
_FILE_EXTENSIONS = (".parquet", ".avro", ".orc", ".puffin")


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
class Template:
    kind: ConflictKind
    pattern: re.Pattern[str]
    # Java classes (fully qualified) that carry this message; None: any class, or none.
    classes: frozenset[str] | None
    files_group: str | None = None
    # Also read from a message printed without its class (PySpark's captured exceptions).
    bare: bool = False
    # Why a match cannot tell whether a re-run can succeed (Classification.undecided).
    undecided: str | None = None


def _template(
    kind: ConflictKind,
    pattern: str,
    classes: set[str] | None,
    files_group: str | None = None,
    *,
    bare: bool = False,
    undecided: str | None = None,
) -> Template:
    allowed = None if classes is None else frozenset(classes)
    return Template(kind, re.compile(pattern), allowed, files_group, bare, undecided)


# Java prints fully qualified class names; an unqualified `ValidationException` is a Python
# class (a builtin or the user's own), never Iceberg's.
_VALIDATION = {f"{_ICEBERG_EXCEPTIONS}ValidationException"}
_RUNTIME = {"java.lang.RuntimeException"}

# Iceberg 1.10's ValidationException and IllegalStateException templates. Order matters only within a kind.
CONFLICT_TEMPLATES: tuple[Template, ...] = (
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

# Iceberg counts a file group that failed to rewrite (deterministic: a codec, a schema, a bug) as a
# failed commit, like one that lost to a concurrent commit (transient): the count alone cannot say.
PARTIAL_PROGRESS_UNDECIDED = (
    "under partial progress Iceberg counts file groups that failed to rewrite (a re-run fails the same way) "
    "and commits that lost to a concurrent commit (a re-run can succeed) alike; the Spark driver log says which "
    "('Failure during rewrite group' or 'Failure during rewrite commit process'), and `dbt-iceberg-maint maintain` "
    "re-runs the compaction once with failed commits tolerated to find out (failed_data_files_count)"
)

REWRITE_TEMPLATES: tuple[Template, ...] = (
    _template(
        ConflictKind.REWRITE_COMMIT_CONFLICT,
        r"^Cannot commit rewrite because of a ValidationException or CommitFailedException",
        _RUNTIME,
    ),
    _template(
        ConflictKind.REWRITE_COMMIT_CONFLICT,
        r"^partial-progress\.enabled is true but \d+ rewrite commits failed",
        _RUNTIME,
        undecided=PARTIAL_PROGRESS_UNDECIDED,
    ),
    _template(
        ConflictKind.REWRITE_COMMIT_CONFLICT,
        r"^Timeout occurred when waiting for commits to complete\. .*Retry this operation",
        {"java.lang.IllegalArgumentException"},
        bare=True,  # PySpark's captured IllegalArgumentException prints only the message
    ),
)

# CAS failures of every catalog (Hadoop, Hive, JDBC, Glue, DynamoDB, REST 409, Nessie) are all
# `org.apache.iceberg.exceptions.CommitFailedException`, whatever their wording,
# and PySpark never strips that class name: the class alone is the verdict.
COMMIT_FAILED_CLASS = f"{_ICEBERG_EXCEPTIONS}CommitFailedException"
STATE_UNKNOWN_CLASS = f"{_ICEBERG_EXCEPTIONS}CommitStateUnknownException"

STATE_UNKNOWN_TEMPLATES: tuple[Template, ...] = (
    _template(ConflictKind.COMMIT_STATE_UNKNOWN, r"Cannot determine whether the commit was successful or not", None),
    _template(ConflictKind.COMMIT_STATE_UNKNOWN, r"^Failed to heartbeat for hive lock while committing changes", None),
    # REST: an I/O failure of a POST (commits are POSTs) is neither cleaned nor known to have
    # failed (RESTException is not a CleanableFailure): treat it as an unknown commit state.
    _template(
        ConflictKind.COMMIT_STATE_UNKNOWN,
        r"^Error occurred while processing POST",
        {f"{_ICEBERG_EXCEPTIONS}RESTException"},
    ),
    # JDBC: a connection lost while the commit's UPDATE ran surfaces as UncheckedSQLException, not
    # as CommitStateUnknownException, although the UPDATE may have committed (the torture suite
    # cut the connection right after PostgreSQL committed: the write had landed).
    _template(
        ConflictKind.COMMIT_STATE_UNKNOWN,
        r"^(Unknown failure|Database Connection failed|Database Connection timeout)$",
        {"org.apache.iceberg.jdbc.UncheckedSQLException"},
    ),
)

# Guards and bad arguments: Iceberg-specific wording, so they are recognised with or without
# a class name (PySpark's captured IllegalArgumentException prints only the message), anywhere
# in a message: a false match only makes a failure less retryable.
INVALID_REQUEST_TEMPLATES: tuple[Template, ...] = tuple(
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


def class_allows(template: Template, record: Record) -> bool:
    if template.classes is None:
        return True
    if record.class_name is None:
        return template.bare
    return record.java_class in template.classes


def files_of(template: Template, match: re.Match[str], message: str) -> tuple[str, ...]:
    if template.files_group is None:
        return ()
    if template.files_group == "file_path":
        return tuple(dict.fromkeys(re.findall(r"file_path=([^,}\s]+)", message)))
    if template.files_group == "dv":
        return (match.group("dv"), match.group("files"))
    return _split_paths(_first_line(match.group(template.files_group)))
