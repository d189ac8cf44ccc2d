"""Rich Text Format through striprtf. RTF is 7-bit text that names its code
page (\\ansicpgN) and escapes other characters as \\'hh (bytes in that code
page, or in a font's \\fcharset) or \\uN (UTF-16 units); striprtf decodes the
escapes, this module decodes the file and joins surrogate pairs."""

from __future__ import annotations

import codecs
import re
from pathlib import Path

from striprtf.striprtf import rtf_to_text

from engine.errors import ParseError
from engine.rag.ingest.formats.base import ParsedDocument, single_page
from engine.rag.ingest.text_cleanup import normalize_plain_text

_CODE_PAGE = re.compile(rb"\\ansicpg(\d{1,5})")
_SIGNATURE = re.compile(rb"^\s*\{\\rtf", re.ASCII)


def parse_rtf(*, path: Path, data: bytes) -> ParsedDocument:
    if not _SIGNATURE.match(data[:64]):
        raise ParseError("not an RTF file (it does not start with {\\rtf)")
    encoding = _code_page(data=data[:4096])
    # Bytes above 127 should be escaped, but some writers emit them raw, in
    # the document's code page.
    source = data.decode(encoding, errors="replace")
    text = rtf_to_text(source, encoding=encoding, errors="replace")
    return single_page(path=path, text=normalize_plain_text(text=_join_surrogates(text=text)))


def _code_page(*, data: bytes) -> str:
    match = _CODE_PAGE.search(data)
    if match is None:
        return "cp1252"
    number = int(match.group(1))
    # Code page 65001 is UTF-8; 10000 Mac Roman; others are Windows code pages.
    candidate = {65001: "utf-8", 10000: "mac_roman"}.get(number, f"cp{number}")
    try:
        codecs.lookup(candidate)
    except LookupError:
        return "cp1252"
    return candidate


def _join_surrogates(*, text: str) -> str:
    """\\uN escapes give characters outside the BMP as two UTF-16 halves;
    lone halves (a broken file) become U+FFFD, since the store needs UTF-8."""
    return text.encode("utf-16-le", errors="surrogatepass").decode("utf-16-le", errors="replace")
