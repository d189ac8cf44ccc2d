"""PDF through pypdf: one page per PDF page, page numbers kept, text repaired
by text_cleanup.clean_pdf_pages (hyphenation, ligatures, running headers)."""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

from engine.errors import ParseError
from engine.ingest.formats.base import NO_TEXT_REASON, PageText, ParsedDocument
from engine.ingest.text_cleanup import clean_pdf_pages

log = logging.getLogger(__name__)


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


def parse_pdf(*, path: Path, data: bytes) -> ParsedDocument:
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
