"""The values every format parser returns, and small helpers they share."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import ParseError
from engine.ingest.text_cleanup import normalize_plain_text

NO_TEXT_REASON = "no extractable text — scanned pages need OCR, which RAGDoll does not do yet"


@dataclass(frozen=True, kw_only=True)
class PageText:
    # 1-based number for paged formats (PDF page, slide, sheet, chapter, message);
    # None for formats that are one flow of text.
    number: int | None
    text: str  # cleaned text: what chunk spans index into and what the viewer shows


@dataclass(frozen=True, kw_only=True)
class ParsedDocument:
    path: Path
    pages: list[PageText]  # non-paged formats: one PageText(number=None, text=whole text)
    page_count: int | None  # None for non-paged formats
    # Things the person should know although the file was read, e.g. that only
    # the first rows of a huge sheet were kept. The same words are in the text.
    notes: tuple[str, ...] = field(default=())


def single_page(*, path: Path, text: str, notes: tuple[str, ...] = ()) -> ParsedDocument:
    """A non-paged document from already cleaned text."""
    if not text.strip():
        raise ParseError("no text in the file")
    return ParsedDocument(
        path=path, pages=[PageText(number=None, text=text)], page_count=None, notes=notes
    )


def numbered_pages(
    *, path: Path, texts: list[str], empty_reason: str, notes: tuple[str, ...] = ()
) -> ParsedDocument:
    """A paged document: page i+1 is normalize_plain_text(texts[i])."""
    cleaned = [normalize_plain_text(text=text) for text in texts]
    if not any(text.strip() for text in cleaned):
        raise ParseError(empty_reason)
    pages = [PageText(number=i + 1, text=text) for i, text in enumerate(cleaned)]
    return ParsedDocument(path=path, pages=pages, page_count=len(pages), notes=notes)


def one_line(text: str) -> str:
    """Collapse every whitespace run (newlines included) into one space."""
    return " ".join(text.split())
