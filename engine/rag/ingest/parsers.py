"""Files into page texts. One parser per format, chosen by suffix from one
registry; the parsers themselves live in engine/rag/ingest/formats/.

Every failure leaves this module as `ParseError(reason)` with a short reason the
person can act on: the ingestion job shows it next to the file and moves on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from engine.errors import LinkedPathError, ParseError
from engine.rag.ingest.formats.base import NO_TEXT_REASON, PageText, ParsedDocument
from engine.rag.ingest.safe_open import SWAPPED, open_listed
from engine.rag.ingest.sandbox_child import load_callable

__all__ = [
    "MAX_TEXT_BYTES",
    "NO_TEXT_REASON",
    "SUPPORTED_SUFFIXES",
    "FileFormat",
    "PageText",
    "ParsedDocument",
    "parse_file",
]

log = logging.getLogger(__name__)

# Text-like files are read whole into memory; beyond this they are almost
# certainly logs or data dumps, not documents anyone asks questions about.
MAX_TEXT_BYTES = 64 * 1024 * 1024
# Compressed image files beyond this are photographs or posters, not pages.
_MAX_IMAGE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class FileFormat:
    """How files of one suffix are read. The parser is called as
    parse(path=..., data=...) with the whole file, or as parse(path=...) when
    `streamed` (the parser reads the file itself: it may be huge)."""

    # The parser, or "module:function" naming one: a process imports only the parsers
    # of the files it reads (all of them at once took 0.45 s of every engine start
    # and every parsing child: python-pptx, openpyxl, the EPUB and HTML readers).
    parse: Callable[..., ParsedDocument] | str
    max_bytes: int | None = MAX_TEXT_BYTES  # None: read whatever the size
    streamed: bool = False
    # The parser takes progress=(done, total) for slow pages (OCR).
    reports_progress: bool = False

    def parser(self) -> Callable[..., ParsedDocument]:
        return self.parse if callable(self.parse) else load_callable(self.parse)


def _in(module: str, function: str) -> str:
    return f"engine.rag.ingest.formats.{module}:{function}"


# Binary containers (max_bytes=None) are read whole whatever their size: their
# text is much smaller than the file (images, fonts), and each parser limits
# what it unpacks. Suffix -> format. A new format is a module in engine/rag/ingest/formats and an
# entry here; SUPPORTED_SUFFIXES (what discovery and watching pick up) follows.
_FORMATS: Mapping[str, FileFormat] = MappingProxyType(
    {
        ".pdf": FileFormat(parse=_in("pdf", "parse_pdf"), max_bytes=None, reports_progress=True),
        ".txt": FileFormat(parse=_in("text", "parse_text")),
        ".md": FileFormat(parse=_in("text", "parse_text")),
        ".markdown": FileFormat(parse=_in("text", "parse_text")),
        ".html": FileFormat(parse=_in("html_page", "parse_html")),
        ".htm": FileFormat(parse=_in("html_page", "parse_html")),
        ".docx": FileFormat(parse=_in("word", "parse_docx"), max_bytes=None),
        ".pptx": FileFormat(parse=_in("slides", "parse_pptx"), max_bytes=None),
        ".xlsx": FileFormat(parse=_in("spreadsheet", "parse_xlsx"), max_bytes=None),
        ".csv": FileFormat(parse=_in("spreadsheet", "parse_csv")),
        ".tsv": FileFormat(parse=_in("spreadsheet", "parse_csv")),
        ".odt": FileFormat(parse=_in("opendocument", "parse_odt"), max_bytes=None),
        ".epub": FileFormat(parse=_in("ebook", "parse_epub"), max_bytes=None),
        ".rtf": FileFormat(parse=_in("rtf", "parse_rtf")),
        ".eml": FileFormat(parse=_in("mail", "parse_eml")),
        ".mbox": FileFormat(parse=_in("mail", "parse_mbox"), max_bytes=None, streamed=True),
        ".png": FileFormat(
            parse=_in("image", "parse_image"), max_bytes=_MAX_IMAGE_BYTES, reports_progress=True
        ),
        ".jpg": FileFormat(
            parse=_in("image", "parse_image"), max_bytes=_MAX_IMAGE_BYTES, reports_progress=True
        ),
        ".jpeg": FileFormat(
            parse=_in("image", "parse_image"), max_bytes=_MAX_IMAGE_BYTES, reports_progress=True
        ),
        ".tif": FileFormat(
            parse=_in("image", "parse_image"), max_bytes=_MAX_IMAGE_BYTES, reports_progress=True
        ),
        ".tiff": FileFormat(
            parse=_in("image", "parse_image"), max_bytes=_MAX_IMAGE_BYTES, reports_progress=True
        ),
    }
)

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(_FORMATS)


def parse_file(*, path: Path, progress: Callable[[int, int], None] | None = None) -> ParsedDocument:
    """Read and parse one file; raises ParseError for anything that goes wrong.
    `progress(done, total)` hears about slow pages (OCR) as they are read."""
    suffix = path.suffix.lower()
    file_format = _FORMATS.get(suffix)
    if file_format is None:
        shown = suffix or "(no extension)"
        raise ParseError(f"unsupported file type {shown}")
    try:
        if file_format.streamed:
            _check_streamable(path=path)
            with _os_errors():
                return file_format.parser()(path=path)
        data = _read_bytes(path=path, limit=file_format.max_bytes)
        if not data:
            raise ParseError("empty file")
        parse = file_format.parser()
        if file_format.reports_progress and progress is not None:
            return parse(path=path, data=data, progress=progress)
        return parse(path=path, data=data)
    except ParseError:
        raise
    except (MemoryError, RecursionError) as e:
        raise ParseError(
            f"file is too large or too deeply nested to read ({type(e).__name__})"
        ) from e
    except Exception as e:  # a parser library failing in a way we did not foresee
        log.debug("parser for %s failed", path, exc_info=True)
        raise ParseError(f"could not read the file ({type(e).__name__}: {e})"[:300]) from e


@contextmanager
def _os_errors() -> Iterator[None]:
    """OSErrors from reading a file, as the reasons a person understands."""
    try:
        yield
    except LinkedPathError as e:
        raise ParseError(SWAPPED) from e
    except FileNotFoundError as e:
        raise ParseError("file not found (it was moved or deleted)") from e
    except PermissionError as e:
        raise ParseError("permission denied") from e
    except IsADirectoryError as e:
        raise ParseError("is a folder, not a file") from e
    except OSError as e:
        raise ParseError(f"could not read the file ({e.strerror or e})") from e


def _check_streamable(*, path: Path) -> None:
    with _os_errors():
        if path.is_dir():
            raise ParseError("is a folder, not a file")
        size = path.stat().st_size
    if size == 0:
        raise ParseError("empty file")


def _read_bytes(*, path: Path, limit: int | None) -> bytes:
    with _os_errors():
        if path.is_dir():
            raise ParseError("is a folder, not a file")
        with open_listed(path) as f:  # no symbolic link on its way (safe_open.py)
            data = f.read() if limit is None else f.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise ParseError(f"file too large (over {limit // (1024 * 1024)} MB of text)")
    return data
