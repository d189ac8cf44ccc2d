"""The request bodies of every HTTP route, and the one place they are defined.

engine/wire.py defines every value the engine *sends* (and the client reads back);
what a route *accepts* is checked here, before any route runs, by strict pydantic
models: lengths, ranges and patterns that the published OpenAPI schema states and
that a body breaking them is refused for (400, or OpenAI's error shape under
/v1/chat, /v1/completions, /v1/embeddings, /v1/models). A route that needs an engine
value from a body turns it into one (`AskBody.turns`). Nothing else under
engine/service/api/ defines a body.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.service.api.body_checks import WholeNumber
from engine.wire import Priority, Turn, from_json_dict

EXTRACTIVE_MODEL_ID = "ragdoll-extractive"
MAX_EMBEDDING_INPUTS = 2048
# The hub's repo id: "org/name" of letters, digits, -, _ and . (not starting with .).
REPO_ID = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}$"
GGUF_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,190}\.gguf$"


# -- answers, ingestion, models and settings (engine/service/server.py) -----------------


class CitationBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")
    index: int = 0
    chunk_id: str = ""
    path: str = Field(max_length=4096)
    page: int | None = None
    text: str = Field(default="", max_length=20000)
    score: float = 0.0
    char_start: int = 0
    char_end: int = 0


class TurnBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")
    question: str = Field(max_length=8000)
    answer: str = Field(default="", max_length=100_000)
    citations: list[CitationBody] = Field(default_factory=list, max_length=50)


class AskBody(BaseModel):
    model_config = ConfigDict(strict=True)
    question: str = Field(min_length=1, max_length=8000)
    k: WholeNumber = Field(default=5, ge=1, le=50)
    priority: Priority = "interactive"
    history: list[TurnBody] = Field(default_factory=list, max_length=200)

    def turns(self) -> list[Turn]:
        return [from_json_dict(Turn, t.model_dump()) for t in self.history]


class IngestBody(BaseModel):
    model_config = ConfigDict(strict=True)
    paths: list[str] = Field(min_length=1, max_length=10000)


class ModelBody(BaseModel):
    model_config = ConfigDict(strict=True)
    model: str | None = Field(default=None, max_length=4096)
    weights: str | None = Field(default=None, max_length=16)  # None: keep the setting


class ModelServerBody(BaseModel):
    """`url` None: generation back to the local model (or extractive answers).
    `api_key` None keeps the stored key for the same server; "" removes it."""

    model_config = ConfigDict(strict=True)
    url: str | None = Field(default=None, max_length=2048)
    model: str | None = Field(default=None, max_length=512)
    api_key: str | None = Field(default=None, max_length=8192)
    ca_file: str | None = Field(default=None, max_length=4096)
    concurrency: WholeNumber | None = Field(default=None, ge=1, le=256)
    first_token_s: float | None = Field(default=None, ge=1, le=3600)


class ServerModelsBody(BaseModel):
    model_config = ConfigDict(strict=True)
    url: str = Field(min_length=1, max_length=2048)
    api_key: str | None = Field(default=None, max_length=8192)
    ca_file: str | None = Field(default=None, max_length=4096)


class EmbedderBody(BaseModel):
    model_config = ConfigDict(strict=True)
    embedder: str = Field(min_length=1, max_length=4096)


class EmbedderServerBody(BaseModel):
    """`api_key` None keeps the stored key for the same server; "" means none."""

    model_config = ConfigDict(strict=True)
    url: str = Field(min_length=1, max_length=2048)
    model: str = Field(min_length=1, max_length=512)
    api_key: str | None = Field(default=None, max_length=8192)
    ca_file: str | None = Field(default=None, max_length=4096)
    batch: WholeNumber | None = Field(default=None, ge=1, le=2048)
    timeout_s: float | None = Field(default=None, ge=1, le=3600)


class RerankerBody(BaseModel):
    model_config = ConfigDict(strict=True)
    reranker: str | None = Field(default=None, max_length=4096)  # None or "none": off


# -- watched folders and search (routes_library.py) ----------------------------------


class FolderBody(BaseModel):
    model_config = ConfigDict(strict=True)
    path: str = Field(min_length=1, max_length=4096)
    collection: str = Field(default="default", min_length=1, max_length=200)
    ingest: bool = True  # false: only the grant (the caller ingests what it chooses)


class SearchBody(BaseModel):
    model_config = ConfigDict(strict=True)
    query: str = Field(min_length=1, max_length=8000)
    k: WholeNumber = Field(default=5, ge=1, le=50)
    collection: str | None = Field(default=None, max_length=200)


# -- one question of every document (routes_each.py) ---------------------------------


class EachBody(BaseModel):
    model_config = ConfigDict(strict=True)
    question: str = Field(min_length=1, max_length=8000)
    scope: str = Field(min_length=1, max_length=4096)  # a collection, a folder or a file
    k: WholeNumber = Field(default=3, ge=1, le=50)
    whole_document: bool = False
    reuse: bool = True
    max_new_tokens: WholeNumber = Field(default=256, ge=1, le=4096)


# -- the API's own settings (routes_system.py) ---------------------------------------


class ServerSettingsBody(BaseModel):
    """Fields left out keep their value."""

    model_config = ConfigDict(strict=True)

    allowed_origins: list[str] | None = Field(default=None, max_length=32)
    keep_engine_running: bool | None = None
    api_sources_in_text: bool | None = None


# -- hub downloads (routes_models.py) ------------------------------------------------


class DownloadBody(BaseModel):
    model_config = ConfigDict(strict=True)
    repo_id: str = Field(pattern=REPO_ID, max_length=200)
    # One GGUF file of the repo (a Recommended model's variant) instead of the model.
    file: str | None = Field(default=None, pattern=GGUF_NAME, max_length=200)


# -- OpenAI-compatible requests (openai_routes.py) -----------------------------------


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    type: str = Field(max_length=64)
    text: str | None = None


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None


class RagdollChatOptions(BaseModel):
    """RAGDoll's extension of a chat request (`extra_body={"ragdoll": {...}}`)."""

    model_config = ConfigDict(strict=True)

    retrieval: bool = True
    k: WholeNumber = Field(default=5, ge=1, le=50)
    # The sources as a numbered list at the end of the text; None: the server setting.
    sources_in_text: bool | None = None


_A_USER_MESSAGE = {
    "type": "object",
    "properties": {"role": {"const": "user"}, "content": {"type": "string", "pattern": "\\S"}},
    "required": ["role", "content"],
}


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    include_usage: bool = False


class AnswerBody(BaseModel):
    """What /v1/chat/completions and /v1/completions share."""

    model_config = ConfigDict(extra="allow", strict=True)
    model: str = Field(default=EXTRACTIVE_MODEL_ID, max_length=4096)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: WholeNumber = Field(default=1, ge=1, le=128)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    stop: str | Annotated[list[str], Field(max_length=4)] | None = None
    ragdoll: RagdollChatOptions = Field(default_factory=RagdollChatOptions)


class ChatCompletionBody(AnswerBody):
    # The schema says what the route needs: a user message with some text.
    messages: list[ChatMessageIn] = Field(
        min_length=1, max_length=1000, json_schema_extra={"contains": _A_USER_MESSAGE}
    )
    max_completion_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None


class CompletionBody(AnswerBody):
    prompt: str | Annotated[list[str], Field(min_length=1, max_length=1)]
    echo: bool = False


class EmbeddingsBody(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    # A long text is fine (the embedder reads its first 256 tokens); the 1 MiB body
    # limit bounds the total.
    input: str | Annotated[list[str], Field(min_length=1, max_length=MAX_EMBEDDING_INPUTS)]
    model: str = Field(default="", max_length=4096)
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: WholeNumber | None = Field(default=None, ge=1)
