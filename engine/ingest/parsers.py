"""Files into page texts. One parser per format, chosen by suffix from a registry.

Every failure leaves this module as `ParseError(reason)` with a short reason the
person can act on: the ingestion job shows it next to the file and moves on.
"""

from __future__ import annotations

import io
import logging
import re
import threading
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import docx
from bs4 import BeautifulSoup, Comment, Doctype, NavigableString, ProcessingInstruction, Tag
from docx.opc.exceptions import PackageNotFoundError
from docx.table import Table
from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

from engine.errors import ParseError
from engine.ingest.text_cleanup import (
    BinaryContentError,
    clean_pdf_pages,
    decode_text_bytes,
    normalize_plain_text,
)

log = logging.getLogger(__name__)

# Text-like files are read whole into memory; beyond this they are almost
# certainly logs or data dumps, not documents anyone asks questions about.
MAX_TEXT_BYTES = 64 * 1024 * 1024
NO_TEXT_REASON = "no extractable text — scanned pages need OCR, which RAGDoll does not do yet"


@dataclass(frozen=True, kw_only=True)
class PageText:
    number: int | None  # 1-based page number for paged formats (PDF); None otherwise
    text: str  # cleaned text: what chunk spans index into and what the viewer shows


@dataclass(frozen=True, kw_only=True)
class ParsedDocument:
    path: Path
    pages: list[PageText]  # non-paged formats: one PageText(number=None, text=whole text)
    page_count: int | None  # None for non-paged formats


Parser = Callable[..., ParsedDocument]  # called as parser(path=..., data=...)


def parse_file(*, path: Path) -> ParsedDocument:
    """Read and parse one file; raises ParseError for anything that goes wrong."""
    suffix = path.suffix.lower()
    parser = _PARSERS.get(suffix)
    if parser is None:
        shown = suffix or "(no extension)"
        raise ParseError(f"unsupported file type {shown}")
    data = _read_bytes(path=path, limit=None if suffix in _UNLIMITED else MAX_TEXT_BYTES)
    if not data:
        raise ParseError("empty file")
    try:
        return parser(path=path, data=data)
    except ParseError:
        raise
    except Exception as e:  # a parser library failing in a way we did not foresee
        log.debug("parser for %s failed", path, exc_info=True)
        raise ParseError(f"could not read the file ({type(e).__name__}: {e})"[:300]) from e


def _read_bytes(*, path: Path, limit: int | None) -> bytes:
    try:
        if path.is_dir():
            raise ParseError("is a folder, not a file")
        with path.open("rb") as f:
            data = f.read() if limit is None else f.read(limit + 1)
    except FileNotFoundError as e:
        raise ParseError("file not found (it was moved or deleted)") from e
    except PermissionError as e:
        raise ParseError("permission denied") from e
    except IsADirectoryError as e:
        raise ParseError("is a folder, not a file") from e
    except OSError as e:
        raise ParseError(f"could not read the file ({e.strerror or e})") from e
    if limit is not None and len(data) > limit:
        raise ParseError(f"file too large (over {limit // (1024 * 1024)} MB of text)")
    return data


# ---------------------------------------------------------------- PDF


class _PypdfLogCapture(logging.Handler):
    """Collects pypdf's log records for the thread that asked, instead of letting
    them reach stderr: a broken PDF makes pypdf log dozens of lines that mean
    nothing to the person, though the last of them often explains the failure."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self._local = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        buffer = getattr(self._local, "buffer", None)
        if buffer is not None:
            buffer.append(record.getMessage())
        # Still visible in the engine log at debug level, never on stderr.
        log.debug("pypdf: %s", record.getMessage())

    @contextmanager
    def capture(self) -> Iterator[list[str]]:
        buffer: list[str] = []
        self._local.buffer = buffer
        try:
            yield buffer
        finally:
            self._local.buffer = None


def _pypdf_log_capture() -> _PypdfLogCapture:
    """The capture handler, installed on the "pypdf" logger on first use. It lives
    on that logger (not in this module) and is found there again afterwards."""
    logger = logging.getLogger("pypdf")
    for handler in logger.handlers:
        if isinstance(handler, _PypdfLogCapture):
            return handler
    handler = _PypdfLogCapture()
    logger.addHandler(handler)
    logger.propagate = False
    return handler


def _parse_pdf(*, path: Path, data: bytes) -> ParsedDocument:
    with _pypdf_log_capture().capture() as messages:
        try:
            reader = PdfReader(io.BytesIO(data))
            if reader.is_encrypted:
                _decrypt_with_empty_password(reader=reader)
            raw_pages = _extract_pages(reader=reader)
        except ParseError:
            raise
        except DependencyError as e:
            raise ParseError(
                "PDF uses AES encryption, which needs the 'cryptography' package"
            ) from e
        except FileNotDecryptedError as e:
            raise ParseError("PDF is encrypted (password protected)") from e
        except (PdfReadError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise ParseError(_broken_pdf_reason(error=e, messages=messages)) from e
    cleaned = clean_pdf_pages(pages=raw_pages)
    if not any(text.strip() for text in cleaned):
        raise ParseError(NO_TEXT_REASON)
    pages = [PageText(number=i + 1, text=text) for i, text in enumerate(cleaned)]
    return ParsedDocument(path=path, pages=pages, page_count=len(pages))


def _decrypt_with_empty_password(*, reader: PdfReader) -> None:
    # Many PDFs are "encrypted" only to carry permissions (no printing, no
    # copying) and open without a password; those are readable.
    result = reader.decrypt("")
    if result == PasswordType.NOT_DECRYPTED:
        raise ParseError("PDF is encrypted (password protected)")


def _extract_pages(*, reader: PdfReader) -> list[str]:
    pages = reader.pages
    if len(pages) == 0:
        raise ParseError("PDF has no pages (the file may be truncated)")
    texts: list[str] = []
    failed = 0
    for index, page in enumerate(pages):
        try:
            texts.append(page.extract_text() or "")
        except Exception:  # one bad page (broken font, bad stream) must not lose the rest
            log.debug("page %d: text extraction failed", index + 1, exc_info=True)
            texts.append("")
            failed += 1
    if failed == len(texts):
        raise ParseError("PDF is damaged: no page could be read")
    return texts


def _broken_pdf_reason(*, error: Exception, messages: list[str]) -> str:
    detail = str(error).strip() or type(error).__name__
    if messages and messages[-1] not in detail:
        detail = f"{detail}; {messages[-1]}"
    return f"PDF is damaged or truncated ({detail})"[:300]


# ---------------------------------------------------------------- text, Markdown


def _parse_text(*, path: Path, data: bytes) -> ParsedDocument:
    try:
        decoded = decode_text_bytes(data=data)
    except BinaryContentError as e:
        raise ParseError("not a text file (binary content)") from e
    return _single_page(path=path, text=normalize_plain_text(text=decoded.text))


def _single_page(*, path: Path, text: str) -> ParsedDocument:
    if not text.strip():
        raise ParseError("no text in the file")
    return ParsedDocument(path=path, pages=[PageText(number=None, text=text)], page_count=None)


# ---------------------------------------------------------------- HTML


# Elements whose text is never document content.
_HTML_DROP = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "nav",
        "svg",
        "canvas",
        "iframe",
        "head",
        "button",
        "select",
        "form",
        "object",
        "embed",
        "math",
    }
)
# Elements that start a new paragraph (blank line) or a new line.
_HTML_PARAGRAPHS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "main",
        "header",
        "footer",
        "aside",
        "blockquote",
        "pre",
        "table",
        "ul",
        "ol",
        "dl",
        "figure",
        "figcaption",
        "address",
        "details",
        "summary",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "body",
    }
)
_HTML_LINES = frozenset({"li", "dt", "dd", "tr", "br", "caption", "option"})
_HTML_CELLS = frozenset({"td", "th"})
_WHITESPACE_RUN = re.compile(r"\s+")
# Break markers from the private-use area, resolved in _join_html_parts.
_PARAGRAPH_MARK, _LINE_MARK, _CELL_MARK = "\ue000", "\ue001", "\ue002"
_NO_MARKERS = {0xE000: None, 0xE001: None, 0xE002: None}
_MARK_RUN = re.compile(r"\s*[\ue000-\ue002](?:[\s\ue000-\ue002])*")


def _parse_html(*, path: Path, data: bytes) -> ParsedDocument:
    if b"\x00" in data[:4096] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ParseError("not an HTML file (binary content)")
    # Given bytes, BeautifulSoup honours a BOM or <meta charset> and otherwise
    # guesses, which beats assuming UTF-8 for old saved pages.
    soup = BeautifulSoup(data, "html.parser")
    parts = [_html_title(soup=soup), *_html_text_parts(root=soup)]
    return _single_page(path=path, text=_join_html_parts(parts=parts))


def _html_title(*, soup: BeautifulSoup) -> str:
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    first_heading = soup.find(["h1", "h2"])
    if title and first_heading and first_heading.get_text(" ", strip=True) == title:
        return ""  # the page repeats it as its heading
    return f"{title}{_PARAGRAPH_MARK}" if title else ""


def _html_text_parts(*, root: Tag) -> list[str]:
    """Text of the tree with break markers where blocks begin and end. Iterative,
    because unclosed tags in real pages nest thousands deep."""
    parts: list[str] = []
    # Nodes still to visit; plain str entries are markers to emit on the way out.
    stack: list[Tag | NavigableString | str] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, NavigableString):
            if not isinstance(node, (Comment, Doctype, ProcessingInstruction)):
                # Spaces between inline elements matter ("a <b>b</b>"); runs of
                # them, source newlines and stray marker characters do not.
                parts.append(_WHITESPACE_RUN.sub(" ", node.translate(_NO_MARKERS)))
            continue
        if isinstance(node, str):
            parts.append(node)
            continue
        name = node.name.lower() if node.name else ""
        if name in _HTML_DROP:
            continue
        marker = ""
        if name in _HTML_PARAGRAPHS:
            marker = _PARAGRAPH_MARK
        elif name in _HTML_LINES:
            marker = _LINE_MARK
        elif name in _HTML_CELLS:
            marker = _CELL_MARK
        if marker and marker != _CELL_MARK:
            parts.append(marker)
        stack.append(marker)
        stack.extend(reversed(list(node.children)))
    return parts


def _join_html_parts(*, parts: list[str]) -> str:
    """Resolve the markers: a run of them is one paragraph break if any of them
    asks for one, else one line break (so list items do not get blank lines)."""

    def resolve(match: re.Match[str]) -> str:
        run = match.group(0)
        if _PARAGRAPH_MARK in run:
            return "\n\n"
        if _LINE_MARK in run:
            return "\n"
        return " | "

    text = _MARK_RUN.sub(resolve, "".join(parts))
    lines = [" ".join(line.split()) for line in text.split("\n")]
    # A row's last cell leaves a separator behind, the first cell one in front.
    lines = [line.strip("| ").strip() if "|" in line else line for line in lines]
    return normalize_plain_text(text="\n".join(lines))


# ---------------------------------------------------------------- DOCX


def _parse_docx(*, path: Path, data: bytes) -> ParsedDocument:
    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, PackageNotFoundError, KeyError) as e:
        raise ParseError("not a valid .docx file (damaged, or another format renamed)") from e
    blocks: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            blocks.append(_docx_table_text(table=block))
        else:
            blocks.append(block.text)
    text = "\n\n".join(block.strip() for block in blocks if block.strip())
    return _single_page(path=path, text=normalize_plain_text(text=text))


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


# ---------------------------------------------------------------- registry

# Suffix -> parser. New formats (.pptx, .xlsx, .epub) are one function and one
# entry here; SUPPORTED_SUFFIXES follows.
_PARSERS: Mapping[str, Parser] = MappingProxyType(
    {
        ".pdf": _parse_pdf,
        ".txt": _parse_text,
        ".md": _parse_text,
        ".markdown": _parse_text,
        ".html": _parse_html,
        ".htm": _parse_html,
        ".docx": _parse_docx,
    }
)
# Binary containers are read whole whatever their size; their text is much
# smaller than the file (images, fonts).
_UNLIMITED = frozenset({".pdf", ".docx"})

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(_PARSERS)
