"""One question's life in the pipeline: what was asked, and the stream of its results.

A `RequestHandle` is what `Pipeline.submit` returns: the caller reads events from it
(a follow-up's `Resolved` search, the retrieved hits, then text pieces, then exactly
one `Finished`), or gets them by callback, and can cancel it at any point. The
workers write to it; its timestamps give the waiting / retrieval / generation
breakdown of RAGDoll's Table 1.

The pipeline never looks inside what its stage functions pass each other: `S` is what
retrieval's search gives one question, `H` what its verdict gives (the hits generation
reads); the engine's are answering.py's `Searched` and `GatedHits`, tests use strings.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, Literal, Protocol, TypeVar

from engine.rag.answer.conversation import FollowUp
from engine.rag.pipeline.scheduler import PRIORITIES
from engine.rag.store.records import SearchFilters
from engine.wire import Priority

S = TypeVar("S")  # one question's search, before the relevance verdict
H = TypeVar("H")  # one question's hits, after the verdict: what generation reads


@dataclass(frozen=True, kw_only=True)
class Question:
    request_id: str
    text: str
    priority: Priority = "interactive"
    k: int = 5
    max_new_tokens: int = 256
    cost_s: float = 0.0  # what this request is expected to add to a batch, if known
    filters: SearchFilters | None = None  # folders, file types or paths to search in
    # A question of a conversation: `text` is then its search query; the prompt shows
    # the question as asked and the turns.
    conversation: FollowUp | None = None
    # The model rewrites this follow-up into a search query before its retrieval (the
    # pipeline's rewrite stage, follow_up.py); False once rewritten.
    rewrite: bool = False
    # The model translates the question into this language before its retrieval (the
    # same stage, engine/rag/answer/translation.py); None once translated.
    translate_to: str | None = None
    # The question's translation, searched too: its ranking fused with the question's.
    translated: str = ""


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """How a follow-up is searched, before its retrieval: resolved from the history,
    then rewritten by the model when the pipeline's rewrite stage ran on it."""

    conversation: FollowUp


@dataclass(frozen=True, kw_only=True)
class Translated:
    """How a question asked in a language the collection is not written in is searched,
    before its retrieval: also as the model's translation `text`."""

    text: str


@dataclass(frozen=True, kw_only=True)
class Retrieved(Generic[H]):
    hits: H  # the retrieval stage's result for this question


@dataclass(frozen=True, kw_only=True)
class Piece:
    text: str
    tokens: int = 0  # generated tokens this piece stands for (0: not counted)
    prompt_tokens: int = 0  # on a row's first piece: its prompt's length in tokens


@dataclass(frozen=True, kw_only=True)
class Finished:
    status: Literal["done", "cancelled", "error"]
    error: str = ""


Event = Resolved | Translated | Retrieved[H] | Piece | Finished


class CancelFlag(Protocol):
    """What a worker asks of a request's cancel: `threading.Event` is one."""

    def is_set(self) -> bool: ...


class _EitherSet:
    """The handle's own cancel or its caller's: a caller that stops (the answer's
    reader left, the engine shuts down) is heard by every queue and by the decode
    loop, which ask this at every step, without the caller's stream being read on.
    The caller's event is set too when its stream simply ends: once the request has
    finished that is no cancel (the decode loop still stores a finished row's KV
    for the conversation's next turn)."""

    __slots__ = ("_caller", "_finished", "_own")

    def __init__(
        self, *, own: threading.Event, caller: threading.Event | None, finished: threading.Event
    ) -> None:
        self._own = own
        self._caller = caller
        self._finished = finished

    def is_set(self) -> bool:
        if self._own.is_set():
            return True
        return self._caller is not None and self._caller.is_set() and not self._finished.is_set()


@dataclass(frozen=True, kw_only=True)
class RequestTimes:
    """Clock readings (the pipeline's clock); None for a stage not reached."""

    submitted: float
    retrieval_started: float | None = None
    retrieved: float | None = None
    generation_started: float | None = None
    first_token: float | None = None  # the first piece of text reached the caller
    finished: float | None = None


class RequestHandle(Generic[S, H]):
    """The caller's side of one request. Thread-safe: workers emit, one reader reads."""

    def __init__(
        self,
        *,
        question: Question,
        submitted: float,
        on_event: Callable[[Event[H]], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        """`cancel`: the caller's stop (None: only `cancel()` stops it)."""
        # Replaced once, by the rewrite stage (`resolved`): the question as searched.
        self.question = question
        self._events: queue.Queue[Event[H]] = queue.Queue()
        self._on_event = on_event
        self._cancel = threading.Event()
        self._finished = threading.Event()
        self._flag = _EitherSet(own=self._cancel, caller=cancel, finished=self._finished)
        self._lock = threading.Lock()
        # Serialises deliveries: a verdict's release (the retrieval thread) flushes
        # what generation held while pieces may still come (the generation thread).
        self._order = threading.RLock()
        self._held: list[Event[H]] | None = None  # `hold`: kept until the verdict
        self._released = threading.Event()
        self._released.set()
        self._times = RequestTimes(submitted=submitted)
        self.hits: H | None = None
        # What generation starts from before the verdict (`hold`): the search's hits.
        self.searched: S | None = None
        self.outcome: Finished | None = None
        self.tokens = 0  # generated tokens delivered so far
        self.prompt_tokens = 0  # the prompt's tokens, once the model took it
        self.served_by: str | None = None  # the model of the pipeline answering it (None: none)

    @property
    def request_id(self) -> str:
        return self.question.request_id

    @property
    def cancel_event(self) -> CancelFlag:
        """Set by `cancel`, by the caller's cancel event, and by a `release` that
        stops work begun early."""
        return self._flag

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._flag.is_set()

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    def times(self) -> RequestTimes:
        with self._lock:
            return self._times

    def mark(self, **stamps: float) -> None:
        with self._lock:
            self._times = dataclasses.replace(self._times, **stamps)

    def also_notify(self, on_event: Callable[[Event[H]], None]) -> None:
        """Call `on_event` too for every event from now on (a pipeline that took
        the request over counts it)."""
        with self._lock:
            before = self._on_event

            def both(event: Event[H]) -> None:
                if before is not None:
                    before(event)
                on_event(event)

            self._on_event = both

    def emit(self, event: Event[H]) -> bool:
        """Deliver one event; after a Finished, nothing more is delivered. While the
        handle is held (`hold`), the event is kept for `release` instead. True when
        it was delivered now."""
        with self._order:
            with self._lock:
                if self.outcome is not None:
                    return False
                if self._held is not None:
                    self._held.append(event)
                    return False
                if isinstance(event, Finished):
                    self.outcome = event
                elif isinstance(event, Retrieved):
                    self.hits = event.hits
                elif isinstance(event, Piece):
                    self.tokens += event.tokens
                    self.prompt_tokens = self.prompt_tokens or event.prompt_tokens
            self._events.put(event)
            if self._on_event is not None:
                try:
                    self._on_event(event)
                except Exception:
                    # A listener that fails is one that went away: stop this request,
                    # and only this one (the worker's batch goes on for the others).
                    self._cancel.set()
            if isinstance(event, Finished):
                self._finished.set()
            return True

    def resolved(self, *, question: Question) -> None:
        """The rewrite stage is over: `question` (same id, `rewrite` False) is what
        retrieval searches, and the reader hears how (`Resolved`)."""
        self.question = question
        if question.conversation is not None:
            self.emit(Resolved(conversation=question.conversation))
        if question.translated:
            self.emit(Translated(text=question.translated))

    def hold(self, *, searched: S) -> None:
        """Generation may start before the relevance gate's verdict (from `searched`,
        the search's hits, which the verdict keeps): what it emits is kept, not
        delivered, until `release`. The reader sees nothing that the gate would not
        have let through."""
        with self._order, self._lock:
            self.searched = searched
            self._held = []
            self._released.clear()

    @property
    def held(self) -> bool:
        with self._lock:
            return self._held is not None

    def wait_released(self, *, timeout: float | None = None) -> bool:
        """Wait for a held handle's verdict (True at once when not held)."""
        return self._released.wait(timeout)

    def release(self, *, retrieved: Retrieved[H] | None, finish: Finished | None) -> list[Event[H]]:
        """The verdict on a held handle: `retrieved` first (None: none to give), then,
        without `finish`, what was held, in order; with it (a refusal, a cancel, an
        error), `finish` instead: what was held is dropped and the generation begun
        early is stopped (the cancel event: its row leaves the batch, and a row stopped
        stores no answer KV). Returns the held events delivered."""
        with self._order:
            try:
                with self._lock:
                    held, self._held = self._held or [], None
                if retrieved is not None:
                    self.emit(retrieved)
                if finish is not None:
                    self.emit(finish)
                    self._cancel.set()
                    return []
                return [e for e in held if self.emit(e)]
            finally:
                self._released.set()

    def events(self, *, timeout: float | None = None) -> Iterator[Event[H]]:
        """Events in order, up to and including the Finished one. `timeout` bounds the
        wait for each event (queue.Empty when it passes)."""
        while True:
            event = self._events.get(timeout=timeout)
            yield event
            if isinstance(event, Finished):
                return

    def next_event(self, *, timeout: float | None = None) -> Event[H] | None:
        """The next event, or None when none came within `timeout` (the caller can then
        look at its own cancel flag and ask again). Call after the Finished one blocks."""
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    def wait(self, *, timeout: float | None = None) -> bool:
        return self._finished.wait(timeout)

    def text(self, *, timeout: float | None = None) -> str:
        """The whole answer; RuntimeError when the request failed or was cancelled."""
        pieces = [e.text for e in self.events(timeout=timeout) if isinstance(e, Piece)]
        outcome = self.outcome
        if outcome is None or outcome.status != "done":
            status = outcome.status if outcome else "unfinished"
            detail = f": {outcome.error}" if outcome and outcome.error else ""
            raise RuntimeError(f"request {self.request_id} {status}{detail}")
        return "".join(pieces)


def new_question(
    *,
    text: str,
    priority: Priority = "interactive",
    k: int = 5,
    max_new_tokens: int = 256,
    cost_s: float = 0.0,
    filters: SearchFilters | None = None,
    request_id: str | None = None,
    conversation: FollowUp | None = None,
    rewrite: bool = False,
    translate_to: str | None = None,
) -> Question:
    """A Question with a fresh id, after checking what a caller could get wrong."""
    if not text.strip():
        raise ValueError("the question is empty")
    if priority not in PRIORITIES:
        raise ValueError(f"priority must be one of {PRIORITIES}, not {priority!r}")
    if k < 1 or max_new_tokens < 1:
        raise ValueError("k and max_new_tokens must be at least 1")
    if rewrite and conversation is None:
        raise ValueError("only a follow-up of a conversation is rewritten")
    if translate_to and rewrite:
        raise ValueError("a follow-up that is rewritten is not translated too")
    return Question(
        request_id=request_id or uuid.uuid4().hex,
        text=text.strip(),
        priority=priority,
        k=k,
        max_new_tokens=max_new_tokens,
        cost_s=cost_s,
        filters=filters,
        conversation=conversation,
        rewrite=rewrite,
        translate_to=translate_to or None,
    )
