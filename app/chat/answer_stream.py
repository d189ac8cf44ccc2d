"""One answer being asked for: the GUI's whole state of it, in one object.

The chat pane makes one per question (`ChatPane.ask`) and owns it; the engine
bridge reads the engine's answer stream in a worker and hands each event to
`deliver` on the GUI thread; Stop sets `cancel`, which the worker reads to close
the HTTP stream (so the engine stops writing). What arrived so far (`text`,
`citations`) and how it ended (`state`, `error`) live here, and every change is
announced by a `sig_*` signal. Once it has ended nothing changes any more, so a
late event of a stopped answer cannot reach the next one.
"""

from __future__ import annotations

import threading
from typing import Literal

from PySide6.QtCore import QObject, Signal

from app.qt_compat import emit
from engine.wire import (
    AnswerDone,
    AnswerEvent,
    Citation,
    CitationsEvent,
    DoneEvent,
    FailedEvent,
    SearchedEvent,
    TokenEvent,
    Turn,
)

AnswerState = Literal["asking", "streaming", "done", "failed", "stopped"]
ENDED: frozenset[AnswerState] = frozenset({"done", "failed", "stopped"})


class AnswerStream(QObject):
    """A question and its answer as it streams in. GUI thread only, except
    `cancel`, which a worker may read."""

    sig_searched = Signal(str)  # the query a follow-up was searched as
    sig_citations = Signal(object)  # list[Citation]
    sig_token = Signal(str)  # the piece that arrived (the whole text is `text`)
    sig_done = Signal(object)  # AnswerDone
    sig_failed = Signal(str)  # why, for a person
    sig_stopped = Signal()  # the person stopped it; what arrived is kept

    def __init__(
        self,
        *,
        request_id: int,
        question: str,
        conversation_id: str = "",
        k: int = 5,
        history: tuple[Turn, ...] = (),
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.request_id = request_id
        self.question = question
        self.conversation_id = conversation_id  # where the answer is written
        self.k = k
        self.history = history  # the conversation's turns before this question
        self.searched = ""  # the query a follow-up was searched as, once told
        self.cancel = threading.Event()  # set by Stop; the reader closes the stream
        self._state: AnswerState = "asking"
        self._text = ""
        self._citations: list[Citation] = []
        self._done: AnswerDone | None = None
        self._error = ""

    def __repr__(self) -> str:
        return f"AnswerStream(#{self.request_id}, {self._state}, {len(self._text)} chars)"

    @property
    def state(self) -> AnswerState:
        return self._state

    @property
    def ended(self) -> bool:
        return self._state in ENDED

    @property
    def text(self) -> str:
        """The answer so far; once done, the engine's final text."""
        return self._text

    @property
    def citations(self) -> list[Citation]:
        return list(self._citations)

    @property
    def done(self) -> AnswerDone | None:
        return self._done

    @property
    def error(self) -> str:
        return self._error

    def deliver(self, event: AnswerEvent) -> None:
        """One event of the engine's stream (GUI thread). Ignored once ended."""
        if self.ended:
            return
        if isinstance(event, SearchedEvent):
            self.searched = event.shown()
            emit(self.sig_searched, self.searched)
        elif isinstance(event, CitationsEvent):
            self._state = "streaming"
            self._citations = list(event.citations)
            emit(self.sig_citations, self.citations)
        elif isinstance(event, TokenEvent):
            self._state = "streaming"
            self._text += event.text
            emit(self.sig_token, event.text)
        elif isinstance(event, DoneEvent):
            # The final text replaces the streamed one (they agree unless tokens were lost).
            if event.done.answer:
                self._text = event.done.answer
            self._done = event.done
            self._state = "done"
            emit(self.sig_done, event.done)
        elif isinstance(event, FailedEvent):
            self.fail(message=event.message)

    def fail(self, *, message: str) -> None:
        """The answer cannot go on (the engine said so, or could not be reached)."""
        if self.ended:
            return
        self._error = message
        self._state = "failed"
        emit(self.sig_failed, message)

    def stop(self) -> None:
        """Stop reading: what arrived is kept; whatever the worker still reads is dropped."""
        if self.ended:
            return
        self.cancel.set()
        self._state = "stopped"
        emit(self.sig_stopped)
