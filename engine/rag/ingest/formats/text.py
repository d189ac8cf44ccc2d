"""Plain text and Markdown: decoded (BOM, UTF-16, UTF-8, cp1252) and tidied;
Markdown is kept as written, since its markup is readable text."""

from __future__ import annotations

import re
from pathlib import Path

from engine.errors import ParseError
from engine.rag.ingest.formats.base import Heading, PageText, ParsedDocument
from engine.rag.ingest.text_cleanup import (
    BinaryContentError,
    decode_text_bytes,
    normalize_plain_text,
)

_MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
# "## Title ##" (ATX) and "Title\n=====" (setext) headings.
_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


def parse_text(*, path: Path, data: bytes) -> ParsedDocument:
    try:
        decoded = decode_text_bytes(data=data)
    except BinaryContentError as e:
        raise ParseError("not a text file (binary content)") from e
    text = normalize_plain_text(text=decoded.text)
    if not text.strip():
        raise ParseError("no text in the file")
    headings = markdown_headings(text=text) if path.suffix.lower() in _MARKDOWN_SUFFIXES else ()
    page = PageText(number=None, text=text, headings=headings)
    return ParsedDocument(path=path, pages=[page], page_count=None)


def markdown_headings(*, text: str) -> tuple[Heading, ...]:
    """The headings of Markdown text, outside code fences, where their lines start."""
    found: list[Heading] = []
    offset = 0
    in_fence = False
    previous: tuple[int, str] | None = None  # the line before, if it could be a title
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            atx = _ATX.match(line)
            if atx:
                found.append(Heading(offset=offset, title=" ".join(atx.group(2).split())[:200]))
            elif previous is not None and _SETEXT_UNDERLINE.match(line):
                found.append(Heading(offset=previous[0], title=previous[1][:200]))
        title = " ".join(line.split())
        usable = not in_fence and title and not _SETEXT_UNDERLINE.match(line)
        previous = (offset, title) if usable and not line.startswith((" ", "-", "*")) else None
        offset += len(line) + 1
    return tuple(found)
