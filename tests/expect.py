"""Assertions that read like the expectation they check, with a message instead of an IndexError."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from dbt_iceberg_maint.protocol import marker_payloads

T = TypeVar("T")


def first(items: Sequence[T], what: str) -> T:
    """The first of `items`, or a failure naming what was expected (e.g. after a gate timed out,
    a background commit that never ran has no result rows)."""
    if not items:
        raise AssertionError(f"expected {what}, found none")
    return items[0]


def json_document(stdout: str) -> Any:
    """The JSON a command printed with `--output json`: the whole of its stdout (dbt's own console
    log goes to stderr then; it used to come first on stdout)."""
    try:
        return json.loads(stdout)
    except ValueError:
        raise AssertionError(f"expected stdout to be one JSON document, found:\n{stdout[-2000:]}") from None


def markers(messages: Iterable[str], marker: str) -> list[Any]:
    """The parsed JSON of each `marker` line in `messages`, in order, read through the package's
    one reader of marker lines (the harness macros' ICEBERG_MAINT_CASE lines and the package's own
    alike): tests/unit/test_leaks.py fails when a test parses them by hand again."""
    return [json.loads(payload) for payload in marker_payloads(messages, marker)]
