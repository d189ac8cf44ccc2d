"""A shaped answer (engine/api/openai_answer.py) as OpenAI's server-sent chunks:
`chat.completion.chunk` for /v1/chat/completions, `text_completion` for
/v1/completions, each stream ending in `data: [DONE]`. The first chunk carries the
citations (RAGDoll's extension field); with `stream_options.include_usage` every chunk
has `usage: null` and one more chunk after the finish has no choices and the usage."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from engine.api.openai_answer import Ended, Shaped, Text
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
    if data.get("citations") is None:
        del data["citations"]
    if not include_usage:
        del data["usage"]
    return f"data: {json.dumps(data)}\n\n"


def chat_chunks(
    events: Iterator[Shaped],
    *,
    completion_id: str,
    created: int,
    model: str,
    include_usage: bool,
) -> Iterator[str]:
    def chunk(delta: OpenAIDelta, *, finish: Any = None, citations: Any = None) -> str:
        value = OpenAIChatCompletionChunk(
            id=completion_id,
            created=created,
            model=model,
            choices=[OpenAIChunkChoice(index=0, delta=delta, finish_reason=finish)],
            citations=citations,
        )
        return _line(value, include_usage=include_usage)

    for event in events:
        if isinstance(event, CitationsEvent):
            yield chunk(OpenAIDelta(role="assistant", content=""), citations=event.citations)
        elif isinstance(event, Text):
            yield chunk(OpenAIDelta(content=event.text))
        elif isinstance(event, Ended):
            yield chunk(OpenAIDelta(), finish=event.finish_reason)
            if include_usage:
                last = OpenAIChatCompletionChunk(
                    id=completion_id, created=created, model=model, choices=[], usage=event.usage
                )
                yield _line(last, include_usage=True)
    yield DONE_LINE


def completion_chunks(
    events: Iterator[Shaped],
    *,
    completion_id: str,
    created: int,
    model: str,
    include_usage: bool,
) -> Iterator[str]:
    def chunk(text: str, *, finish: Any = None, citations: Any = None) -> str:
        value = OpenAICompletion(
            id=completion_id,
            created=created,
            model=model,
            choices=[OpenAICompletionChoice(index=0, text=text, finish_reason=finish)],
            citations=citations,
        )
        return _line(value, include_usage=include_usage)

    for event in events:
        if isinstance(event, CitationsEvent):
            yield chunk("", citations=event.citations)
        elif isinstance(event, Text):
            yield chunk(event.text)
        elif isinstance(event, Ended):
            yield chunk("", finish=event.finish_reason)
            if include_usage:
                last = OpenAICompletion(
                    id=completion_id, created=created, model=model, choices=[], usage=event.usage
                )
                yield _line(last, include_usage=True)
    yield DONE_LINE
