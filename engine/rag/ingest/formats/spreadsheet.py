"""Spreadsheets: .xlsx through openpyxl (one page per sheet) and .csv/.tsv
through the standard csv module (one document). Rows are rendered by
table_rows, under its row and cell limits."""

from __future__ import annotations

import csv
import io
import warnings
from pathlib import Path

import openpyxl
from openpyxl.utils.exceptions import InvalidFileException

from engine.errors import ParseError
from engine.rag.ingest.formats.base import ParsedDocument, numbered_pages, single_page
from engine.rag.ingest.formats.containers import DAMAGED_ZIP_ERRORS, open_zip
from engine.rag.ingest.formats.table_rows import CellBudget, render_rows
from engine.rag.ingest.text_cleanup import (
    BinaryContentError,
    decode_text_bytes,
    normalize_plain_text,
)

# The dialect is guessed from this much text; enough for a few dozen rows.
_SNIFF_CHARS = 64 * 1024
_DELIMITERS = ",;\t|"


def parse_xlsx(*, path: Path, data: bytes) -> ParsedDocument:
    # Worksheets are streamed (read_only), so only the other parts count
    # towards the unpacked-size limit.
    archive = open_zip(
        data=data, kind=".xlsx", counted=lambda name: not name.startswith("xl/worksheets/")
    )
    archive.close()
    budget = CellBudget()
    texts: list[str] = []
    try:
        with warnings.catch_warnings():
            # openpyxl warns about every feature it drops (data validation,
            # conditional formatting, unknown extensions): none matter for text.
            warnings.simplefilter("ignore")
            workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
            try:
                for sheet in workbook.worksheets:
                    # Declared dimensions are often wrong (A1:XFD1048576); the
                    # rows actually in the file are what is read.
                    sheet.reset_dimensions()
                    rows = sheet.iter_rows(values_only=True)
                    body = render_rows(
                        rows=rows, header=None, budget=budget, table_name=f"sheet {sheet.title}"
                    )
                    texts.append(f"Sheet: {sheet.title}\n\n{body}" if body else "")
            finally:
                workbook.close()
    except (InvalidFileException, KeyError) as e:
        raise ParseError("not a valid .xlsx file (damaged, or another format renamed)") from e
    except DAMAGED_ZIP_ERRORS as e:
        raise ParseError(f".xlsx file is damaged ({e})"[:300]) from e
    if not texts:
        raise ParseError("the workbook has no worksheets")
    return numbered_pages(
        path=path, texts=texts, empty_reason="no data in any sheet", notes=tuple(budget.notes)
    )


def parse_csv(*, path: Path, data: bytes) -> ParsedDocument:
    try:
        text = decode_text_bytes(data=data).text
    except BinaryContentError as e:
        raise ParseError("not a CSV file (binary content)") from e
    dialect = _sniff_dialect(
        sample=text[:_SNIFF_CHARS], tab_separated=path.suffix.lower() == ".tsv"
    )
    budget = CellBudget()
    try:
        body = _render_csv(text=text, dialect=dialect, budget=budget, name=path.name)
    except csv.Error:
        # An unbalanced quote swallows the rest of the file into one field,
        # past the csv module's field limit; splitting each line at the
        # delimiter, quotes read as plain characters, still gives every line.
        budget = CellBudget()
        rows = (line.split(dialect.delimiter) for line in text.splitlines())
        body = render_rows(rows=rows, header=None, budget=budget, table_name=path.name)
    return single_page(path=path, text=normalize_plain_text(text=body), notes=tuple(budget.notes))


def _render_csv(*, text: str, dialect: type[csv.Dialect], budget: CellBudget, name: str) -> str:
    rows = csv.reader(io.StringIO(text, newline=""), dialect=dialect)
    return render_rows(rows=rows, header=None, budget=budget, table_name=name)


def _sniff_dialect(*, sample: str, tab_separated: bool) -> type[csv.Dialect]:
    if tab_separated:
        return csv.excel_tab
    try:
        return csv.Sniffer().sniff(sample, delimiters=_DELIMITERS)
    except csv.Error:
        # One column, or too irregular to tell: plain comma-separated.
        return csv.excel
