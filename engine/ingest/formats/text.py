"""Plain text and Markdown: decoded (BOM, UTF-16, UTF-8, cp1252) and tidied;
Markdown is kept as written, since its markup is readable text."""

from __future__ import annotations

from pathlib import Path

from engine.errors import ParseError
from engine.ingest.formats.base import ParsedDocument, single_page
from engine.ingest.text_cleanup import BinaryContentError, decode_text_bytes, normalize_plain_text


def parse_text(*, path: Path, data: bytes) -> ParsedDocument:
    try:
        decoded = decode_text_bytes(data=data)
    except BinaryContentError as e:
        raise ParseError("not a text file (binary content)") from e
    return single_page(path=path, text=normalize_plain_text(text=decoded.text))
