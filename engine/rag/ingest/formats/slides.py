"""PowerPoint .pptx through python-pptx: one page per slide (page = slide
number), with the slide's text boxes top to bottom, its tables, and its
speaker notes. Footers, dates and slide numbers are left out: they repeat on
every slide and would match every question about their words."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from pathlib import Path

from pptx import Presentation
from pptx.enum.shapes import PP_PLACEHOLDER
from pptx.exc import PackageNotFoundError
from pptx.shapes.base import BaseShape
from pptx.shapes.group import GroupShape
from pptx.slide import Slide

from engine.errors import ParseError
from engine.rag.ingest.formats.base import ParsedDocument, numbered_pages, one_line
from engine.rag.ingest.formats.containers import DAMAGED_ZIP_ERRORS, open_zip

_REPEATED_PLACEHOLDERS = frozenset(
    {PP_PLACEHOLDER.FOOTER, PP_PLACEHOLDER.DATE, PP_PLACEHOLDER.SLIDE_NUMBER}
)
# Group shapes nest; real decks stay shallow, a crafted file need not.
_MAX_GROUP_DEPTH = 32


def parse_pptx(*, path: Path, data: bytes) -> ParsedDocument:
    open_zip(data=data, kind=".pptx").close()
    try:
        presentation = Presentation(io.BytesIO(data))
        texts = [_slide_text(slide=slide) for slide in presentation.slides]
    except (PackageNotFoundError, KeyError) as e:
        raise ParseError("not a valid .pptx file (damaged, or another format renamed)") from e
    except DAMAGED_ZIP_ERRORS as e:
        raise ParseError(f".pptx file is damaged ({e})"[:300]) from e
    if not texts:
        raise ParseError("the presentation has no slides")
    return numbered_pages(path=path, texts=texts, empty_reason="no text on any slide")


def _slide_text(*, slide: Slide) -> str:
    blocks = [
        text
        for shape in _reading_order(shapes=slide.shapes)
        for text in _shape_texts(shape=shape, depth=0)
    ]
    if slide.has_notes_slide:
        notes_frame = slide.notes_slide.notes_text_frame
        notes = notes_frame.text.replace("\v", "\n").strip() if notes_frame is not None else ""
        if notes:
            blocks.append(f"Notes:\n{notes}")
    return "\n\n".join(block for block in blocks if block.strip())


def _reading_order(*, shapes: Iterable[BaseShape]) -> list[BaseShape]:
    """Title first, then top to bottom, left to right. The file's own order is
    z-order, which is the order shapes were added, not the order they are read."""

    def key(shape: BaseShape) -> tuple[int, int, int]:
        is_title = shape.is_placeholder and shape.placeholder_format.type in (
            PP_PLACEHOLDER.TITLE,
            PP_PLACEHOLDER.CENTER_TITLE,
        )
        return (0 if is_title else 1, shape.top or 0, shape.left or 0)

    return sorted(shapes, key=key)


def _shape_texts(*, shape: BaseShape, depth: int) -> Iterator[str]:
    if shape.is_placeholder and shape.placeholder_format.type in _REPEATED_PLACEHOLDERS:
        return
    if isinstance(shape, GroupShape):
        if depth < _MAX_GROUP_DEPTH:
            for inner in _reading_order(shapes=shape.shapes):
                yield from _shape_texts(shape=inner, depth=depth + 1)
        return
    if shape.has_table:
        yield _table_text(shape=shape)
    elif shape.has_text_frame:
        # python-pptx writes a line break inside a paragraph as a vertical tab.
        yield shape.text_frame.text.replace("\v", "\n").strip()  # type: ignore[attr-defined]


def _table_text(*, shape: BaseShape) -> str:
    rows: list[str] = []
    for row in shape.table.rows:  # type: ignore[attr-defined]
        cells: list[str] = []
        for cell in row.cells:
            # A merged cell's area is covered by "spanned" cells that repeat nothing.
            if cell.is_spanned:
                continue
            text = one_line(cell.text)
            if text:
                cells.append(text)
        if cells:
            rows.append(" | ".join(cells))
    return "\n".join(rows)
