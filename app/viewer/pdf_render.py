"""Rendering PDF pages with pypdfium2, off the GUI thread.

pdfium is not thread-safe, so one worker thread makes every pdfium call, taking
requests from a queue; the newest request wins (paging quickly through a file
renders only the page that is finally shown). Rendered pages are cached.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import OrderedDict
from dataclasses import dataclass

from PySide6.QtCore import QObject, QRectF, Signal
from PySide6.QtGui import QColor, QImage, QPainter

from app.door import Door
from app.qt_compat import emit
from app.viewer.passage_match import locate
from engine.rag.ingest.formats.pdfium_lock import PDFIUM_LOCK, render_to_pil

log = logging.getLogger(__name__)

CACHE_PAGES = 12
MAX_SCALE = 8.0
HIGHLIGHT_FILL = QColor(255, 200, 0, 90)
HIGHLIGHT_EDGE = QColor(230, 150, 0, 200)


@dataclass(frozen=True, kw_only=True)
class PageRequest:
    path: str
    page: int  # 1-based
    scale: float  # pixels per PDF point (zoom x device pixel ratio)
    passage: str = ""  # text to highlight on this page, "" for none


@dataclass(frozen=True, kw_only=True)
class RenderedPage:
    request: PageRequest
    page_count: int
    image: QImage
    size_pt: tuple[float, float]
    highlights: tuple[QRectF, ...]  # in image pixels
    found: bool  # the passage was located (False when none was asked for)
    text: str  # pdfium's text of the page
    error: str = ""


def render_page(request: PageRequest) -> RenderedPage:
    """Render one page and locate the passage (blocking: call from the worker)."""
    with PDFIUM_LOCK:
        return _render_page(request)


def _render_page(request: PageRequest) -> RenderedPage:
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    pdf = pdfium.PdfDocument(request.path)
    try:
        count = len(pdf)
        index = min(max(request.page, 1), count) - 1
        page = pdf[index]
        try:
            size = page.get_size()
            scale = min(max(request.scale, 0.1), MAX_SCALE)
            bitmap = page.render(scale=scale, prefer_bgrx=True)
            image = QImage(
                bitmap.buffer,
                bitmap.width,
                bitmap.height,
                bitmap.stride,
                QImage.Format.Format_RGB32,
            ).copy()  # the bitmap's buffer is freed with it
            textpage = page.get_textpage()
            chars = [
                chr(raw.FPDFText_GetUnicode(textpage.raw, i)) for i in range(textpage.count_chars())
            ]
            highlights: list[QRectF] = []
            span = locate(chars=chars, passage=request.passage) if request.passage else None
            if span is not None:
                conv = bitmap.get_posconv(page)
                first, last = span
                for r in range(textpage.count_rects(first, last - first + 1)):
                    left, bottom, right, top = textpage.get_rect(r)
                    x0, y0 = conv.to_bitmap(left, top)
                    x1, y1 = conv.to_bitmap(right, bottom)
                    highlights.append(QRectF(x0, y0, x1 - x0, y1 - y0).normalized())
            textpage.close()
            bitmap.close()  # here, under the lock, not by a finalizer on another thread
            if span is None and request.passage and not "".join(chars).strip():
                # A scanned page: the engine read it by OCR, so the passage is
                # found again in OCR's lines and their boxes are highlighted.
                highlights, ocr_text = _ocr_highlights(
                    page=page, passage=request.passage, width=image.width(), height=image.height()
                )
                chars = list(ocr_text)
                span = (0, 0) if highlights else None
            _paint_highlights(image=image, rects=highlights)
        finally:
            page.close()
    finally:
        pdf.close()
    return RenderedPage(
        request=request,
        page_count=count,
        image=image,
        size_pt=(float(size[0]), float(size[1])),
        highlights=tuple(highlights),
        found=span is not None,
        text="".join(chars).replace("\r\n", "\n"),
    )


def _ocr_highlights(
    *, page: object, passage: str, width: int, height: int
) -> tuple[list[QRectF], str]:
    """Boxes (in image pixels) of the OCR lines that hold `passage` on a page
    without a text layer, and the page's OCR text; none when OCR is not
    installed or does not find the passage."""
    try:
        from engine.rag.ingest.ocr import OCR_DPI, ocr_available, read_image
    except ImportError:
        return [], ""
    if not ocr_available():
        return [], ""
    # Read at the engine's resolution, so the text is the one the passage came from.
    ocr = read_image(image=render_to_pil(page=page, scale=OCR_DPI / 72))
    chars: list[str] = []
    owner: list[int] = []
    for number, line in enumerate(ocr.lines):
        for ch in line.text + "\n":
            chars.append(ch)
            owner.append(number)
    span = locate(chars=chars, passage=passage)
    if span is None:
        return [], ocr.text
    rects = [
        QRectF(
            line.left * width,
            line.top * height,
            (line.right - line.left) * width,
            (line.bottom - line.top) * height,
        )
        for line in ocr.lines[owner[span[0]] : owner[span[1]] + 1]
    ]
    return rects, ocr.text


def _paint_highlights(*, image: QImage, rects: list[QRectF]) -> None:
    """Here in the worker, not on the GUI thread: at high zoom a page is tens of
    megabytes and multiply-blending boxes onto it takes longer than a frame."""
    if not rects:
        return
    painter = QPainter(image)
    painter.setPen(HIGHLIGHT_EDGE)
    painter.setBrush(HIGHLIGHT_FILL)
    painter.setCompositionMode(QPainter.CompositionMode.CompositionMode_Multiply)
    for rect in rects:
        painter.drawRect(rect.adjusted(-1, -1, 1, 1))
    painter.end()


class PdfRenderer(QObject):
    """Renders in one worker thread; `sig_rendered` arrives on the GUI thread."""

    sig_rendered = Signal(object)  # RenderedPage
    _sig_done = Signal(object)  # worker -> GUI thread: cache it, then announce it

    def __init__(self, *, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._queue: queue.Queue[PageRequest | None] = queue.Queue()
        self._latest: PageRequest | None = None
        self._door = Door()
        self._lock = threading.Lock()
        self._cache: OrderedDict[PageRequest, RenderedPage] = OrderedDict()
        self._thread: threading.Thread | None = None
        # A plain object's method: Qt does not call back into one being destroyed.
        self.destroyed.connect(self._door.close)
        self.destroyed.connect(lambda *_: self._queue.put(None))
        self._sig_done.connect(self._store)

    def request(self, request: PageRequest) -> None:
        """Render `request`; from the cache at once when it is there."""
        cached = self._cache.get(request)
        with self._lock:
            self._latest = request
        if cached is not None:
            self._cache.move_to_end(request)
            emit(self.sig_rendered, cached)
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="ragdoll-pdf", daemon=True)
            self._thread.start()
        self._queue.put(request)

    def close(self) -> None:
        self._door.close()
        self._queue.put(None)

    def _work(self) -> None:
        done: PageRequest | None = None
        while True:
            request = self._queue.get()
            if request is None:
                return
            with self._lock:
                if request != self._latest or request == done:
                    continue  # superseded before it started, or asked for twice
            done = request
            try:
                page = render_page(request)
            except Exception as e:
                log.exception("could not render page %s of %s", request.page, request.path)
                page = RenderedPage(
                    request=request,
                    page_count=0,
                    image=QImage(),
                    size_pt=(0.0, 0.0),
                    highlights=(),
                    found=False,
                    text="",
                    error=f"{type(e).__name__}: {e}",
                )
            self._door.call(lambda done=page: emit(self._sig_done, done))

    def _store(self, page: RenderedPage) -> None:
        if not page.error:
            self._cache[page.request] = page
            while len(self._cache) > CACHE_PAGES:
                self._cache.popitem(last=False)
        emit(self.sig_rendered, page)
