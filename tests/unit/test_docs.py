"""The docs: generated pages are current, the README stays an entry page, links resolve."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dbt_iceberg_maint.conflicts import ConflictKind
from dbt_iceberg_maint.conflicts.kinds import MESSAGES
from dbt_iceberg_maint.conflicts.reference import markdown

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_conflict_kinds_page_is_generated_from_the_classifier() -> None:
    page = (ROOT / "docs" / "conflict-kinds.md").read_text()
    assert page == markdown(), "docs/conflict-kinds.md is stale: run ./scripts/gen-docs"
    assert set(MESSAGES) == set(ConflictKind)
    for kind in ConflictKind:
        assert f"| `{kind.value}` |" in page


def test_readme_is_an_entry_page() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_relative_links_resolve_inside_the_repository(page: Path) -> None:
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        resolved = (page.parent / target).resolve()
        assert resolved.is_relative_to(ROOT) and resolved.exists(), f"{page.name}: broken link {target}"


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_docs_cite_only_files_of_this_repository(page: Path) -> None:
    text = page.read_text()
    # Outside agreements and machine paths (spelled in parts so this file does not match itself).
    outside = ("DESIGN" + ".md", "../" + "shared", "/" + "work/")
    assert not [marker for marker in outside if marker in text], page.name
