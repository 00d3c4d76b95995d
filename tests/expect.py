"""Assertions that read like the expectation they check, with a message instead of an IndexError."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def first(items: Sequence[T], what: str) -> T:
    """The first of `items`, or a failure naming what was expected (e.g. after a gate timed out,
    a background commit that never ran has no result rows)."""
    if not items:
        raise AssertionError(f"expected {what}, found none")
    return items[0]
