"""The rich-table primitives every printed table is built from: `Column` (how a row key is shown),
`TABLE_COLUMN`, `add_name_column` and `table` (rows of dicts → a rich `Table`).

Ground floor: it imports rich and nothing of the product, so a shell that draws a table
(maintenance/run.py, fleet/render.py, metadata/report.py) need not import the CLI; the commands
build their columns with these too, and cli/output.py's `render` prints the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich.table import Table

__all__ = ["TABLE_COLUMN", "Column", "add_name_column", "table"]


@dataclass(frozen=True)
class Column:
    """A table column: the row key it shows, its header, and how a value is printed."""

    key: str
    header: str | None = None
    justify: Literal["left", "right"] = "left"
    fold: bool = True  # wrap long values inside the cell instead of cutting them
    wrap: bool = True  # False: names (`schema.table`) stay whole on one line; the column takes their width

    def cell(self, value: object) -> str:
        if value is None:
            return ""
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, int | float):
            return f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"
        if isinstance(value, list | tuple):
            return ", ".join(str(item) for item in value)
        return str(value)


# The `table` column of every table a command prints: a name cut across lines cannot be copied.
TABLE_COLUMN = Column("table", wrap=False)


def add_name_column(rendered: Table, header: str, names: Iterable[str],
                    justify: Literal["left", "right"] = "left") -> None:
    """A column of names that never wraps: as wide as its longest name (the other columns wrap)."""
    rendered.add_column(header, justify=justify, no_wrap=True,
                        min_width=max([len(header), *(len(name) for name in names)]))


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column], *, title: str | None = None) -> Table:
    """The rich table of `rows` (dicts) showing `columns`."""
    rendered = Table(title=title)
    cells = [[column.cell(row.get(column.key)) for column in columns] for row in rows]
    for index, column in enumerate(columns):
        if column.wrap:
            rendered.add_column(column.header or column.key, justify=column.justify,
                                overflow="fold" if column.fold else "ellipsis")
        else:
            add_name_column(rendered, column.header or column.key, (row[index] for row in cells), column.justify)
    for row in cells:
        rendered.add_row(*row)
    return rendered
