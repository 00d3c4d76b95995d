"""The verdict: records matched against the templates, the most cautious verdict wins."""

from __future__ import annotations

from dbt_iceberg_maint.conflicts.kinds import RETRYABLE_KINDS, SUMMARIES, Classification, ConflictKind
from dbt_iceberg_maint.conflicts.records import Record, logged_rewrite_group_failure, records_of
from dbt_iceberg_maint.conflicts.templates import (
    COMMIT_FAILED_CLASS,
    CONFLICT_TEMPLATES,
    ICEBERG_PACKAGE,
    INVALID_REQUEST_TEMPLATES,
    REWRITE_TEMPLATES,
    STATE_UNKNOWN_CLASS,
    STATE_UNKNOWN_TEMPLATES,
    Template,
    class_allows,
    files_of,
)


def _match(templates: tuple[Template, ...], records: list[Record]) -> Classification | None:
    for record in records:
        for template in templates:
            if not class_allows(template, record):
                continue
            match = template.pattern.search(record.message)
            if match is None:
                continue
            files = files_of(template, match, record.message)
            return _classification(template.kind, record.java_class, files, template.undecided)
    return None


def _classification(
    kind: ConflictKind, exception_class: str | None, files: tuple[str, ...] = (), undecided: str | None = None
) -> Classification:
    return Classification(
        kind=kind.value,
        retryable=kind in RETRYABLE_KINDS,
        exception_class=exception_class,
        summary=SUMMARIES[kind],
        files=files,
        undecided=undecided,
    )


def _records_of_class(records: list[Record], class_name: str) -> list[Record]:
    return [record for record in records if record.class_name == class_name]


def classify(text: str) -> Classification:
    """Classify one failure text; conservative: when in doubt, not retryable.

    The most cautious verdict wins: an unknown commit state beats a bad request, which beats a
    compaction file group that a driver log says failed to rewrite (deterministic), which beats a
    data conflict, which beats a catalog CAS failure, which beats a rewrite wrapper. A rewrite
    wrapper takes the kind of its `Caused by:`: it is judged by its own words only when no cause
    is visible (`rewrite_commit_conflict`); with a visible cause that is no known conflict, it is
    what that cause is alone.
    """
    if not isinstance(text, str):
        raise TypeError(f"classify() expects the failure text as str, got {type(text).__name__}")
    records = records_of(text)

    unknown = _records_of_class(records, STATE_UNKNOWN_CLASS)
    if unknown:
        return _classification(ConflictKind.COMMIT_STATE_UNKNOWN, unknown[0].class_name)
    found = _match(STATE_UNKNOWN_TEMPLATES, records) or _match(INVALID_REQUEST_TEMPLATES, records)
    if found is not None:
        return found
    rewrite_failure = logged_rewrite_group_failure(text)
    if rewrite_failure is not None:  # deterministic: a re-run fails the same way, whatever else lost
        return _classification(ConflictKind.NOT_ICEBERG_CONFLICT, _root_class(
            [record for record in rewrite_failure if record.class_name is not None]))
    found = _match(CONFLICT_TEMPLATES, records)
    if found is not None:
        return found
    failed = _records_of_class(records, COMMIT_FAILED_CLASS)
    if failed:
        return _classification(ConflictKind.COMMIT_FAILED, failed[0].class_name)
    found = _match(REWRITE_TEMPLATES, [record for record in records if not record.cause_visible])
    if found is not None:
        return found
    class_records = [record for record in records if record.class_name is not None]
    iceberg_class = next(
        (r.class_name for r in class_records if (r.class_name or "").startswith(ICEBERG_PACKAGE)), None
    )
    return _classification(ConflictKind.NOT_ICEBERG_CONFLICT, iceberg_class or _root_class(class_records))


def _root_class(class_records: list[Record]) -> str | None:
    """The most informative class of a chain: the last one that is not a generic wrapper."""
    wrappers = {"Py4JJavaError", "HiveSQLException", "DbtRuntimeError", "DbtDatabaseError"}
    meaningful = [r.class_name for r in class_records if r.simple_name not in wrappers]
    return meaningful[-1] if meaningful else None
