"""The chat pane: conversations, the transcript, the question box, and the sources.

It knows nothing of the engine. A question becomes an AnswerStream
(app/chat/answer_stream.py) that the pane owns and announces with `sig_ask`;
whoever asks the engine (the main window, through the bridge) feeds the stream,
and the pane writes what it announces. It owns the conversations: loaded from
disk in a worker, saved as each answer ends.
"""

from __future__ import annotations

import html
import itertools
import logging
import time
from dataclasses import replace

from PySide6.QtCore import QEvent, QModelIndex, QObject, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QGuiApplication, QHelpEvent, QKeySequence, QShortcut, QTextCursor
from PySide6.QtWidgets import (
    QLabel,
    QLineEdit,
    QListView,
    QPushButton,
    QToolTip,
    QWidget,
)

from app.chat.answer_render import chunk_id_from_href, copy_text, elide, source_title
from app.chat.answer_stream import AnswerStream
from app.chat.chat_layout import lay_out
from app.chat.conversation_list import ConversationList
from app.chat.conversations import (
    Conversation,
    ConversationStore,
    Exchange,
    default_folder,
    history_of,
    new_conversation,
    with_exchange,
    with_last_exchange,
    without_last_exchange,
)
from app.chat.loader import ConversationLoader
from app.chat.sources_model import CHUNK_ID_ROLE, SourceDelegate, SourcesModel
from app.chat.transcript import as_written, transcript_css, write_answer, write_question
from app.chat.transcript_view import TranscriptView
from app.qt_compat import emit
from app.theme import is_dark
from engine.wire import AnswerDone, Citation

log = logging.getLogger(__name__)

# Tokens arrive faster than anyone reads: re-render the answer at most this often.
RENDER_INTERVAL_MS = 50
# Writing a long conversation yields to the event loop after this long.
FILL_BUDGET_S = 0.03


class ChatPane(QWidget):
    """Questions and streamed answers with clickable [n] markers and sources."""

    sig_ask = Signal(object)  # AnswerStream, begun: the asker feeds it
    sig_open_source = Signal(str)  # chunk id
    sig_conversations_loaded = Signal()
    sig_error = Signal(str)  # a failure the person must see (saving, deleting)
    sig_answer_failed = Signal(str)  # an answer ended in an error (its message)

    def __init__(
        self, *, store: ConversationStore | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.store = store or ConversationStore(folder=default_folder())
        self._conversations: dict[str, Conversation] = {}
        self._search_text: dict[str, str] = {}
        self._current: Conversation = new_conversation()
        self._request_ids = itertools.count(1)
        self._live: AnswerStream | None = None  # the answer being streamed
        self._last: AnswerStream | None = None  # the latest answer asked for
        self._answer_start = -1  # document position where the streaming answer begins
        self._ready = False
        self._loaded = False
        self._filter = ""
        self._reopen_id = ""  # the conversation to show once the files are read
        self._render_timer = QTimer(self)
        self._render_timer.setSingleShot(True)
        self._render_timer.setInterval(RENDER_INTERVAL_MS)
        self._render_timer.timeout.connect(self._render_answer)
        self._fill_next = 0  # exchanges of the current conversation written so far
        self._fill_timer = QTimer(self)
        self._fill_timer.setSingleShot(True)
        self._fill_timer.setInterval(0)
        self._fill_timer.timeout.connect(self._fill_step)

        self.conversation_list = ConversationList()
        self.conversation_list.sig_selected.connect(self.switch_to)
        self.conversation_list.sig_new.connect(self.new_chat)
        self.conversation_list.sig_renamed.connect(self.rename)
        self.conversation_list.sig_deleted.connect(self.delete)
        self.conversation_list.sig_search.connect(self.set_filter)

        self.transcript = TranscriptView(hint="Ask about your documents: answers cite [1], [2]…")
        self.transcript.setObjectName("transcript")
        self.transcript.setAccessibleName("Conversation")
        self.transcript.setOpenLinks(False)  # citation links are ours, not URLs to follow
        self._dark = is_dark()
        self.transcript.document().setDefaultStyleSheet(transcript_css(dark=self._dark))
        self.transcript.document().setDocumentMargin(14)
        self.transcript.anchorClicked.connect(self._on_anchor)
        self.transcript.viewport().installEventFilter(self)

        self.regenerate_button = QPushButton("Regenerate")
        self.regenerate_button.setAccessibleName("Regenerate the last answer")
        self.regenerate_button.setToolTip("Ask the last question again")
        self.regenerate_button.clicked.connect(self.regenerate)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setAccessibleName("Copy the answer with its sources")
        self.copy_button.setToolTip("Copy the last answer and its sources (Ctrl+Shift+C)")
        self.copy_button.clicked.connect(self.copy_answer)

        self.sources_label = QLabel("Sources")
        self.sources_label.setObjectName("sectionTitle")
        # A follow-up's search, as the engine resolved it: "searched for: …".
        self.searched_label = QLabel("")
        self.searched_label.setObjectName("searchedFor")
        self.searched_label.setAccessibleName("The search the sources came from")
        self.searched_label.setWordWrap(True)
        self.searched_label.setVisible(False)
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
        self.question.setPlaceholderText("Ask about your documents…  (Enter to send)")
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

        self.split, self.outer_split = lay_out(pane=self, widgets=self)
        self._build_shortcuts()
        self._update_buttons()
        self._loader = ConversationLoader(parent=self)
        self._loader.sig_loaded.connect(self._on_loaded)
        self._loader.start(store=self.store)

    def _build_shortcuts(self) -> None:
        def key(seq: QKeySequence | str, slot: object, *, window: bool = True) -> QShortcut:
            shortcut = QShortcut(QKeySequence(seq), self)
            shortcut.setContext(
                Qt.ShortcutContext.WindowShortcut
                if window
                else Qt.ShortcutContext.WidgetWithChildrenShortcut
            )
            shortcut.activated.connect(slot)
            return shortcut

        key(QKeySequence(Qt.Key.Key_Escape), self._on_stop, window=False)
        key("Ctrl+N", self.new_chat)
        key("Ctrl+F", self.conversation_list.focus_search)
        key("Ctrl+Shift+C", self.copy_answer)
        key("Ctrl+Return", self._on_ask)
        key("Ctrl+Enter", self._on_ask)

    # -- state -------------------------------------------------------------------

    @property
    def streaming(self) -> bool:
        return self._live is not None

    @property
    def answer_stream(self) -> AnswerStream | None:
        """The answer being (or last) streamed."""
        return self._last

    @property
    def answer_text(self) -> str:
        """The raw text of the answer being (or last) streamed."""
        return self._last.text if self._last is not None else ""

    @property
    def current(self) -> Conversation:
        return self._current

    @property
    def conversations(self) -> list[Conversation]:
        """Saved conversations, most recently updated first."""
        return sorted(self._conversations.values(), key=lambda c: c.updated, reverse=True)

    @property
    def loaded(self) -> bool:
        return self._loaded

    def set_ready(self, ready: bool) -> None:
        """Whether the engine can take questions."""
        self._ready = ready
        self._update_buttons()

    def _update_buttons(self) -> None:
        can_ask = self._ready and not self.streaming
        # The question box stays editable while an answer streams: the next
        # question can be typed meanwhile; only sending it waits.
        self.ask_button.setEnabled(can_ask and bool(self.question.text().strip()))
        self.stop_button.setEnabled(self.streaming)
        self.stop_button.setVisible(self.streaming)
        has_answer = bool(self._current.exchanges) and not self._streaming_here()
        self.regenerate_button.setEnabled(can_ask and has_answer)
        self.copy_button.setEnabled(has_answer and bool(self._current.exchanges[-1].answer))

    def _streaming_here(self) -> bool:
        return self._live is not None and self._live.conversation_id == self._current.id

    # -- conversations --------------------------------------------------------------

    def _on_loaded(self, found: list[tuple[Conversation, str]]) -> None:
        for c, text in found:
            # A conversation started before the files were read wins.
            self._conversations.setdefault(c.id, c)
            self._search_text.setdefault(c.id, text)
        self._loaded = True
        self._reopen()
        self._refresh_list()
        emit(self.sig_conversations_loaded)

    def reopen_when_loaded(self, conversation_id: str) -> None:
        """Show this conversation (the one open when the window last closed) once
        the conversations are read, unless the person has started another."""
        self._reopen_id = conversation_id
        if self._loaded:
            self._reopen()

    def _reopen(self) -> None:
        wanted, self._reopen_id = self._reopen_id, ""
        if self._current.exchanges or self.streaming:
            return  # a question asked meanwhile: that conversation stays
        found = self._conversations.get(wanted)
        if found is None and not wanted:
            return
        latest = self.conversations
        found = found or (latest[0] if latest else None)  # gone: the latest instead
        if found is not None:
            self._current = found
            self._show_current()
            self._refresh_list()

    def _refresh_list(self) -> None:
        words = self._filter.casefold().split()
        shown = [
            c
            for c in self.conversations
            if all(w in self._search_text.get(c.id, "") for w in words)
        ]
        self.conversation_list.show_conversations(
            shown, current=self._current.id, query=self._filter.strip()
        )

    def set_filter(self, text: str) -> None:
        self._filter = text
        self._refresh_list()

    def new_chat(self) -> None:
        """An empty conversation; it is saved once it has a question."""
        if not self._current.exchanges and not self._streaming_here():
            self.question.setFocus()
            return
        self._current = new_conversation()
        self._show_current()
        self._refresh_list()
        self.question.setFocus()

    def switch_to(self, conversation_id: str) -> None:
        if conversation_id == self._current.id:
            return
        found = self._conversations.get(conversation_id)
        if found is None:
            return
        self._current = found
        self._show_current()
        self.conversation_list.select(conversation_id)

    def rename(self, conversation_id: str, title: str) -> None:
        found = self._conversations.get(conversation_id)
        if found is not None and title and title != found.title:
            self._put(replace(found, title=title))
        self._refresh_list()

    def delete(self, conversation_id: str) -> None:
        self._conversations.pop(conversation_id, None)
        self._search_text.pop(conversation_id, None)
        try:
            self.store.delete(conversation_id=conversation_id)
        except OSError as e:
            log.exception("could not delete conversation %s", conversation_id)
            emit(self.sig_error, f"Could not delete the conversation's file: {e}")
        if self._live is not None and conversation_id == self._live.conversation_id:
            self._on_stop()
        if conversation_id == self._current.id:
            remaining = self.conversations
            self._current = remaining[0] if remaining else new_conversation()
            self._show_current()
        self._refresh_list()

    def _put(self, conversation: Conversation, *, save: bool = True) -> None:
        """Keep a changed conversation (in memory, and on disk when `save`)."""
        self._conversations[conversation.id] = conversation
        self._search_text[conversation.id] = conversation.search_text()
        if conversation.id == self._current.id:
            self._current = conversation
        if save:
            try:
                self.store.save(conversation)
            except OSError as e:
                log.exception("could not save conversation %s", conversation.id)
                emit(self.sig_error, f"Could not save the conversation: {e}")

    def _update_streaming(self, *, save: bool, **changes: object) -> None:
        conv = self._conversations.get(self._live.conversation_id) if self._live else None
        if conv is None or not conv.exchanges:
            return
        last = replace(conv.exchanges[-1], **changes)  # type: ignore[arg-type]
        self._put(with_last_exchange(conv, exchange=last), save=save)

    # -- showing a conversation ------------------------------------------------------

    def _show_current(self) -> None:
        """Write the whole current conversation into the transcript.

        A long conversation is written a few exchanges at a time, yielding to
        the event loop in between, so that opening it never freezes the window;
        a short one is written at once."""
        self._render_timer.stop()
        self._fill_timer.stop()
        self.transcript.document().clear()
        self._answer_start = -1
        self._fill_next = 0
        exchanges = self._current.exchanges
        self._show_sources(list(exchanges[-1].citations) if exchanges else [])
        self._show_searched(exchanges[-1].searched if exchanges else "")
        self._update_buttons()
        self._fill_step()

    def _fill_step(self) -> None:
        started = time.monotonic()
        exchanges = self._current.exchanges
        cursor = QTextCursor(self.transcript.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        dark = is_dark()
        while self._fill_next < len(exchanges):
            i = self._fill_next
            write_question(cursor=cursor, question=exchanges[i].question, first=i == 0)
            streaming = self._streaming_here() and i == len(exchanges) - 1
            if streaming:
                self._answer_start = cursor.position()
            write_answer(
                cursor=cursor, exchange=as_written(exchanges, i=i), streaming=streaming, dark=dark
            )
            self._fill_next += 1
            if time.monotonic() - started > FILL_BUDGET_S and self._fill_next < len(exchanges):
                self._fill_timer.start()
                break
        self._scroll_to_end()

    def _filled(self) -> bool:
        return not self._fill_timer.isActive() and self._fill_next == len(self._current.exchanges)

    def _rewrite_last_answer(self, *, streaming: bool) -> None:
        """Replace the answer being streamed, in place, with its current state."""
        if self._answer_start < 0 or not self._current.exchanges:
            return
        bar = self.transcript.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        cursor = QTextCursor(self.transcript.document())
        cursor.setPosition(self._answer_start)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        write_answer(
            cursor=cursor,
            exchange=as_written(self._current.exchanges, i=len(self._current.exchanges) - 1),
            streaming=streaming,
            dark=is_dark(),
        )
        if at_end:
            self._scroll_to_end()

    def _show_sources(self, citations: list[Citation]) -> None:
        self.sources_model.set_citations(citations)
        self.sources_label.setText(f"Sources ({len(citations)})" if citations else "Sources")

    def _known_citations(self) -> dict[str, Citation]:
        known: dict[str, Citation] = {}
        for exchange in self._current.exchanges:
            for c in exchange.citations:
                known[c.chunk_id] = c
        return known

    def marker_tooltip(self, *, chunk_id: str) -> str:
        """What hovering a [n] marker shows: where the passage is, and the passage."""
        citation = self._known_citations().get(chunk_id)
        if citation is None:
            return ""
        return f"<b>[{citation.index}] {_html(source_title(citation=citation))}</b><br>" + _html(
            elide(text=citation.text, limit=400)
        )

    def changeEvent(self, event: QEvent) -> None:
        """The theme changed (the app's palette did): rewrite in the new colours."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            dark = is_dark()
            if dark != self._dark:
                self._dark = dark
                self.transcript.document().setDefaultStyleSheet(transcript_css(dark=dark))
                self._show_current()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.transcript.viewport() and event.type() == QEvent.Type.ToolTip:
            assert isinstance(event, QHelpEvent)
            chunk_id = chunk_id_from_href(href=self.transcript.anchorAt(event.pos()))
            tip = self.marker_tooltip(chunk_id=chunk_id) if chunk_id else ""
            if tip:
                QToolTip.showText(event.globalPos(), tip, self.transcript.viewport())
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().eventFilter(watched, event)

    # -- the answer being streamed ---------------------------------------------------

    def ask(self, *, question: str) -> AnswerStream:
        """Show the question and a placeholder where its answer will stream in, and
        announce the answer's stream (`sig_ask`) for the asker to feed."""
        stream = AnswerStream(
            request_id=next(self._request_ids),
            question=question,
            conversation_id=self._current.id,
            history=tuple(history_of(self._current)),  # the conversation shown
        )
        stream.sig_searched.connect(self._on_searched)
        stream.sig_citations.connect(self._on_citations)
        stream.sig_token.connect(self._on_token)
        stream.sig_done.connect(self._on_done)
        stream.sig_failed.connect(self._on_failed)
        stream.sig_stopped.connect(self._on_stopped)
        self._live = self._last = stream
        complete = self._filled()
        others = [c.title for c in self._conversations.values() if c.id != self._current.id]
        self._put(with_exchange(self._current, exchange=Exchange(question=question), taken=others))
        self._refresh_list()
        if complete:  # write only the new exchange, not the whole conversation again
            self._show_sources([])
            self._show_searched("")
            self._update_buttons()
            self._fill_step()
        else:
            self._show_current()
        emit(self.sig_ask, stream)
        return stream

    def _on_searched(self, query: str) -> None:
        if self._live is None:
            return
        self._update_streaming(save=False, searched=query)
        if self._streaming_here():
            self._show_searched(query)

    def _show_searched(self, query: str) -> None:
        self.searched_label.setText(f"searched for: {query}" if query else "")
        self.searched_label.setVisible(bool(query))

    def _on_citations(self, citations: list[Citation]) -> None:
        if self._live is None:
            return
        self._update_streaming(save=False, citations=tuple(citations))
        if self._streaming_here():
            self._show_sources(citations)
            # The placeholder says the search is over ("Writing the answer from …").
            self._render_answer()

    def _on_token(self, _piece: str) -> None:
        if self._live is not None and not self._render_timer.isActive():
            self._render_timer.start()

    def _on_done(self, done: AnswerDone) -> None:
        # Every answer not written by a model is quoted: shown as literal text.
        self._end_stream(
            note=done.note or "",
            quoted=done.mode != "generative",
            quoted_from=done.quoted_from,
        )

    def _on_failed(self, message: str) -> None:
        self._end_stream(error=message)
        emit(self.sig_answer_failed, message)

    def _on_stopped(self) -> None:
        """The person pressed Stop: keep what arrived, say it was cut short."""
        self._end_stream(stopped=True)

    def _end_stream(self, **changes: object) -> None:
        stream = self._live
        if stream is None:
            return
        self._render_timer.stop()
        self._update_streaming(
            save=True, answer=stream.text, citations=tuple(stream.citations), **changes
        )
        here = self._streaming_here()
        self._live = None
        if here and self._answer_start >= 0:
            self._rewrite_last_answer(streaming=False)
            last = self._current.exchanges[-1]
            self._show_sources(list(last.citations))
            self._show_searched(last.searched)
        self._answer_start = -1
        self._refresh_list()
        self._update_buttons()
        self.question.setFocus()

    def _render_answer(self) -> None:
        if self._live is None:
            return
        self._update_streaming(save=False, answer=self._live.text)
        if self._streaming_here():
            self._rewrite_last_answer(streaming=True)

    def _scroll_to_end(self) -> None:
        bar = self.transcript.verticalScrollBar()
        bar.setValue(bar.maximum())

    # -- actions -------------------------------------------------------------------------

    def regenerate(self) -> None:
        """Ask the last question again; the new answer replaces the old one."""
        if self.streaming or not self._ready or not self._current.exchanges:
            return
        question = self._current.exchanges[-1].question
        self._put(without_last_exchange(self._current))
        self._show_current()
        self.ask(question=question)

    def copy_answer(self) -> str:
        """The last answer of this conversation, with its sources, to the clipboard."""
        if not self._current.exchanges:
            return ""
        last = self._current.exchanges[-1]
        if not last.answer:
            return ""
        text = copy_text(answer=last.answer, citations=list(last.citations))
        QGuiApplication.clipboard().setText(text)
        return text

    # -- input ---------------------------------------------------------------------

    def _on_ask(self) -> None:
        question = self.question.text().strip()
        if not question or not self._ready or self.streaming:
            return
        self.question.clear()
        self.ask(question=question)

    def _on_stop(self) -> None:
        """Escape: stops an answer being written; else, in the search box, ends the
        search (the list had stayed filtered to "No conversation mentions…")."""
        if self._live is not None:
            self._live.stop()
            return
        search = self.conversation_list.search
        if search.hasFocus() and search.text():
            search.clear()
            self.question.setFocus()

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


def _html(text: str) -> str:
    return html.escape(text, quote=False)
