"""The OpenAI-compatible shapes of the wire contract (/v1/chat/completions,
/v1/completions, /v1/models, /v1/embeddings), re-exported by engine/wire.py.

Field names follow the OpenAI API so that its clients parse them unchanged;
`citations` and `note` are RAGDoll's extensions, ignored by clients that do not know them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.wire_events import Citation


@dataclass(frozen=True, kw_only=True)
class OpenAIModel:
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "ragdoll"


@dataclass(frozen=True, kw_only=True)
class OpenAIModelList:
    data: list[OpenAIModel]
    object: Literal["list"] = "list"


@dataclass(frozen=True, kw_only=True)
class OpenAIUsage:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


@dataclass(frozen=True, kw_only=True)
class OpenAIMessage:
    role: Literal["assistant"]
    content: str


@dataclass(frozen=True, kw_only=True)
class OpenAIChoice:
    index: int
    message: OpenAIMessage
    finish_reason: Literal["stop", "length"]


@dataclass(frozen=True, kw_only=True)
class OpenAIChatCompletion:
    id: str
    created: int
    model: str
    choices: list[OpenAIChoice]
    citations: list[Citation]
    usage: OpenAIUsage | None = None  # not counted: the extractive mode has no tokenizer
    # RAGDoll's extension: what the window says beside the answer (the sources' sentences
    # shown after or instead of the model's, no model installed, documents still being
    # added); absent when there is nothing to say.
    note: str | None = None
    object: Literal["chat.completion"] = "chat.completion"


@dataclass(frozen=True, kw_only=True)
class OpenAIDelta:
    role: Literal["assistant"] | None = None
    content: str | None = None


@dataclass(frozen=True, kw_only=True)
class OpenAIChunkChoice:
    index: int
    delta: OpenAIDelta
    finish_reason: Literal["stop", "length"] | None = None


@dataclass(frozen=True, kw_only=True)
class OpenAIChatCompletionChunk:
    """One `data:` line of a streamed chat; the first carries the citations."""

    id: str
    created: int
    model: str
    choices: list[OpenAIChunkChoice]
    citations: list[Citation] | None = None
    # With `stream_options.include_usage`: null on every chunk but the last, which has
    # no choices and the whole answer's usage (OpenAI's layout).
    usage: OpenAIUsage | None = None
    note: str | None = None  # as OpenAIChatCompletion's, on the chunk that finishes
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"


@dataclass(frozen=True, kw_only=True)
class OpenAICompletionChoice:
    index: int
    text: str
    finish_reason: Literal["stop", "length"] | None = None
    logprobs: None = None


@dataclass(frozen=True, kw_only=True)
class OpenAICompletion:
    """`/v1/completions` (the legacy text API), a whole answer or one streamed piece."""

    id: str
    created: int
    model: str
    choices: list[OpenAICompletionChoice]
    citations: list[Citation] | None = None
    usage: OpenAIUsage | None = None
    note: str | None = None  # as OpenAIChatCompletion's (streamed: on the finishing piece)
    object: Literal["text_completion"] = "text_completion"


@dataclass(frozen=True, kw_only=True)
class OpenAIEmbedding:
    index: int
    embedding: list[float] | str  # a base64 string of float32s when asked for "base64"
    object: Literal["embedding"] = "embedding"


@dataclass(frozen=True, kw_only=True)
class OpenAIEmbeddingUsage:
    prompt_tokens: int
    total_tokens: int


@dataclass(frozen=True, kw_only=True)
class OpenAIEmbeddingList:
    data: list[OpenAIEmbedding]
    model: str
    usage: OpenAIEmbeddingUsage
    object: Literal["list"] = "list"


@dataclass(frozen=True, kw_only=True)
class OpenAIErrorDetail:
    message: str
    type: str
    param: str | None = None
    code: str | None = None


@dataclass(frozen=True, kw_only=True)
class OpenAIError:
    error: OpenAIErrorDetail
