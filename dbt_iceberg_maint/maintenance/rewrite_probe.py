"""Tell a compaction's lost commit from a failed rewrite: re-run it once, failed commits tolerated (pure).

Under partial progress Iceberg 1.10 counts a file group that failed to rewrite (a codec Parquet does
not know, a schema problem: deterministic) exactly like a group commit that lost to a concurrent
commit (transient): `partial-progress.enabled is true but N rewrite commits failed`, with the cause
only in the driver log. The procedure's own result does tell them apart when Iceberg is allowed to
return it: `failed_data_files_count` counts the data files of groups that failed to *rewrite*; a
lost commit leaves no trace there. So `dbt-iceberg-maint maintain` re-runs an undecided compaction
once, through `maintain()` with the model's policy and `max_failed_commits` lifted, and judges:

- files failed to rewrite again: deterministic; a re-run fails the same way; nothing more is run;
- it rewrote files and none failed: the first attempt's failures were not deterministic (a lost
  commit); the compaction is now done;
- it rewrote nothing and nothing failed: nothing was left to rewrite, or its own commits lost too
  (Iceberg hides those when it tolerates them); not run again.

The re-run re-plans what the first attempt left: groups that committed are not rewritten twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dbt_iceberg_maint.conflicts import classify

# Iceberg never fails the call when this many commits failed: it returns its result instead.
TOLERATED_FAILED_COMMITS = 2**31 - 1
# The circuit breaker's own count, in the exception it raises (partial-progress.max-failed-commits).
FAILED_COMMITS = re.compile(r"partial-progress\.enabled is true but (\d+) rewrite commits failed")
REWRITE_FAILED_KIND = "not_iceberg_conflict"
LOST_COMMIT_KIND = "rewrite_commit_conflict"


@dataclass(frozen=True)
class ProbeVerdict:
    """What re-running an undecided compaction once showed. `status`: the step's final status."""

    status: str  # "success" or "failed"
    kind: str  # conflicts kind of the first failure, now decided
    retryable: bool
    reason: str


def probe_args(table: str, as_of: str | None = None, policy: Mapping[str, Any] | None = None) -> list[str]:
    """The run-operation that re-runs `table`'s compaction once, per its policy, failures tolerated.
    `policy`: the table's own policy when its node does not carry it (the fleet engine's tables
    from the catalog); maintain() merges it over the node's."""
    compaction = {**((policy or {}).get("compaction") or {}), "max_failed_commits": TOLERATED_FAILED_COMMITS}
    args: dict[str, Any] = {"relation": table, "operations": ["compaction"], "force": True,
                            "policy": {**(policy or {}), "compaction": compaction}}
    if as_of is not None:
        args["as_of"] = as_of
    return ["run-operation", "dbt_iceberg_maint.maintain", "--args", json.dumps(args)]


def failed_commits(error_text: str) -> int | None:
    """The file groups Iceberg counted as failed when the circuit breaker stopped a compaction
    (groups that lost their commit and groups that failed to rewrite alike; at most one count per
    planned commit), read from the exception it raised; None for any other failure. Iceberg's
    result row has no such column, and when it tolerates failures it only logs a warning."""
    match = FAILED_COMMITS.search(error_text)
    return int(match.group(1)) if match else None


def _count(metrics: Mapping[str, Any], key: str) -> int:
    value = metrics.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def judge_probe(status: str | None, metrics: Mapping[str, Any], error_text: str | None = None) -> ProbeVerdict:
    """The verdict from the re-run's result (`status`, `metrics`), or from its error text."""
    if status is None or status == "failed":
        verdict = classify(error_text or str(metrics.get("error") or ""))
        decided = "" if verdict.undecided else f" ({verdict.kind})"
        return ProbeVerdict("failed", verdict.kind if not verdict.undecided else LOST_COMMIT_KIND, False,
                            f"re-run once to tell a lost commit from a failed rewrite, it failed too{decided}: "
                            f"{verdict.summary}; not run again")
    failed, rewritten = _count(metrics, "failed_data_files_count"), _count(metrics, "rewritten_data_files_count")
    if failed:
        return ProbeVerdict("failed", REWRITE_FAILED_KIND, False,
                            f"deterministic: re-run once with failed commits tolerated, {failed} data file(s) "
                            "failed to rewrite again (failed_data_files_count): the rewrite itself fails, not "
                            "its commit, and a re-run fails the same way; the Spark driver log says why "
                            "('Failure during rewrite group'); not retried")
    if rewritten:
        return ProbeVerdict("success", LOST_COMMIT_KIND, True,
                            f"the first attempt's failed commits were not deterministic (a commit lost to a "
                            f"concurrent commit): re-run once with failed commits tolerated, it rewrote "
                            f"{rewritten} data file(s) and none failed")
    return ProbeVerdict("failed", LOST_COMMIT_KIND, True,
                        "re-run once with failed commits tolerated: nothing failed to rewrite and nothing was "
                        "rewritten (the files were compacted meanwhile, or its commits lost too); not run again")
