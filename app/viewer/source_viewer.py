"""The source viewer: the cited page with the passage highlighted.

A PDF shows its page rendered (pypdfium2, in a worker) with the passage drawn
over it, and can switch to the page's text; other formats show their text,
scrolled to the passage and highlighted."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import (
    QColor,
    QDesktopServices,
    QKeySequence,
    QShortcut,
    QTextCharFormat,
    QTextCursor,
)
from PySide6.QtWidgets import (
    QButtonGroup,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QStackedWidget,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.chat.answer_render import page_title
from app.screen_fit import resize_within_screen
from app.viewer.find_bar import FindBar
from app.viewer.pdf_render import RenderedPage
from app.viewer.pdf_view import PdfPageView
from engine.wire import SourceView

log = logging.getLogger(__name__)

HIGHLIGHT = QColor("#ffe58a")

OpenAtPage = Callable[..., object]
# Opens a file in its own application; False when the system has none for it.
OpenFile = Callable[[str], bool]


def system_open_file(path: str) -> bool:
    return QDesktopServices.openUrl(QUrl.fromLocalFile(path))


def native_open_at_page() -> OpenAtPage | None:
    """native.open_at_page(path=, page=) when the installed app has it."""
    try:
        from native import open_at_page  # type: ignore[attr-defined]
    except ImportError:
        return None
    return open_at_page  # type: ignore[no-any-return]


def is_pdf(*, path: str) -> bool:
    return path.lower().endswith(".pdf") and Path(path).is_file()


def qt_span(*, text: str, start: int, end: int) -> tuple[str, int, int]:
    """The text as Qt will hold it, and the span in Qt's positions.

    The engine's offsets count Python characters; a QTextDocument counts UTF-16
    code units and turns "\\r\\n" into one paragraph break. Both shift every
    position after them, so convert rather than trust the numbers."""
    start = max(0, min(start, len(text)))
    end = max(start, min(end, len(text)))

    def qt_pos(index: int) -> int:
        prefix = text[:index]
        return len(prefix.encode("utf-16-le")) // 2 - prefix.count("\r\n")

    return text.replace("\r\n", "\n"), qt_pos(start), qt_pos(end)


class SourceViewer(QDialog):
    """Non-modal, reused for every click so that sources do not pile up in windows."""

    def __init__(
        self,
        *,
        open_at_page: OpenAtPage | None = None,
        open_file: OpenFile = system_open_file,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("sourceViewer")
        self.setWindowTitle("Source")
        self.setModal(False)
        resize_within_screen(widget=self, width=900, height=760)
        self._source: SourceView | None = None
        self._open_at_page = open_at_page or native_open_at_page()
        self._open_file_with = open_file
        self._page_texts: dict[int, str] = {}

        self.title_label = QLabel()
        self.title_label.setObjectName("viewerTitle")
        self.title_label.setTextFormat(Qt.TextFormat.PlainText)
        self.path_label = QLabel()
        self.path_label.setObjectName("quiet")
        self.path_label.setTextFormat(Qt.TextFormat.PlainText)
        self.path_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.path_label.setWordWrap(True)
        # What happened when a button could not do its job (no system viewer, …).
        self.message_label = QLabel()
        self.message_label.setObjectName("errorText")
        self.message_label.setAccessibleName("Viewer message")
        self.message_label.setTextFormat(Qt.TextFormat.PlainText)
        self.message_label.setWordWrap(True)
        self.message_label.hide()

        self.image_mode = QPushButton("Page image")
        self.image_mode.setAccessibleName("Show the page as an image")
        self.text_mode = QPushButton("Page text")
        self.text_mode.setAccessibleName("Show the page as text")
        self.mode_group = QButtonGroup(self)
        for i, button in enumerate((self.image_mode, self.text_mode)):
            button.setCheckable(True)
            self.mode_group.addButton(button, i)
        self.image_mode.setChecked(True)
        self.mode_group.idToggled.connect(self._on_mode)
        modes = QHBoxLayout()
        modes.setSpacing(0)
        modes.addWidget(self.image_mode)
        modes.addWidget(self.text_mode)
        modes.addStretch(1)
        self.modes = QWidget()
        self.modes.setLayout(modes)
        modes.setContentsMargins(0, 0, 0, 0)

        self.text = QTextEdit()
        self.text.setObjectName("pageText")
        self.text.setAccessibleName("Page text")
        self.text.setReadOnly(True)
        self.text.setLineWrapMode(QTextEdit.LineWrapMode.WidgetWidth)
        self.text.document().setDocumentMargin(16)

        self.find_bar = FindBar(target=self.text)
        self.find_bar.before_search = self._text_for_find
        self.find_bar.sig_cleared.connect(self._scroll_to_highlight)
        find = QShortcut(QKeySequence(QKeySequence.StandardKey.Find), self)
        find.activated.connect(self.find_bar.start)

        self.pdf = PdfPageView()
        self.pdf.sig_page_changed.connect(self._on_pdf_page)
        self.pdf.sig_rendered.connect(self._on_pdf_rendered)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.text)
        self.stack.addWidget(self.pdf)

        buttons = QDialogButtonBox()
        self.open_page_button = QPushButton("Open at this page")
        self.open_page_button.setAccessibleName("Open the file in the system viewer at this page")
        self.open_page_button.setToolTip("Open the document in the system's viewer at this page")
        self.open_page_button.clicked.connect(self.open_at_page)
        buttons.addButton(self.open_page_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.open_button = QPushButton("Open file")
        self.open_button.setAccessibleName("Open the file in its own application")
        self.open_button.clicked.connect(self._open_file)
        buttons.addButton(self.open_button, QDialogButtonBox.ButtonRole.ActionRole)
        # A plain button: the standard Close carries an icon on some styles and
        # would not match "Open file" beside it.
        close = QPushButton("Close")
        close.clicked.connect(self.close)
        buttons.addButton(close, QDialogButtonBox.ButtonRole.RejectRole)

        layout = QVBoxLayout(self)
        layout.setSpacing(6)
        layout.addWidget(self.title_label)
        layout.addWidget(self.path_label)
        layout.addWidget(self.modes)
        layout.addWidget(self.find_bar)
        layout.addWidget(self.stack, 1)
        layout.addWidget(self.message_label)
        layout.addWidget(buttons)

    @property
    def source(self) -> SourceView | None:
        return self._source

    @property
    def showing_image(self) -> bool:
        return self.stack.currentWidget() is self.pdf

    def show_source(self, source: SourceView) -> None:
        self._source = source
        self.message_label.hide()
        self._page_texts = {}
        self.setWindowTitle(page_title(path=source.path, page=source.page))
        exists = Path(source.path).exists()
        self.open_button.setEnabled(exists)
        self.open_page_button.setEnabled(exists)
        self.open_page_button.setVisible(source.page is not None)
        self._show_where(page=source.page)

        pdf = is_pdf(path=source.path) and source.page is not None
        self.modes.setVisible(pdf)
        self._show_text(text=source.page_text, start=source.char_start, end=source.char_end)
        if pdf:
            assert source.page is not None
            passage = source.page_text[source.char_start : source.char_end]
            self.pdf.show_page(
                path=source.path,
                page=source.page,
                page_count=source.page_count or source.page,
                passage=passage,
            )
        self.stack.setCurrentWidget(self.pdf if pdf and self.image_mode.isChecked() else self.text)
        self.show()
        self.raise_()
        self.activateWindow()
        if not self.showing_image:
            # Scroll once the dialog has its size, or "centre" means nothing.
            self._scroll_to_highlight()

    def _show_where(self, *, page: int | None) -> None:
        source = self._source
        if source is None:
            return
        title = page_title(path=source.path, page=page)
        self.title_label.setText(title)
        where = source.path
        if page is not None and source.page_count is not None:
            where = f"{source.path}  ·  page {page} of {source.page_count}"
        self.path_label.setText(where)

    def _show_text(self, *, text: str, start: int, end: int) -> None:
        qt_text, qs, qe = qt_span(text=text, start=start, end=end)
        self.text.setPlainText(qt_text)
        self._highlight(start=qs, end=qe)

    def _text_for_find(self) -> None:
        """A search shows the page as text, where its matches can be selected."""
        if self.showing_image:
            self.text_mode.setChecked(True)

    def _on_mode(self, button_id: int, checked: bool) -> None:
        if not checked or self._source is None or not self.modes.isVisible():
            return
        self.stack.setCurrentWidget(self.pdf if button_id == 0 else self.text)
        if button_id == 1:
            self._scroll_to_highlight()

    def _on_pdf_page(self, page: int) -> None:
        """Paging in the image: the text view follows with pdfium's text of that page."""
        source = self._source
        if source is None:
            return
        self._show_where(page=page)
        if page == source.page:
            self._show_text(text=source.page_text, start=source.char_start, end=source.char_end)
        else:
            self._show_text(text=self._page_texts.get(page, ""), start=0, end=0)

    def _on_pdf_rendered(self, rendered: object) -> None:
        if not isinstance(rendered, RenderedPage) or self._source is None:
            return
        page = rendered.request.page
        self._page_texts[page] = rendered.text
        if page != self._source.page and self.pdf.page == page:
            self._show_text(text=rendered.text, start=0, end=0)

    def _scroll_to_highlight(self) -> None:
        selections = self.text.extraSelections()
        if selections:
            c = selections[0].cursor
            self._scroll_to(start=c.selectionStart(), end=c.selectionEnd())

    def current_page(self) -> int | None:
        if self._source is None:
            return None
        return self.pdf.page if self.modes.isVisible() else self._source.page

    def open_at_page(self) -> None:
        """The system's viewer at the page on screen; without a page if it cannot.
        When nothing can open it, the viewer says so (not only the log)."""
        if self._source is None:
            return
        self.message_label.hide()
        page = self.current_page()
        if self._open_at_page is not None and page is not None:
            try:
                command = self._open_at_page(path=self._source.path, page=page)
            except Exception as e:
                log.warning("could not open %s at page %s: %s", self._source.path, page, e)
            else:
                if getattr(command, "honours_page", True) is False:
                    self._say(
                        f"Opened in the system's viewer at its first page: no PDF viewer "
                        f"that takes a page number was found (evince, okular, zathura…). "
                        f"The passage is on page {page}."
                    )
                return
        self._open_file()

    def _open_file(self) -> None:
        if self._source is None:
            return
        self.message_label.hide()
        if not self._open_file_with(self._source.path):
            self._say(
                f"No program on this computer opens {Path(self._source.path).suffix or 'this'} "
                "files (the system has no viewer for them): install one, such as a PDF "
                "viewer, or read the page here."
            )

    def _say(self, message: str) -> None:
        self.message_label.setText(message)
        self.message_label.show()

    def _highlight(self, *, start: int, end: int) -> None:
        cursor = QTextCursor(self.text.document())
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        selection = QTextEdit.ExtraSelection()
        selection.cursor = cursor
        fmt = QTextCharFormat()
        fmt.setBackground(HIGHLIGHT)
        fmt.setForeground(QColor("#1f2328"))
        selection.format = fmt
        self.text.setExtraSelections([selection] if end > start else [])

    def _scroll_to(self, *, start: int, end: int) -> None:
        """Put the passage's first line about a third of the way down."""
        cursor = QTextCursor(self.text.document())
        cursor.setPosition(end)
        self.text.setTextCursor(cursor)
        self.text.ensureCursorVisible()
        cursor.setPosition(start)
        self.text.setTextCursor(cursor)
        self.text.ensureCursorVisible()
        top = self.text.cursorRect(cursor).top()
        bar = self.text.verticalScrollBar()
        bar.setValue(bar.value() + top - self.text.viewport().height() // 3)
