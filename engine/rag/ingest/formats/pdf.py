"""PDF through PDFium (pypdfium2): one page per PDF page, page numbers kept,
text repaired by text_cleanup.clean_pdf_pages (PDFium's hyphen marks,
ligatures, running headers), section titles from the outline (bookmarks), and
OCR for pages without a usable text layer.

PDFium was chosen over pypdf by measurement on real manuals (docs/benchmarks.md,
"Parsing real documents"): pypdf ran words together on some generators' pages
("maintainerscriptsareinstalled...") and was about 18 times slower.
"""

from __future__ import annotations

import ctypes
import logging
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_raw

from engine.errors import ParseError
from engine.rag.ingest.formats.base import NO_TEXT_REASON, Heading, PageText, ParsedDocument
from engine.rag.ingest.formats.pdfium_lock import PDFIUM_LOCK, render_to_pil
from engine.rag.ingest.text_cleanup import clean_pdf_pages

log = logging.getLogger(__name__)

# `progress(done, total)` after each page that needed OCR: the sandbox takes it
# as a sign of life and the job shows it.
Progress = Callable[[int, int], None]

# A page with fewer visible characters than this and an image on it is taken
# for a scan.
_SCAN_MAX_CHARS = 20
# A text layer whose characters are mostly not letters, digits, punctuation or
# spaces is garbage (a font whose glyphs map to the wrong code points).
_GARBAGE_SHARE = 0.3
_OUTLINE_MAX = 5000  # bookmarks read at most: a hostile outline can be huge
_TITLE_LINE_SLACK = 16  # a heading line may hold this much beyond the title ("5.13 ")
# Two letters on one line further apart than this share of the line's height
# have a word space between them, whether or not the PDF drew a space. Measured
# on groff's PDFs (bash's man page): letters of one word are at most 0.05
# apart, words that PDFium ran together ("anymodifications") 0.2 and more.
_WORD_GAP = 0.12
# Pages checked for words run together before the repair is applied to a whole
# document (it costs about 10 µs a character; one generator makes a document).
_SPACE_PROBE_PAGES = 4
_PROBE_MIN_CHARS = 500
# TeX's symbol fonts in the OMS encoding (cmsy, Latin Modern's LMMathSymbols): a PDF
# without a Unicode map for them gives their glyphs' positions as ASCII letters, so
# LaTeX manuals' "\director{⟨civilité⟩}" read "\director{hcivilitéi}", a word no
# question holds.
_OMS_LETTERS = {"f": "{", "g": "}", "h": "⟨", "i": "⟩", "j": "|", "k": "‖", "n": "\\"}
_SYMBOL_FONT = re.compile(r"cmsy|mathsymbols", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class _Bookmark:
    page_index: int
    title: str


def parse_pdf(*, path: Path, data: bytes, progress: Progress | None = None) -> ParsedDocument:
    with PDFIUM_LOCK:
        document = _open(data=data)
        try:
            count = len(document)
            if count == 0:
                raise ParseError("PDF has no pages (the file may be truncated)")
            raw_pages, unread = _text_layers(document=document)
            notes: list[str] = []
            if unread:
                raw_pages = _ocr_pages(
                    document=document,
                    pages=raw_pages,
                    indexes=unread,
                    notes=notes,
                    progress=progress,
                )
            bookmarks = _bookmarks(document=document)
        finally:
            document.close()
    cleaned = clean_pdf_pages(pages=raw_pages)
    if not any(text.strip() for text in cleaned):
        raise ParseError(notes[0] if notes else NO_TEXT_REASON)
    pages = _with_headings(texts=cleaned, bookmarks=bookmarks)
    return ParsedDocument(path=path, pages=pages, page_count=len(pages), notes=tuple(notes))


def _open(*, data: bytes) -> pdfium.PdfDocument:
    # PDFium tries the empty password itself: PDFs "encrypted" only to carry
    # permissions (no printing, no copying) open; password-protected ones fail.
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        message = str(e)
        if "password" in message.lower():
            raise ParseError("PDF is encrypted (password protected)") from e
        detail = message.removeprefix("Failed to load document ").strip("() .")
        raise ParseError(f"PDF is damaged or truncated ({detail})"[:300]) from e


def _text_layers(*, document: pdfium.PdfDocument) -> tuple[list[str], list[int]]:
    """Every page's text layer, and the indexes of pages to OCR instead
    (a scan: little text and an image; or a garbage layer)."""
    texts: list[str] = []
    unread: list[int] = []
    failed = 0
    repair = True  # until the probe pages show that this document needs none
    repaired_any = False
    probed = 0  # pages with body text looked at so far (covers and blank pages do not count)
    for index in range(len(document)):
        try:
            page = document[index]
        except pdfium.PdfiumError:
            log.debug("page %d: could not be loaded", index + 1, exc_info=True)
            texts.append("")
            failed += 1
            continue
        try:
            textpage = page.get_textpage()
            text = _symbol_letters(textpage=textpage, text=textpage.get_text_range())
            if repair:
                text, inserted = _repair_spaces(textpage=textpage, text=text)
                repaired_any = repaired_any or inserted > 0
                probed += len(text) > _PROBE_MIN_CHARS
                repair = repaired_any or probed < _SPACE_PROBE_PAGES
            textpage.close()
        except pdfium.PdfiumError:  # one bad page must not lose the rest
            log.debug("page %d: text extraction failed", index + 1, exc_info=True)
            text = ""
            failed += 1
        if _is_garbage(text=text) or (
            len("".join(text.split())) < _SCAN_MAX_CHARS and _has_image(page=page)
        ):
            unread.append(index)
        texts.append(text)
        page.close()
    if failed == len(texts):
        raise ParseError(
            "PDF is damaged: no page could be read (its page tree is broken or too deep)"
        )
    return texts, unread


def _symbol_letters(*, textpage: Any, text: str) -> str:
    """`text` with the letters drawn in a TeX symbol font read as the symbols they are
    (_OMS_LETTERS)."""
    if textpage.count_chars() != len(text):  # beyond the BMP: indexes would not line up
        return text
    name = ctypes.create_string_buffer(128)
    flags = ctypes.c_int()
    symbol_font: dict[bytes, bool] = {}
    out: list[str] | None = None
    for index, ch in enumerate(text):
        if ch not in _OMS_LETTERS:
            continue
        size = pdfium_raw.FPDFText_GetFontInfo(
            textpage.raw, index, name, len(name), ctypes.byref(flags)
        )
        font = name.value if size else b""
        if font not in symbol_font:
            symbol_font[font] = bool(_SYMBOL_FONT.search(font.decode("latin-1")))
        if symbol_font[font]:
            out = out if out is not None else list(text)
            out[index] = _OMS_LETTERS[ch]
    return "".join(out) if out is not None else text


def _repair_spaces(*, textpage: Any, text: str) -> tuple[str, int]:
    """Put back the word spaces PDFium missed (PDFs that position every word
    and draw no space, as groff does); returns the text and how many spaces
    were inserted."""
    count = textpage.count_chars()
    if count != len(text):  # characters beyond the BMP: indexes would not line up
        return text, 0
    rect = pdfium_raw.FS_RECTF()
    ref = ctypes.byref(rect)
    get_box = pdfium_raw.FPDFText_GetLooseCharBox
    raw_page = textpage.raw
    out: list[str] = []
    previous: tuple[float, float, float, float] | None = None
    inserted = 0
    for index, ch in enumerate(text):
        if not ch.isalnum():
            previous = None
            out.append(ch)
            continue
        get_box(raw_page, index, ref)
        box = (rect.left, rect.right, rect.bottom, rect.top)
        if previous is not None:
            _, right, bottom, top = previous
            height = top - bottom
            same_line = box[2] < top and box[3] > bottom
            if same_line and height > 0 and box[0] - right > _WORD_GAP * height:
                out.append(" ")
                inserted += 1
        out.append(ch)
        previous = box
    return "".join(out), inserted


def _has_image(*, page: Any) -> bool:
    return any(obj.type == pdfium_raw.FPDF_PAGEOBJ_IMAGE for obj in page.get_objects(max_depth=2))


def _is_garbage(*, text: str) -> bool:
    visible = [ch for ch in text if not ch.isspace() and ch not in "\ufffe\x02"]
    if len(visible) < _SCAN_MAX_CHARS:
        return False
    odd = sum(1 for ch in visible if unicodedata.category(ch)[0] not in "LNP")
    return odd > _GARBAGE_SHARE * len(visible)


def _ocr_pages(
    *,
    document: pdfium.PdfDocument,
    pages: list[str],
    indexes: list[int],
    notes: list[str],
    progress: Progress | None,
) -> list[str]:
    from engine.rag.ingest.ocr import OCR_DPI, ocr_available, read_image

    if not ocr_available():
        notes.append(
            f"{len(indexes)} page(s) without a text layer were skipped (OCR is not installed)"
        )
        skipped = set(indexes)
        return [("" if i in skipped else text) for i, text in enumerate(pages)]
    out = list(pages)
    if progress is not None:
        # The text layers took their time already: the limit starts again for
        # loading the model and reading the first page.
        progress(0, len(indexes))
    for done, index in enumerate(indexes, start=1):
        page = document[index]
        try:
            image = render_to_pil(page=page, scale=OCR_DPI / 72)
        finally:
            page.close()
        read = read_image(image=image).text
        # A "garbage" layer may be a real table of symbols (a font's encoding
        # chart): OCR replaces it only where it reads more letters and digits.
        if _alnum(read) >= _alnum(pages[index]):
            out[index] = read
        if progress is not None:
            progress(done, len(indexes))
    notes.append(f"{len(indexes)} page(s) read by OCR (no usable text layer)")
    return out


def _alnum(text: str) -> int:
    return sum(1 for ch in text if ch.isalnum())


def _bookmarks(*, document: pdfium.PdfDocument) -> list[_Bookmark]:
    found: list[_Bookmark] = []
    try:
        for item in document.get_toc():
            dest = item.get_dest()
            index = dest.get_index() if dest is not None else None
            title = " ".join((item.get_title() or "").split())
            if index is not None and title:
                found.append(_Bookmark(page_index=index, title=title))
            if len(found) >= _OUTLINE_MAX:
                break
    except pdfium.PdfiumError:  # a broken outline costs the section titles only
        log.debug("outline unreadable", exc_info=True)
    return found


def _with_headings(*, texts: list[str], bookmarks: list[_Bookmark]) -> list[PageText]:
    """Pages with their outline entries placed: at the line that shows the
    title (taking the whole line, so "5.13 " numbering is kept), else at the
    top of the page the bookmark points to."""
    by_page: dict[int, list[str]] = {}
    for mark in bookmarks:
        if 0 <= mark.page_index < len(texts):
            by_page.setdefault(mark.page_index, []).append(mark.title)
    pages: list[PageText] = []
    for index, text in enumerate(texts):
        headings: list[Heading] = []
        at = 0
        for title in by_page.get(index, ()):
            heading = _place(text=text, title=title, start=at)
            headings.append(heading)
            at = max(at, heading.offset)
        headings.sort(key=lambda h: h.offset)
        pages.append(PageText(number=index + 1, text=text, headings=tuple(headings)))
    return pages


def _place(*, text: str, title: str, start: int) -> Heading:
    folded = text.casefold()
    pos = folded.find(title.casefold(), start)
    if pos < 0:
        pos = folded.find(title.casefold())
    if pos < 0:
        return Heading(offset=start, title=title)
    line_start = text.rfind("\n", 0, pos) + 1
    line_end = text.find("\n", pos)
    line = text[line_start : line_end if line_end >= 0 else len(text)].strip()
    if len(line) <= len(title) + _TITLE_LINE_SLACK:
        return Heading(offset=line_start, title=line)
    return Heading(offset=pos, title=title)
