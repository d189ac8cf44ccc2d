"""Rows of a table (a spreadsheet sheet, a CSV file) as readable lines.

A row becomes "Row 7: Name: Ada; City: Paris" when the table has a header row,
"Row 7: Ada | Paris" when it has none: each line carries its own column names,
so a chunk cut from the middle of a long sheet still says what its numbers are.
Limits keep a huge table from exhausting memory; what was cut is said in the
text and in the document's notes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from engine.rag.ingest.formats.base import one_line

MAX_ROWS_PER_TABLE = 100_000
MAX_CELLS_PER_DOCUMENT = 1_000_000
MAX_COLUMNS = 512
MAX_CELL_CHARS = 2_000


@dataclass(kw_only=True)
class CellBudget:
    """Cells left for the rest of one document (a workbook's sheets share it)."""

    # Read when a budget is made (not when this module loads), so a test can
    # lower the limit.
    cells_left: int = field(default_factory=lambda: MAX_CELLS_PER_DOCUMENT)
    notes: list[str] = field(default_factory=list)


def cell_text(value: object) -> str:
    """How a cell value reads in the text: numbers without float noise, dates
    without a midnight time, text on one line."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return f"{value:.15g}"
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0, 0):
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    text = one_line(str(value))
    if len(text) > MAX_CELL_CHARS:
        return text[:MAX_CELL_CHARS] + " …"
    return text


def looks_like_header(row: Sequence[object]) -> bool:
    """A header row holds distinct text labels (no numbers, dates or booleans;
    text that reads as a number counts as a number, as CSV cells are all text)."""
    filled = [value for value in row if value is not None and cell_text(value)]
    labels = [cell_text(value) for value in filled]
    return (
        bool(filled)
        and all(isinstance(value, str) and not _is_number(value) for value in filled)
        and len(set(labels)) == len(labels)
    )


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", "").strip())
    except ValueError:
        return False
    return True


def render_rows(
    *,
    rows: Iterable[Sequence[object]],
    header: bool | None,
    budget: CellBudget,
    table_name: str,
) -> str:
    """Lines for the rows, numbered as in the source (1-based, blank rows
    counted). The header is the first row with two or more cells, when only
    one-cell rows (titles) come before it and, if `header` is None, it
    looks_like_header; it is shown once, as "Columns: ..."."""
    lines: list[str] = []
    names: list[str] | None = None
    seeking_header = header is not False
    rendered = 0
    for number, row in enumerate(rows, start=1):
        values = [cell_text(value) for value in row[:MAX_COLUMNS]]
        filled = sum(1 for value in values if value)
        if not filled:
            continue
        if seeking_header and filled >= 2:
            seeking_header = False
            if header or looks_like_header(row[:MAX_COLUMNS]):
                names = [value or _column_letters(i) for i, value in enumerate(values)]
                lines.append("Columns: " + " | ".join(value for value in values if value))
                continue
        if rendered >= MAX_ROWS_PER_TABLE or filled > budget.cells_left:
            note = (
                f"{table_name}: only the first {rendered:,} rows were read "
                f"(limits: {MAX_ROWS_PER_TABLE:,} rows per table, "
                f"{MAX_CELLS_PER_DOCUMENT:,} cells per file)"
            )
            budget.notes.append(note)
            lines.append(f"[{note}]")
            break
        budget.cells_left -= filled
        rendered += 1
        lines.append(f"Row {number}: {_row_line(values=values, names=names)}")
    return "\n".join(lines)


def _row_line(*, values: list[str], names: list[str] | None) -> str:
    if names is None:
        return " | ".join(value for value in values if value)
    return "; ".join(
        f"{names[i] if i < len(names) else _column_letters(i)}: {value}"
        for i, value in enumerate(values)
        if value
    )


def _column_letters(index: int) -> str:
    """Spreadsheet column name of a 0-based index: 0 -> A, 26 -> AA."""
    letters = ""
    index += 1
    while index:
        index, remainder = divmod(index - 1, 26)
        letters = chr(ord("A") + remainder) + letters
    return letters
