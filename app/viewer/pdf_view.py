"""A PDF page as an image, with the cited passage highlighted, paging and zoom.

Rendering happens in `PdfRenderer`'s worker; this widget only asks and shows.
Zoom is "fit width" until the person zooms by hand (buttons or Ctrl+wheel).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QPixmap, QShortcut, QWheelEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.qt_compat import emit
from app.viewer.pdf_render import PageRequest, PdfRenderer, RenderedPage

ZOOM_STEP = 1.25
MIN_ZOOM, MAX_ZOOM = 0.25, 5.0


class PdfPageView(QWidget):
    sig_page_changed = Signal(int)
    sig_rendered = Signal(object)  # RenderedPage, once it is on screen

    def __init__(self, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.renderer = PdfRenderer(parent=self)
        self.renderer.sig_rendered.connect(self._on_rendered)
        self._path = ""
        self._page = 1
        self._page_count = 0
        self._cited_page = 0
        self._passage = ""
        self._zoom = 1.0  # pixels per point, before the device pixel ratio
        self._fit_width = True
        self._size_pt: tuple[float, float] | None = None
        self.shown: RenderedPage | None = None
        self._resize_timer = QTimer(self)
        self._resize_timer.setSingleShot(True)
        self._resize_timer.setInterval(120)
        self._resize_timer.timeout.connect(self._refit)

        self.prev_button = QPushButton("‹ Previous")
        self.prev_button.setAccessibleName("Previous page")
        self.prev_button.setToolTip("Previous page (Page Up)")
        self.prev_button.clicked.connect(lambda: self.go_to(self._page - 1))
        self.next_button = QPushButton("Next ›")
        self.next_button.setAccessibleName("Next page")
        self.next_button.setToolTip("Next page (Page Down)")
        self.next_button.clicked.connect(lambda: self.go_to(self._page + 1))
        self.page_box = QSpinBox()
        self.page_box.setAccessibleName("Page number")
        self.page_box.setKeyboardTracking(False)
        self.page_box.valueChanged.connect(self.go_to)
        self.page_of = QLabel("")
        self.page_of.setObjectName("pageInfo")
        self.zoom_out_button = QPushButton("−")
        self.zoom_out_button.setAccessibleName("Zoom out")
        self.zoom_out_button.setToolTip("Zoom out (Ctrl+−, Ctrl+wheel)")
        self.zoom_out_button.clicked.connect(lambda: self.set_zoom(self._zoom / ZOOM_STEP))
        self.zoom_label = QLabel("100%")
        self.zoom_label.setObjectName("pageInfo")
        self.zoom_label.setMinimumWidth(44)
        self.zoom_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.zoom_in_button = QPushButton("+")
        self.zoom_in_button.setAccessibleName("Zoom in")
        self.zoom_in_button.setToolTip("Zoom in (Ctrl++, Ctrl+wheel)")
        self.zoom_in_button.clicked.connect(lambda: self.set_zoom(self._zoom * ZOOM_STEP))
        self.fit_button = QPushButton("Fit width")
        self.fit_button.setAccessibleName("Fit the page to the width")
        self.fit_button.clicked.connect(self.fit_width)
        self.status = QLabel("")
        self.status.setObjectName("pageInfo")

        self.image = QLabel()
        self.image.setAccessibleName("Page image")
        self.image.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.scroll = QScrollArea()
        self.scroll.setObjectName("pdfScroll")
        self.scroll.setWidget(self.image)
        self.scroll.setWidgetResizable(True)
        self.scroll.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.scroll.viewport().installEventFilter(self)

        bar = QHBoxLayout()
        bar.setSpacing(4)
        bar.addWidget(self.prev_button)
        bar.addWidget(self.page_box)
        bar.addWidget(self.page_of)
        bar.addWidget(self.next_button)
        bar.addStretch(1)
        bar.addWidget(self.status)
        bar.addStretch(1)
        bar.addWidget(self.zoom_out_button)
        bar.addWidget(self.zoom_label)
        bar.addWidget(self.zoom_in_button)
        bar.addWidget(self.fit_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addLayout(bar)
        layout.addWidget(self.scroll, 1)

        for seq, slot in (
            (QKeySequence.StandardKey.ZoomIn, lambda: self.set_zoom(self._zoom * ZOOM_STEP)),
            (QKeySequence.StandardKey.ZoomOut, lambda: self.set_zoom(self._zoom / ZOOM_STEP)),
            (QKeySequence(Qt.Key.Key_PageUp), lambda: self.go_to(self._page - 1)),
            (QKeySequence(Qt.Key.Key_PageDown), lambda: self.go_to(self._page + 1)),
        ):
            shortcut = QShortcut(QKeySequence(seq), self)
            shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(slot)

    # -- state -------------------------------------------------------------------------

    @property
    def page(self) -> int:
        return self._page

    @property
    def page_count(self) -> int:
        return self._page_count

    @property
    def zoom(self) -> float:
        return self._zoom

    # -- what the viewer asks -----------------------------------------------------------

    def show_page(self, *, path: str, page: int, page_count: int, passage: str) -> None:
        """Show `page` of `path` with `passage` highlighted on it."""
        if path != self._path:
            self._size_pt = None
            self._fit_width = True
        self._path = path
        self._cited_page = page
        self._passage = passage
        self._page_count = max(page_count, page)
        self._set_page(page)

    def go_to(self, page: int) -> None:
        if self._path and 1 <= page <= max(self._page_count, 1) and page != self._page:
            self._set_page(page)

    def set_zoom(self, zoom: float) -> None:
        self._fit_width = False
        self._zoom = min(max(zoom, MIN_ZOOM), MAX_ZOOM)
        self._request()

    def fit_width(self) -> None:
        self._fit_width = True
        self._refit()

    # -- internals -------------------------------------------------------------------------

    def _set_page(self, page: int) -> None:
        self._page = page
        self.page_box.blockSignals(True)
        self.page_box.setRange(1, max(self._page_count, 1))
        self.page_box.setValue(page)
        self.page_box.blockSignals(False)
        self.page_of.setText(f"of {self._page_count}")
        self.prev_button.setEnabled(page > 1)
        self.next_button.setEnabled(page < self._page_count)
        emit(self.sig_page_changed, page)
        self._refit() if self._fit_width else self._request()

    def _refit(self) -> None:
        if not self._fit_width:
            return
        if self._size_pt is not None:
            room = self.scroll.viewport().width() - 24
            self._zoom = min(max(room / self._size_pt[0], MIN_ZOOM), MAX_ZOOM)
        self._request()

    def _request(self) -> None:
        if not self._path:
            return
        self.zoom_label.setText(f"{self._zoom:.0%}")
        self.status.setText("Rendering…")
        dpr = self.devicePixelRatioF()
        self.renderer.request(
            PageRequest(
                path=self._path,
                page=self._page,
                scale=round(self._zoom * dpr, 3),
                passage=self._passage if self._page == self._cited_page else "",
            )
        )

    def _on_rendered(self, page: RenderedPage) -> None:
        request = page.request
        if request.path != self._path or request.page != self._page:
            return  # an older request, overtaken
        if page.error:
            self.status.setText(f"Could not render this page: {page.error}")
            self.image.setPixmap(QPixmap())
            return
        self._page_count = page.page_count
        self.page_box.setMaximum(page.page_count)
        self.page_of.setText(f"of {page.page_count}")
        self.next_button.setEnabled(self._page < page.page_count)
        first_size = self._size_pt is None
        self._size_pt = page.size_pt
        if first_size and self._fit_width:
            # The first render used a guess; now the page's width is known.
            self._refit()
        pixmap = QPixmap.fromImage(page.image)  # the passage is already painted in
        pixmap.setDevicePixelRatio(self.devicePixelRatioF())
        self.image.setPixmap(pixmap)
        self.shown = page
        if request.passage and not page.found:
            self.status.setText("The passage could not be located on the page image")
        else:
            self.status.setText("")
        if page.highlights:
            self._scroll_to(page)
        emit(self.sig_rendered, page)

    def _scroll_to(self, page: RenderedPage) -> None:
        """Put the first highlighted line about a third of the way down."""
        dpr = self.devicePixelRatioF()
        top = min(r.top() for r in page.highlights) / dpr
        offset = max(0, (self.image.height() - page.image.height() / dpr) / 2)

        def scroll() -> None:
            bar = self.scroll.verticalScrollBar()
            bar.setValue(int(offset + top - self.scroll.viewport().height() / 3))

        # With the scroll area as context: a viewer closed before the timer fires
        # drops the call instead of reaching a deleted widget.
        QTimer.singleShot(0, self.scroll, scroll)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.scroll.viewport():
            if event.type() == QEvent.Type.Wheel:
                assert isinstance(event, QWheelEvent)
                if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
                    step = ZOOM_STEP if event.angleDelta().y() > 0 else 1 / ZOOM_STEP
                    self.set_zoom(self._zoom * step)
                    return True
            elif event.type() == QEvent.Type.Resize and self._fit_width:
                self._resize_timer.start()
        return super().eventFilter(watched, event)
