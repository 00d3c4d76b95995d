"""The verdict's vocabulary: conflict kinds, which are retryable, their one-line summaries.

`docs/conflict-kinds.md` is generated from `SUMMARIES` (`scripts/gen_conflict_kinds`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class ConflictKind(str, Enum):
    """The kinds of the public contract (docs/conflict-kinds.md)."""

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
        "a rewrite (compaction) did not commit: a concurrent commit won; re-running the compaction is "
        "safe; narrow the `where` filter to cold partitions (partial progress's failed-commit count: "
        "`undecided`, not re-run without evidence)"
    ),
    ConflictKind.CONCURRENT_MODIFICATION: (
        "the table changed between planning this copy-on-write statement and its runtime filter: a "
        "commit from the same Spark session, or from any application when the catalog does not cache "
        "tables (a Thrift Server's `cache-enabled=false`); nothing was committed; re-run is safe for "
        "idempotent models"
    ),
    ConflictKind.COMMIT_FAILED: (
        "the catalog rejected the commit after Iceberg's own retries (concurrent commits); "
        "nothing was committed; re-run is safe for idempotent models; raise "
        "commit.retry.num-retries"
    ),
    ConflictKind.COMMIT_STATE_UNKNOWN: (
        "the catalog could not confirm whether the commit landed; never re-run blindly (a re-run of "
        "a landed append duplicates rows): `dbt-iceberg-maint run` checks the table's snapshots, "
        "reports `write_landed` and re-runs only a write proven not to have landed"
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
    `files`: data/delete file paths named in the message. `undecided` (additive, version 2): why
    the text alone cannot tell whether a re-run can succeed (None: it can). `retryable` still
    says a re-run is safe; nothing re-runs an undecided failure without more evidence.
    """

    kind: str
    retryable: bool
    exception_class: str | None
    summary: str
    files: tuple[str, ...] = ()
    undecided: str | None = None


# The Iceberg 1.10 text (and exception) each kind is recognised by, for people: what the templates
# in `templates.py` match. docs/conflict-kinds.md is generated from this table and SUMMARIES.
MESSAGES: dict[ConflictKind, str] = {
    ConflictKind.MISSING_FILES_TO_DELETE: "`Missing required files to delete: ...` (ValidationException)",
    ConflictKind.MISSING_DATA_FILES: "`Cannot commit, missing data files: [...]` (ValidationException)",
    ConflictKind.NEW_DELETE_FOR_REPLACED_FILE: (
        "`Cannot commit, found new (position) delete for replaced data file: ...` (ValidationException)"
    ),
    ConflictKind.CONFLICTING_ADDED_FILES: (
        "`Found conflicting files that can contain records matching ...` (ValidationException)"
    ),
    ConflictKind.CONFLICTING_DELETE_FILES: (
        "`Found new conflicting delete files that can apply to records matching ...` (ValidationException)"
    ),
    ConflictKind.CONFLICTING_DELETED_FILES: (
        "`Found conflicting deleted files that can contain/apply to records matching ...` (ValidationException)"
    ),
    ConflictKind.CONCURRENT_DV: "`Found concurrently added DV for ...` (ValidationException)",
    ConflictKind.HISTORY_BROKEN: "`Cannot determine history between starting snapshot ...` (ValidationException)",
    ConflictKind.PARTIAL_ROW_DELETE: (
        "`Cannot delete file where some, but not all, rows match filter ...` (ValidationException)"
    ),
    ConflictKind.MANIFEST_REWRITE_CONFLICT: (
        "`Deleted manifest ... could not be found in the latest snapshot` (ValidationException)"
    ),
    ConflictKind.REWRITE_COMMIT_CONFLICT: (
        "`Cannot commit rewrite because of a ValidationException or CommitFailedException` with no visible "
        "cause; `partial-progress.enabled is true but N rewrite commits failed`; the commit service's "
        "`Timeout occurred when waiting for commits to complete` (RuntimeException, IllegalArgumentException)"
    ),
    ConflictKind.CONCURRENT_MODIFICATION: (
        "`Runtime file filtering is not possible: the table has been concurrently modified` "
        "(IllegalStateException)"
    ),
    ConflictKind.COMMIT_FAILED: (
        "any `CommitFailedException`: Hadoop, Hive, JDBC, Glue, DynamoDB, REST 409 `Commit failed: ...`, Nessie"
    ),
    ConflictKind.COMMIT_STATE_UNKNOWN: (
        "`CommitStateUnknownException` (REST 5xx included); `Cannot determine whether the commit was "
        "successful or not`; a Hive lock heartbeat failure; a REST I/O failure of a commit (POST); a JDBC "
        "catalog's `UncheckedSQLException` (`Unknown failure`, `Database Connection failed`)"
    ),
    ConflictKind.INVALID_REQUEST: (
        "guards and bad arguments: the 24 h orphan guard, `retain_last` < 1, an unknown procedure argument, "
        "an unparsable `where`, an invalid isolation level, GC disabled, a deleted Nessie reference, ..."
    ),
    ConflictKind.NOT_ICEBERG_CONFLICT: (
        "anything else (SQL errors, missing tables, Python UDF errors, Iceberg words quoted in SQL or data); "
        "a driver log's `Failure during rewrite group` (a compaction's file group failed to rewrite: "
        "deterministic, whatever else failed)"
    ),
}
