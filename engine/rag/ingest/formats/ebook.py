"""EPUB through EbookLib: one page per chapter (spine document) with text, in
reading order; page = the chapter's position among those with text. Chapter
XHTML goes through html_page.html_to_text."""

from __future__ import annotations

import io
import posixpath
import zipfile
from pathlib import Path
from typing import Any

import ebooklib
from ebooklib import epub
from lxml import etree

from engine.errors import ParseError
from engine.rag.ingest.formats.base import Heading, PageText, ParsedDocument, locate_headings
from engine.rag.ingest.formats.containers import DAMAGED_ZIP_ERRORS, open_zip
from engine.rag.ingest.formats.html_page import html_text_and_headings

_ENCRYPTION = "META-INF/encryption.xml"
_CIPHER_REFERENCE = "{http://www.w3.org/2001/04/xmlenc#}CipherReference"
_DOCUMENT_SUFFIXES = (".xhtml", ".html", ".htm", ".xml")


def parse_epub(*, path: Path, data: bytes) -> ParsedDocument:
    with open_zip(data=data, kind=".epub") as archive:
        _refuse_drm(archive=archive)
    try:
        book = epub.read_epub(io.BytesIO(data), options={"ignore_ncx": True})
        chapters = [c for c in _chapter_texts(book=book) if c[0].strip()]
    except epub.EpubException as e:
        raise ParseError(f".epub file is damaged ({e.msg})"[:300]) from e
    except (KeyError, IndexError, AttributeError, etree.LxmlError) as e:
        raise ParseError(f".epub file is damaged ({type(e).__name__}: {e})"[:300]) from e
    except DAMAGED_ZIP_ERRORS as e:
        raise ParseError(f".epub file is damaged ({e})"[:300]) from e
    pages = [
        PageText(number=number, text=text, headings=headings)
        for number, (text, headings) in enumerate(chapters, start=1)
    ]
    if not any(page.text.strip() for page in pages):
        raise ParseError("no text in the book")
    return ParsedDocument(path=path, pages=pages, page_count=len(pages))


def _chapter_texts(*, book: epub.EpubBook) -> list[tuple[str, tuple[Heading, ...]]]:
    """Each chapter's cleaned text (html_page's clean-up is normalize_plain_text's)
    and its headings."""
    texts: list[tuple[str, tuple[Heading, ...]]] = []
    seen: set[str] = set()
    contents = _toc_titles(book.toc)
    for entry in book.spine:
        idref = entry[0] if isinstance(entry, tuple) else entry
        item = book.get_item_with_id(idref)
        if item is None or idref in seen or item.get_type() != ebooklib.ITEM_DOCUMENT:
            continue
        seen.add(idref)
        # <title> is usually the book's title on every chapter: a running header.
        text, headings = html_text_and_headings(data=item.get_content(), keep_title=False)
        if not headings:
            # LibreOffice's EPUB export writes headings as styled paragraphs; its
            # table of contents still names them (titles not in the text are dropped).
            headings = locate_headings(text=text, titles=contents.get(item.file_name, []))
        texts.append((text, headings))
    return texts


def _toc_titles(toc: Any) -> dict[str, list[str]]:
    """The table of contents' titles by the file they point into, in order."""
    out: dict[str, list[str]] = {}
    stack = list(reversed(list(toc or ())))
    while stack:
        entry = stack.pop()
        if isinstance(entry, tuple | list):  # (Section, [children])
            stack.extend(reversed(list(entry)))
            continue
        href = str(getattr(entry, "href", "") or "").split("#", 1)[0]
        title = str(getattr(entry, "title", "") or "").strip()
        if href and title:
            out.setdefault(href, []).append(title)
    return out


def _refuse_drm(*, archive: zipfile.ZipFile) -> None:
    """DRM (Adobe ADEPT, Apple FairPlay, ...) encrypts the chapters and lists
    them in META-INF/encryption.xml. Font obfuscation lists only fonts there;
    those books read fine."""
    try:
        listing = archive.read(_ENCRYPTION)
    except KeyError:
        return
    try:
        root = etree.fromstring(listing, parser=etree.XMLParser(resolve_entities=False))
    except etree.XMLSyntaxError:
        return
    for reference in root.iter(_CIPHER_REFERENCE):
        uri = posixpath.basename(reference.get("URI", "")).lower()
        if uri.endswith(_DOCUMENT_SUFFIXES):
            raise ParseError(".epub file is DRM-protected (its chapters are encrypted)")
