"""The engine's streamed events, and their one encoding: server-sent events.

An answer (`/v1/ask`) is a stream of typed events, in order: for a question asked
within a conversation a SearchedEvent (the query it was resolved to), one CitationsEvent,
TokenEvents as the text is written, then a DoneEvent, or a FailedEvent instead when
it fails. The engine core yields them, the server encodes them with `encode_sse`,
the client decodes them with `decode_sse`, and the window reads the same objects:
nothing dispatches on a string but the codec. Ingestion progress
(`/v1/ingest/{job_id}/events`) uses the same codec with ProgressEvent (engine/wire.py,
beside IngestProgress).

A new kind of event is a frozen dataclass subclassing StreamEvent with its SSE
`name`, added to the `AnswerEvent` union and `ANSWER_EVENTS`; a client that does
not know a name skips it, so an older client survives a newer engine.

The wire values an answer carries (Citation, AnswerDone) and the JSON conversion of
every wire dataclass live here too, so that engine/wire.py can re-export this module
without an import circle.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar, get_type_hints

T = TypeVar("T")

AnswerMode = Literal["extractive", "generative", "none"]


@dataclass(frozen=True, kw_only=True)
class Citation:
    """One source behind an answer; `index` is the n of its [n] marker."""

    index: int
    chunk_id: str
    path: str
    page: int | None  # 1-based; None for formats without pages
    text: str  # the passage (the chunk's text)
    score: float
    char_start: int  # span of the passage within its page's text
    char_end: int
    # Title of the passage's section ("5.13 Other debian/* files"); "" when the
    # document has no outline or headings, or an older engine sent none.
    section: str = ""


@dataclass(frozen=True, kw_only=True)
class AnswerDone:
    answer: str
    mode: AnswerMode
    note: str | None = None  # e.g. "No language model is installed: ..."
    model: str | None = None
    # Counted by the model's tokenizer when a model answered; None in extractive mode.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: Literal["stop", "length"] = "stop"  # "length": cut at max_tokens
    # Where in `answer` the documents' own sentences begin, when a model's answer is
    # followed or replaced by them (None: nowhere): shown as written, not as Markdown.
    quoted_from: int | None = None


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One earlier turn of a conversation, as the question's context: what was asked,
    what was answered, and the sources that answer was given (their text included,
    so that the prompt renders the turn exactly as the model saw it)."""

    question: str
    answer: str
    citations: list[Citation] = dataclasses.field(default_factory=list)


# -- JSON: every wire dataclass, both ways ------------------------------------------


def to_json_dict(value: Any) -> dict[str, Any]:
    return dataclasses.asdict(value)


def from_json_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Build a wire dataclass from JSON, nested dataclasses and lists included.
    Unknown keys are ignored so that an older client survives a newer engine."""
    hints = get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name])
    return cls(**kwargs)


def _convert(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            if arg is not type(None):
                return _convert(arg, value)
    if origin is list:
        (item,) = typing.get_args(hint)
        return [_convert(item, v) for v in value]
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return from_json_dict(hint, value)  # type: ignore[arg-type]
    return value


# -- the events -----------------------------------------------------------------------

E = TypeVar("E", bound="StreamEvent")


class StreamEvent:
    """One server-sent event: its `name` on the wire, its fields as the JSON data.
    A kind whose data is one wrapped value overrides `payload` and `from_payload`."""

    name: ClassVar[str]

    def payload(self) -> dict[str, Any]:
        return to_json_dict(self)

    @classmethod
    def from_payload(cls: type[E], data: dict[str, Any]) -> E:
        return from_json_dict(cls, data)


@dataclass(frozen=True, kw_only=True)
class CitationsEvent(StreamEvent):
    """The passages the answer may cite; empty when nothing relevant was found."""

    name: ClassVar[str] = "citations"
    citations: list[Citation]


@dataclass(frozen=True, kw_only=True)
class SearchedEvent(StreamEvent):
    """How a follow-up question was searched (before the citations): as asked with the
    earlier question it refers to weighed in (`context`), or as the model's standalone
    rewrite of it. Sent for a follow-up asked within a conversation (before its
    search), and for a question judged standalone whose results the earlier turn
    changed (`hedged`: searched as asked and history-aware, the rankings fused; sent
    after its search, since only the search tells). Also for a question asked in a
    language the collection is not written in, which a model translated (`query`, with
    `rewritten_by` "model"): searched as asked and as translated, the rankings fused."""

    def shown(self) -> str:
        """ "searched for: …" as the window and the CLI write it."""
        if self.context:
            return f"{self.query}  (with: {self.context})"
        return self.query

    name: ClassVar[str] = "searched"
    query: str
    rewritten_by: Literal["history", "model"] = "history"
    context: str = ""  # the earlier question(s) the search weighed in ("history" only)
    hedged: bool = False  # judged standalone; the history-aware search changed its results


@dataclass(frozen=True, kw_only=True)
class TokenEvent(StreamEvent):
    """A piece of the answer's text, as it is written."""

    name: ClassVar[str] = "token"
    text: str


@dataclass(frozen=True, kw_only=True)
class DoneEvent(StreamEvent):
    """The whole answer: its text is the one to keep (the tokens may have been cut)."""

    name: ClassVar[str] = "done"
    done: AnswerDone

    def payload(self) -> dict[str, Any]:
        return to_json_dict(self.done)  # the wire carries AnswerDone itself

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> DoneEvent:
        return cls(done=from_json_dict(AnswerDone, data))


@dataclass(frozen=True, kw_only=True)
class FailedEvent(StreamEvent):
    """The answer failed after its stream began; it ends the stream, instead of done."""

    name: ClassVar[str] = "error"
    message: str


AnswerEvent = SearchedEvent | CitationsEvent | TokenEvent | DoneEvent | FailedEvent
ANSWER_EVENTS: tuple[type[StreamEvent], ...] = (
    SearchedEvent,
    CitationsEvent,
    TokenEvent,
    DoneEvent,
    FailedEvent,
)


def ends_answer(event: StreamEvent) -> bool:
    """Whether nothing of the same answer follows this event."""
    return isinstance(event, DoneEvent | FailedEvent)


# -- the one encoding ------------------------------------------------------------------


def encode_sse(event: StreamEvent) -> str:
    return f"event: {event.name}\ndata: {json.dumps(event.payload())}\n\n"


def decode_sse(
    *, lines: Iterable[str], kinds: Iterable[type[StreamEvent]]
) -> Iterator[StreamEvent]:
    """The events of `kinds` in a stream of SSE lines; other names are skipped."""
    by_name = {kind.name: kind for kind in kinds}
    for name, data in _messages(lines):
        kind = by_name.get(name)
        if kind is not None:
            yield kind.from_payload(data)


def _messages(lines: Iterable[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    event, data = "message", []
    for line in lines:
        if not line:
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
    if data:
        yield event, json.loads("\n".join(data))
