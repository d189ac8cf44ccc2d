"""The chat pane: the conversation, the question box, and the sources of the last answer.

It knows nothing of the engine: the main window feeds it (`begin_answer`,
`append_token`, ...) and listens to its `sig_*` signals.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QModelIndex, Qt, QUrl, Signal
from PySide6.QtGui import (
    QKeySequence,
    QShortcut,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
)
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.chat.answer_render import answer_html, chunk_id_from_href
from app.chat.sources_model import CHUNK_ID_ROLE, SourceDelegate, SourcesModel
from app.qt_compat import emit
from engine.wire import AnswerDone, Citation

_TRANSCRIPT_CSS = """
.question { font-weight: 600; }
.who { color: #5b6472; font-size: small; }
.note { color: #6b7280; font-size: small; }
.failed { color: #b42318; }
.pending { color: #6b7280; font-style: italic; }
a { color: #1d5fd1; text-decoration: none; }
"""


class ChatPane(QWidget):
    """Questions and streamed answers with clickable [n] markers and sources."""

    sig_ask = Signal(str)
    sig_stop = Signal()
    sig_open_source = Signal(str)  # chunk id

    def __init__(self, *, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._answer_start = -1  # document position where the streaming answer begins
        self._answer_text = ""
        self._citations: list[Citation] = []
        self._streaming = False
        self._ready = False

        self.transcript = QTextBrowser()
        self.transcript.setObjectName("transcript")
        self.transcript.setAccessibleName("Conversation")
        self.transcript.setOpenLinks(False)  # citation links are ours, not URLs to follow
        self.transcript.document().setDefaultStyleSheet(_TRANSCRIPT_CSS)
        self.transcript.document().setDocumentMargin(14)
        self.transcript.anchorClicked.connect(self._on_anchor)
        self.transcript.setPlaceholderText(
            "Ask a question about your documents. Answers cite their sources as [1], [2]…"
        )

        self.sources_label = QLabel("Sources")
        self.sources_label.setObjectName("sectionTitle")
        self.sources_model = SourcesModel(parent=self)
        self.sources = QListView()
        self.sources.setObjectName("sources")
        self.sources.setAccessibleName("Sources of the answer")
        self.sources.setModel(self.sources_model)
        self.sources.setItemDelegate(SourceDelegate(self.sources))
        self.sources.setMouseTracking(True)
        self.sources.clicked.connect(self._on_source_index)
        self.sources.activated.connect(self._on_source_index)

        self.question = QLineEdit()
        self.question.setObjectName("question")
        self.question.setAccessibleName("Question")
        self.question.setPlaceholderText("Ask about your documents…")
        self.question.setClearButtonEnabled(True)
        self.question.returnPressed.connect(self._on_ask)
        self.question.textChanged.connect(self._update_buttons)
        self.ask_button = QPushButton("Ask")
        self.ask_button.setObjectName("askButton")
        self.ask_button.setAccessibleName("Ask")
        self.ask_button.setDefault(True)
        self.ask_button.clicked.connect(self._on_ask)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setAccessibleName("Stop the answer")
        self.stop_button.clicked.connect(self._on_stop)
        self.stop_button.setToolTip("Stop the answer (Esc)")
        stop_key = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        stop_key.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        stop_key.activated.connect(self._on_stop)

        sources_box = QWidget()
        sources_layout = QVBoxLayout(sources_box)
        sources_layout.setContentsMargins(0, 6, 0, 0)
        sources_layout.setSpacing(4)
        sources_layout.addWidget(self.sources_label)
        sources_layout.addWidget(self.sources)

        split = QSplitter()
        split.setOrientation(split.orientation().Vertical)
        split.setChildrenCollapsible(False)
        split.addWidget(self.transcript)
        split.addWidget(sources_box)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        split.setSizes([430, 290])

        ask_row = QHBoxLayout()
        ask_row.setSpacing(6)
        ask_row.addWidget(self.question, 1)
        ask_row.addWidget(self.ask_button)
        ask_row.addWidget(self.stop_button)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        layout.addWidget(split, 1)
        layout.addLayout(ask_row)
        self._update_buttons()

    # -- state -------------------------------------------------------------------

    @property
    def streaming(self) -> bool:
        return self._streaming

    @property
    def answer_text(self) -> str:
        """The raw text of the answer being (or last) streamed."""
        return self._answer_text

    def set_ready(self, ready: bool) -> None:
        """Whether the engine can take questions."""
        self._ready = ready
        self._update_buttons()

    def _update_buttons(self) -> None:
        can_ask = self._ready and not self._streaming
        # The question box stays editable while an answer streams: the next
        # question can be typed meanwhile; only sending it waits.
        self.ask_button.setEnabled(can_ask and bool(self.question.text().strip()))
        self.stop_button.setEnabled(self._streaming)
        self.stop_button.setVisible(self._streaming)

    # -- the conversation ---------------------------------------------------------

    def begin_answer(self, *, question: str) -> None:
        """Show the question and a placeholder where the answer will stream in."""
        self._streaming = True
        self._answer_text = ""
        self._citations = []
        self.sources_model.set_citations([])
        self.sources_label.setText("Sources")
        cursor = self._end_cursor()
        if self.transcript.document().isEmpty():
            cursor.setBlockFormat(_spaced(top=0))
        else:
            cursor.insertBlock(_spaced(top=22))
        cursor.insertHtml('<span class="who">You</span>')
        cursor.insertBlock(_spaced(top=2))
        cursor.insertHtml(f'<span class="question">{_escape(question)}</span>')
        cursor.insertBlock(_spaced(top=14))
        cursor.insertHtml('<span class="who">RAGDoll</span>')
        cursor.insertBlock(_spaced(top=2))
        self._answer_start = cursor.position()
        cursor.insertHtml('<span class="pending">Searching your documents…</span>')
        self._scroll_to_end()
        self._update_buttons()

    def set_citations(self, citations: list[Citation]) -> None:
        self._citations = list(citations)
        self.sources_model.set_citations(self._citations)
        self.sources_label.setText(f"Sources ({len(citations)})" if citations else "Sources")
        if self._answer_text:
            self._render_answer()

    def append_token(self, text: str) -> None:
        if not self._streaming:
            return
        self._answer_text += text
        self._render_answer()

    def finish_answer(self, *, done: AnswerDone) -> None:
        """The final text replaces the streamed one (they agree unless tokens were lost)."""
        if done.answer:
            self._answer_text = done.answer
        self._render_answer()
        if not self._answer_text:
            self._replace_answer('<span class="note">(no answer)</span>')
        if done.note:
            cursor = self._end_cursor()
            cursor.insertBlock(_spaced(top=8))
            cursor.insertHtml(f'<span class="note">{_escape(done.note)}</span>')
        self._end_stream()

    def fail_answer(self, *, message: str) -> None:
        if not self._answer_text:
            self._replace_answer("")
        cursor = self._end_cursor()
        if self._answer_text:
            cursor.insertBlock()
        cursor.insertHtml(f'<span class="failed">The answer failed: {_escape(message)}</span>')
        self._end_stream()

    def stop_answer(self) -> None:
        """The person pressed Stop: keep what arrived, say it was cut short."""
        if not self._streaming:
            return
        if not self._answer_text:
            self._replace_answer("")
        cursor = self._end_cursor()
        cursor.insertHtml(' <span class="note">(stopped)</span>')
        self._end_stream()

    def _end_stream(self) -> None:
        self._streaming = False
        self._answer_start = -1
        self._scroll_to_end()
        self._update_buttons()
        self.question.setFocus()

    def _render_answer(self) -> None:
        if self._answer_start < 0:
            return
        self._replace_answer(answer_html(text=self._answer_text, citations=self._citations))

    def _replace_answer(self, fragment: str) -> None:
        """Re-render the whole answer in place: a marker like "[12]" may arrive
        split over tokens, so it only becomes a link once it is complete."""
        if self._answer_start < 0:
            return
        bar = self.transcript.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        cursor = QTextCursor(self.transcript.document())
        cursor.setPosition(self._answer_start)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        # Start from a plain format, not the one of the text just removed.
        cursor.setCharFormat(QTextCharFormat())
        if fragment:
            cursor.insertHtml(fragment)
        if at_end:
            self._scroll_to_end()

    def _end_cursor(self) -> QTextCursor:
        cursor = QTextCursor(self.transcript.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        return cursor

    def _scroll_to_end(self) -> None:
        bar = self.transcript.verticalScrollBar()
        bar.setValue(bar.maximum())

    # -- input ---------------------------------------------------------------------

    def _on_ask(self) -> None:
        question = self.question.text().strip()
        if not question or not self._ready or self._streaming:
            return
        emit(self.sig_ask, question)
        self.question.clear()

    def _on_stop(self) -> None:
        if self._streaming:
            emit(self.sig_stop)

    def _on_anchor(self, url: QUrl) -> None:
        chunk_id = chunk_id_from_href(
            href=url.toString(QUrl.ComponentFormattingOption.FullyEncoded)
        )
        if chunk_id is not None:
            emit(self.sig_open_source, chunk_id)

    def _on_source_index(self, index: QModelIndex) -> None:
        chunk_id = index.data(CHUNK_ID_ROLE)
        if isinstance(chunk_id, str):
            emit(self.sig_open_source, chunk_id)


def _spaced(*, top: float) -> QTextBlockFormat:
    fmt = QTextBlockFormat()
    fmt.setTopMargin(top)
    return fmt


def _escape(text: str) -> str:
    return html.escape(text, quote=False).replace("\n", "<br>")
