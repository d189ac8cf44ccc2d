"""The values every format parser returns, and small helpers they share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import ParseError
from engine.rag.ingest.text_cleanup import normalize_plain_text

NO_TEXT_REASON = "no extractable text (no text layer, and OCR found no text on the pages)"


@dataclass(frozen=True, kw_only=True)
class Heading:
    """A section title that starts at `offset` in its page's cleaned text; it
    holds for everything after it, on this page and the next ones, until the
    next heading."""

    offset: int
    title: str  # one line, e.g. "5.13 Other debian/* files"


@dataclass(frozen=True, kw_only=True)
class PageText:
    # 1-based number for paged formats (PDF page, slide, sheet, chapter, message);
    # None for formats that are one flow of text.
    number: int | None
    text: str  # cleaned text: what chunk spans index into and what the viewer shows
    headings: tuple[Heading, ...] = ()  # in offset order


@dataclass(frozen=True, kw_only=True)
class ParsedDocument:
    path: Path
    pages: list[PageText]  # non-paged formats: one PageText(number=None, text=whole text)
    page_count: int | None  # None for non-paged formats
    # Things the person should know although the file was read, e.g. that only
    # the first rows of a huge sheet were kept. The same words are in the text.
    notes: tuple[str, ...] = field(default=())


def single_page(
    *, path: Path, text: str, notes: tuple[str, ...] = (), headings: Sequence[str] = ()
) -> ParsedDocument:
    """A non-paged document from already cleaned text; `headings` are the
    section titles in the order they appear in it."""
    if not text.strip():
        raise ParseError("no text in the file")
    page = PageText(number=None, text=text, headings=locate_headings(text=text, titles=headings))
    return ParsedDocument(path=path, pages=[page], page_count=None, notes=notes)


def locate_headings(*, text: str, titles: Sequence[str]) -> tuple[Heading, ...]:
    """Where each title (in document order) starts in `text`: searched forward
    from the previous one, at a line start first. Titles not found are left out,
    so a clean-up that changed a title loses that title, never the order."""
    found: list[Heading] = []
    at = 0
    for raw in titles:
        title = one_line(raw)
        if not title:
            continue
        pos = _find_line_start(text=text, needle=title, start=at)
        if pos < 0:
            pos = text.find(title, at)
        if pos < 0:
            continue
        found.append(Heading(offset=pos, title=title[:200]))
        at = pos + len(title)
    return tuple(found)


def _find_line_start(*, text: str, needle: str, start: int) -> int:
    pos = text.find(needle, start)
    while pos > 0 and text[pos - 1] != "\n":
        pos = text.find(needle, pos + 1)
    return pos


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
