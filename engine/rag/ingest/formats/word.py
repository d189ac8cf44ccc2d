"""DOCX through python-docx: paragraphs and tables in document order."""

from __future__ import annotations

import io
from pathlib import Path

import docx
from docx.opc.exceptions import PackageNotFoundError
from docx.table import Table

from engine.errors import ParseError
from engine.rag.ingest.formats.base import ParsedDocument, single_page
from engine.rag.ingest.formats.containers import DAMAGED_ZIP_ERRORS, open_zip
from engine.rag.ingest.text_cleanup import normalize_plain_text


def parse_docx(*, path: Path, data: bytes) -> ParsedDocument:
    open_zip(data=data, kind=".docx").close()
    try:
        document = docx.Document(io.BytesIO(data))
        blocks: list[str] = []
        headings: list[str] = []
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                blocks.append(_docx_table_text(table=block))
            else:
                blocks.append(block.text)
                if _is_heading(style=block.style) and block.text.strip():
                    headings.append(block.text)
    except (PackageNotFoundError, KeyError) as e:
        raise ParseError("not a valid .docx file (damaged, or another format renamed)") from e
    except DAMAGED_ZIP_ERRORS as e:
        raise ParseError(f".docx file is damaged ({e})"[:300]) from e
    text = "\n\n".join(block.strip() for block in blocks if block.strip())
    return single_page(path=path, text=normalize_plain_text(text=text), headings=headings)


def _is_heading(*, style: object) -> bool:
    # Built-in "Heading 1".."Heading 9" and "Title", also when a template
    # renamed them but kept them based on the built-in ones.
    depth = 0
    while style is not None and depth < 10:
        name = str(getattr(style, "name", "") or "")
        if name.startswith("Heading") or name == "Title":
            return True
        style = getattr(style, "base_style", None)
        depth += 1
    return False


def _docx_table_text(*, table: Table) -> str:
    rows: list[str] = []
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            # A merged cell is returned once per grid column it spans.
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            text = " ".join(cell.text.split())
            if text:
                cells.append(text)
        if cells:
            rows.append(" | ".join(cells))
    return "\n".join(rows)
