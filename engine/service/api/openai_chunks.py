"""A shaped answer (engine/service/api/openai_answer.py) as OpenAI's server-sent chunks:
`chat.completion.chunk` for /v1/chat/completions, `text_completion` for
/v1/completions, each stream ending in `data: [DONE]`. The first chunk carries the
citations (RAGDoll's extension field); with `stream_options.include_usage` every chunk
has `usage: null` and one more chunk after the finish has no choices and the usage."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from engine.service.api.openai_answer import Ended, Shaped, Text
from engine.wire import (
    CitationsEvent,
    OpenAIChatCompletionChunk,
    OpenAIChunkChoice,
    OpenAICompletion,
    OpenAICompletionChoice,
    OpenAIDelta,
    to_json_dict,
)

DONE_LINE = "data: [DONE]\n\n"


def _line(value: Any, *, include_usage: bool) -> str:
    data = to_json_dict(value)
    for extension in ("citations", "note"):  # RAGDoll's, only where they say something
        if data.get(extension) is None:
            data.pop(extension, None)
    if not include_usage:
        del data["usage"]
    return f"data: {json.dumps(data)}\n\n"


def _chunks(
    events: Iterator[Shaped],
    *,
    chunk: Callable[..., Any],
    include_usage: bool,
) -> Iterator[str]:
    """The one event loop of both streams: `chunk(text=, first=, finish=, citations=,
    usage=, empty=, note=)` builds the route's own chunk object."""
    for event in events:
        if isinstance(event, CitationsEvent):
            yield _line(
                chunk(text="", first=True, citations=event.citations), include_usage=include_usage
            )
        elif isinstance(event, Text):
            yield _line(chunk(text=event.text), include_usage=include_usage)
        elif isinstance(event, Ended):
            finishing = chunk(text=None, finish=event.finish_reason, note=event.note)
            yield _line(finishing, include_usage=include_usage)
            if include_usage:
                yield _line(chunk(empty=True, usage=event.usage), include_usage=True)
    yield DONE_LINE


def chat_chunks(
    events: Iterator[Shaped],
    *,
    completion_id: str,
    created: int,
    model: str,
    include_usage: bool,
) -> Iterator[str]:
    def chunk(
        *,
        text: str | None = None,
        first: bool = False,
        finish: Any = None,
        citations: Any = None,
        usage: Any = None,
        empty: bool = False,
        note: str | None = None,
    ) -> OpenAIChatCompletionChunk:
        if first:
            delta = OpenAIDelta(role="assistant", content="")
        else:
            delta = OpenAIDelta(content=text) if text is not None else OpenAIDelta()
        choices = [] if empty else [OpenAIChunkChoice(index=0, delta=delta, finish_reason=finish)]
        return OpenAIChatCompletionChunk(
            id=completion_id,
            created=created,
            model=model,
            choices=choices,
            citations=citations,
            usage=usage,
            note=note,
        )

    return _chunks(events, chunk=chunk, include_usage=include_usage)


def completion_chunks(
    events: Iterator[Shaped],
    *,
    completion_id: str,
    created: int,
    model: str,
    include_usage: bool,
) -> Iterator[str]:
    def chunk(
        *,
        text: str | None = None,
        first: bool = False,
        finish: Any = None,
        citations: Any = None,
        usage: Any = None,
        empty: bool = False,
        note: str | None = None,
    ) -> OpenAICompletion:
        choice = OpenAICompletionChoice(index=0, text=text or "", finish_reason=finish)
        return OpenAICompletion(
            id=completion_id,
            created=created,
            model=model,
            choices=[] if empty else [choice],
            citations=citations,
            usage=usage,
            note=note,
        )

    return _chunks(events, chunk=chunk, include_usage=include_usage)
