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
    """The JSON a command printed. dbt's own console log (timestamped lines) comes first: in
    process, dbt writes it to the same stdout."""
    lines = stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(("{", "["))), None)
    if start is None:
        raise AssertionError(f"expected a JSON document in the output, found none:\n{stdout[-2000:]}")
    return json.loads("\n".join(lines[start:]))
