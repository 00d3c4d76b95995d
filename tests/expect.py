"""Assertions that read like the expectation they check, with a message instead of an IndexError."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeVar

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
