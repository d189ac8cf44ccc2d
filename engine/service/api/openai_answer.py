"""One answer for the OpenAI-compatible routes, shaped the way the request asked.

The engine's answer stream (engine/wire_events.py) goes through `shaped`: `stop`
sequences end the text (also mid-stream), `max_tokens` cuts an extractive answer (a
model's answer is cut by the engine itself, which generates no more), the sources are
appended as a numbered list when asked, and the end says why the text ended and the
tokens it took. Both routes (/v1/chat/completions, /v1/completions) read the same
shaped stream, whole or as chunks.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from engine.service.api.lifecycle import Lifecycle
from engine.service.api.openai_shape import StopFilter, counted, cut_to_tokens, sources_text
from engine.service.core import Engine
from engine.wire import (
    AnswerDone,
    AnswerEvent,
    Citation,
    CitationsEvent,
    DoneEvent,
    OpenAIUsage,
    TokenEvent,
    Turn,
)

DEFAULT_MAX_TOKENS = 256  # the engine's answer length when the request names none


@dataclass(frozen=True, kw_only=True)
class AnswerAsked:
    """What a client asked for, in the engine's terms."""

    question: str
    history: list[Turn]
    k: int = 5
    retrieval: bool = True
    max_tokens: int | None = None
    stops: tuple[str, ...] = ()
    sources_in_text: bool = True


@dataclass(frozen=True, kw_only=True)
class Text:
    text: str


@dataclass(frozen=True, kw_only=True)
class Ended:
    finish_reason: Literal["stop", "length"]
    usage: OpenAIUsage
    note: str | None = None  # the answer's note (AnswerDone.note)


Shaped = CitationsEvent | Text | Ended


def answer_events(
    *,
    engine: Engine,
    lifecycle: Lifecycle,
    asked: AnswerAsked,
    model: str,
    cancel: threading.Event | None = None,
) -> Iterator[AnswerEvent]:
    """The engine's answer stream, ending early with EngineStoppingError when the
    engine shuts down; `cancel` (set when a streaming client leaves) stops it too."""
    with lifecycle.answer(cancel=cancel) as stop:
        max_new = asked.max_tokens or DEFAULT_MAX_TOKENS
        if asked.retrieval:
            # API clients are background work: the chat a person watches goes first.
            source: Iterator[AnswerEvent] = engine.ask_stream(
                question=asked.question,
                k=asked.k,
                cancel=stop,
                priority="background",
                history=asked.history,
                max_new_tokens=max_new,
            )
        else:
            source = _unretrieved(engine=engine, asked=asked, cancel=stop, model=model)
        for event in source:
            lifecycle.check()
            yield event
        lifecycle.check()


def _unretrieved(
    *, engine: Engine, asked: AnswerAsked, cancel: threading.Event, model: str
) -> Iterator[AnswerEvent]:
    yield CitationsEvent(citations=[])
    pieces: list[str] = []
    max_new = asked.max_tokens or DEFAULT_MAX_TOKENS
    stream = engine.generate_stream(
        question=asked.question, cancel=cancel, history=asked.history, max_new_tokens=max_new
    )
    for piece in stream:
        pieces.append(piece)
        yield TokenEvent(text=piece)
    record = engine.last_generation()
    yield DoneEvent(
        done=AnswerDone(
            answer="".join(pieces),
            mode="generative",
            model=model,
            prompt_tokens=record.prompt_tokens if record else None,
            completion_tokens=record.generated_tokens if record else None,
            finish_reason="length" if record and record.generated_tokens >= max_new else "stop",
        )
    )


def shaped(
    *, events: Iterator[AnswerEvent], asked: AnswerAsked, tokenizer: Any, extractive: bool
) -> Iterator[Shaped]:
    """The answer as the client gets it: citations, text pieces, then how it ended.
    `tokenizer` counts the usage (the model's, or in extractive mode the embedder's) and
    cuts an extractive answer at `max_tokens`."""
    count = counted(tokenizer)
    stop = StopFilter(stops=asked.stops)
    citations: list[Citation] = []
    content: list[str] = []
    cut = False
    done: AnswerDone | None = None

    def release(text: str) -> str:
        nonlocal cut
        if cut or not text:
            return ""
        if extractive and asked.max_tokens is not None:
            whole, cut = cut_to_tokens(
                text="".join(content) + text, max_tokens=asked.max_tokens, tokenizer=tokenizer
            )
            text = whole[len("".join(content)) :]
        content.append(text)
        return text

    for event in events:
        if isinstance(event, CitationsEvent):
            citations = event.citations
            yield event
        elif isinstance(event, TokenEvent):
            if text := release(stop.feed(event.text)):
                yield Text(text=text)
        elif isinstance(event, DoneEvent):
            done = event.done
    # Extractive and "not found" answers may arrive whole, with no tokens before.
    whole = done.answer if done is not None and not content else ""
    if text := release(stop.feed(whole)):
        yield Text(text=text)
    if text := release(stop.flush()):
        yield Text(text=text)
    length = cut or (done is not None and done.finish_reason == "length" and not stop.stopped)
    shown = asked.sources_in_text and not length and not stop.stopped
    if tail := sources_text(answer="".join(content), citations=citations) if shown else "":
        content.append(tail)
        yield Text(text=tail)
    prompt = done.prompt_tokens if done is not None and done.prompt_tokens else None
    if prompt is None:
        prompt = count(asked.question) + sum(
            count(t.question) + count(t.answer) for t in asked.history
        )
    completion = count("".join(content))
    yield Ended(
        finish_reason="length" if length else "stop",
        usage=OpenAIUsage(
            prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
        ),
        note=done.note if done is not None else None,
    )


def collect(shaped_events: Iterator[Shaped]) -> tuple[list[Citation], str, Ended]:
    citations: list[Citation] = []
    pieces: list[str] = []
    ended: Ended | None = None
    for event in shaped_events:
        if isinstance(event, CitationsEvent):
            citations = event.citations
        elif isinstance(event, Text):
            pieces.append(event.text)
        else:
            ended = event
    assert ended is not None  # shaped always ends with one
    return citations, "".join(pieces), ended


def usage_tokenizer(engine: Engine) -> tuple[Any, bool]:
    """(the tokenizer that counts this answer's tokens, whether answers are extractive)."""
    generator = engine.language_model()
    if generator is not None:
        return generator.tokenizer, False
    return engine.embedder().tokenizer, True


def stop_sequences(stop: str | Sequence[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    return (stop,) if isinstance(stop, str) else tuple(stop)
