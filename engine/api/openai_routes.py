"""OpenAI-compatible endpoints: /v1/chat/completions, /v1/models, /v1/embeddings.

Existing OpenAI clients work unchanged against the engine (base URL
http://127.0.0.1:PORT/v1, api key = the engine's token). Chat answers come from
the person's documents: the last user message is the question, retrieval is on
unless the request says `"ragdoll": {"retrieval": false}`, and the sources are
in an extension field `citations` (on the response, and on the first chunk of a
stream). Sampling parameters (temperature, top_p, ...) are accepted and ignored:
answers are greedy so that the same question gets the same cited answer.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from fastapi import APIRouter, FastAPI, Request
from fastapi.exception_handlers import (
    http_exception_handler,
    request_validation_exception_handler,
)
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.api.body_checks import WholeNumber
from engine.api.lifecycle import Lifecycle
from engine.core import Engine
from engine.wire import (
    AnswerDone,
    AnswerEvent,
    Citation,
    CitationsEvent,
    DoneEvent,
    OpenAIChatCompletion,
    OpenAIChatCompletionChunk,
    OpenAIChoice,
    OpenAIChunkChoice,
    OpenAIDelta,
    OpenAIEmbedding,
    OpenAIEmbeddingList,
    OpenAIEmbeddingUsage,
    OpenAIError,
    OpenAIErrorDetail,
    OpenAIMessage,
    OpenAIModel,
    OpenAIModelList,
    TokenEvent,
    to_json_dict,
)

log = logging.getLogger(__name__)
EXTRACTIVE_MODEL_ID = "ragdoll-extractive"
MAX_QUESTION_CHARS = 8000
MAX_EMBEDDING_INPUTS = 2048
OPENAI_PATHS = ("/v1/chat/completions", "/v1/embeddings", "/v1/models")
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": OpenAIError, "description": "The request is malformed or cannot be answered"},
    404: {"model": OpenAIError, "description": "No such model"},
    422: {"model": OpenAIError, "description": "Not used: invalid requests get 400"},
}


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


_A_USER_MESSAGE = {
    "type": "object",
    "properties": {"role": {"const": "user"}, "content": {"type": "string", "pattern": "\\S"}},
    "required": ["role", "content"],
}


class ChatCompletionBody(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    model: str = Field(default=EXTRACTIVE_MODEL_ID, max_length=4096)
    # The schema says what the route needs: a user message with some text.
    messages: list[ChatMessageIn] = Field(
        min_length=1, max_length=1000, json_schema_extra={"contains": _A_USER_MESSAGE}
    )
    stream: bool = False
    n: WholeNumber = Field(default=1, ge=1, le=1)
    ragdoll: RagdollChatOptions = Field(default_factory=RagdollChatOptions)


class EmbeddingsBody(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    # A long text is fine (the embedder reads its first 256 tokens); the 1 MiB body
    # limit bounds the total.
    input: str | Annotated[list[str], Field(min_length=1, max_length=MAX_EMBEDDING_INPUTS)]
    model: str = Field(default="", max_length=4096)
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: WholeNumber | None = Field(default=None, ge=1)


def openai_router(*, engine: Engine, lifecycle: Lifecycle) -> APIRouter:
    router = APIRouter(tags=["OpenAI-compatible"])

    @router.get("/v1/models", response_model=OpenAIModelList)
    def list_models() -> OpenAIModelList:
        return OpenAIModelList(data=_models(engine))

    @router.get("/v1/models/{model_id:path}", response_model=OpenAIModel, responses=ERROR_RESPONSES)
    def get_model(model_id: str) -> Any:
        for model in _models(engine):
            if model.id == model_id:
                return model
        return _error(404, f"no model {model_id!r}; see GET /v1/models", code="model_not_found")

    @router.post(
        "/v1/chat/completions",
        response_model=OpenAIChatCompletion,
        responses={
            **ERROR_RESPONSES,
            200: {
                "description": "The answer; with `stream: true`, server-sent events of "
                "chat.completion.chunk objects ending in `data: [DONE]`",
                "content": {"text/event-stream": {}},
            },
        },
    )
    def chat_completions(body: ChatCompletionBody) -> Any:
        question = _last_user_text(body.messages)
        if not question:
            return _error(400, "no user message with text: the last user message is the question")
        if len(question) > MAX_QUESTION_CHARS:
            return _error(400, f"the question is longer than {MAX_QUESTION_CHARS} characters")
        options = body.ragdoll
        if not options.retrieval and engine.status().answer_mode != "generative":
            return _error(
                400,
                "retrieval is off but no language model is in use: choose a model "
                "(PUT /v1/settings/model) or leave retrieval on",
            )
        model_id = _model_id(engine)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        events = _answer_events(
            engine=engine, lifecycle=lifecycle, question=question, options=options, model=model_id
        )
        if body.stream:
            chunks = _stream(events, completion_id=completion_id, created=created, model=model_id)
            return StreamingResponse(chunks, media_type="text/event-stream")
        citations: list[Citation] = []
        answer = ""
        try:
            for event in events:
                if isinstance(event, CitationsEvent):
                    citations = event.citations
                elif isinstance(event, DoneEvent):
                    answer = event.done.answer
        except Exception as e:
            log.exception("answering failed")
            return _error(500, f"{type(e).__name__}: {e}", kind="server_error")
        return OpenAIChatCompletion(
            id=completion_id,
            created=created,
            model=model_id,
            choices=[
                OpenAIChoice(
                    index=0,
                    message=OpenAIMessage(role="assistant", content=answer),
                    finish_reason="stop",
                )
            ],
            citations=citations,
        )

    @router.post("/v1/embeddings", response_model=OpenAIEmbeddingList, responses=ERROR_RESPONSES)
    def embeddings(body: EmbeddingsBody) -> Any:
        texts = [body.input] if isinstance(body.input, str) else list(body.input)
        if not texts:
            return _error(400, "input is empty: give a string or a list of strings")
        embedder = engine.embedder()
        if body.dimensions is not None and body.dimensions != embedder.info.dimension:
            return _error(
                400,
                f"{embedder.info.id} makes {embedder.info.dimension}-dimensional vectors; "
                "other dimensions are not supported",
                param="dimensions",
            )
        vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
        tokens = sum(len(ids) for ids in embedder.tokenizer(texts)["input_ids"])
        data = [
            OpenAIEmbedding(index=i, embedding=_encode_vector(v, fmt=body.encoding_format))
            for i, v in enumerate(vectors)
        ]
        return OpenAIEmbeddingList(
            data=data,
            model=embedder.info.id,
            usage=OpenAIEmbeddingUsage(prompt_tokens=tokens, total_tokens=tokens),
        )

    return router


def install_openai_error_handlers(app: FastAPI) -> None:
    """Errors on the OpenAI-compatible routes in OpenAI's shape (`{"error": {...}}`,
    400 for an invalid request), which its clients turn into their own exceptions;
    the engine's other routes keep FastAPI's `{"detail": ...}`."""

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        if not request.url.path.startswith(OPENAI_PATHS):
            return await request_validation_exception_handler(request, exc)
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}"
            for e in exc.errors()[:5]
        )
        return _error(400, f"invalid request: {problems}")

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        allowed = _allowed_methods(request) if exc.status_code == 405 else None
        if allowed:  # Starlette names only the methods of the first route that matched
            exc.headers = {**(exc.headers or {}), "Allow": allowed}
        if not request.url.path.startswith(OPENAI_PATHS):
            return await http_exception_handler(request, exc)
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        response = _error(exc.status_code, str(exc.detail), kind=kind)
        response.headers.update(exc.headers or {})  # e.g. a 405's Allow
        return response

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)


def _allowed_methods(request: Request) -> str | None:
    """Every method the published schema gives this request's path (RFC 9110
    §15.5.6), a literal path before a template that would also match it."""
    paths: dict[str, dict[str, Any]] = request.app.openapi()["paths"]
    path = request.url.path
    templates = [path] if path in paths else [t for t in paths if _template(t).fullmatch(path)]
    methods = {m.upper() for t in templates for m in paths[t]}
    return ", ".join(sorted(methods)) or None


def _template(path: str) -> re.Pattern[str]:
    return re.compile(re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path)))


def _models(engine: Engine) -> list[OpenAIModel]:
    """The chat model in use first (what `model` in a chat request gets), then the embedder."""
    embedder_id = engine.settings.embedder
    return [OpenAIModel(id=_model_id(engine)), OpenAIModel(id=embedder_id)]


def _model_id(engine: Engine) -> str:
    status = engine.status()
    if status.answer_mode != "generative" or not status.model:
        return EXTRACTIVE_MODEL_ID
    local = Path(os.path.expanduser(status.model))
    # A local folder's full path says more about the disk than about the model.
    return local.name if local.is_dir() else status.model


def _last_user_text(messages: list[ChatMessageIn]) -> str:
    for message in reversed(messages):
        if message.role != "user":
            continue
        content = message.content
        if isinstance(content, list):
            content = " ".join(p.text for p in content if p.type == "text" and p.text)
        return (content or "").strip()
    return ""


def _answer_events(
    *,
    engine: Engine,
    lifecycle: Lifecycle,
    question: str,
    options: RagdollChatOptions,
    model: str,
) -> Iterator[AnswerEvent]:
    """The answer stream's events (engine/wire_events.py), ending early with
    EngineStoppingError when the engine shuts down."""
    with lifecycle.answer() as cancel:
        if options.retrieval:
            # API clients are background work: the chat a person watches goes first.
            source: Iterator[AnswerEvent] = engine.ask_stream(
                question=question, k=options.k, cancel=cancel, priority="background"
            )
        else:
            source = _unretrieved(engine=engine, question=question, cancel=cancel, model=model)
        for event in source:
            lifecycle.check()
            yield event
        lifecycle.check()


def _unretrieved(
    *, engine: Engine, question: str, cancel: Any, model: str
) -> Iterator[AnswerEvent]:
    yield CitationsEvent(citations=[])
    pieces: list[str] = []
    for piece in engine.generate_stream(question=question, cancel=cancel):
        pieces.append(piece)
        yield TokenEvent(text=piece)
    yield DoneEvent(done=AnswerDone(answer="".join(pieces), mode="generative", model=model))


def _stream(
    events: Iterator[AnswerEvent], *, completion_id: str, created: int, model: str
) -> Iterator[str]:
    def chunk(delta: OpenAIDelta, *, finish: Any = None, citations: Any = None) -> str:
        value = OpenAIChatCompletionChunk(
            id=completion_id,
            created=created,
            model=model,
            choices=[OpenAIChunkChoice(index=0, delta=delta, finish_reason=finish)],
            citations=citations,
        )
        data = to_json_dict(value)
        if citations is None:
            del data["citations"]
        return f"data: {json.dumps(data)}\n\n"

    sent_text = False
    try:
        for event in events:
            if isinstance(event, CitationsEvent):
                yield chunk(OpenAIDelta(role="assistant", content=""), citations=event.citations)
            elif isinstance(event, TokenEvent) and event.text:
                sent_text = True
                yield chunk(OpenAIDelta(content=event.text))
            elif isinstance(event, DoneEvent):
                # "Not found" answers arrive whole, with no tokens before them.
                if event.done.answer and not sent_text:
                    yield chunk(OpenAIDelta(content=event.done.answer))
                yield chunk(OpenAIDelta(), finish="stop")
        yield "data: [DONE]\n\n"
    except Exception as e:  # the stream has begun: report in-band, as OpenAI does
        log.exception("answering failed")
        detail = OpenAIErrorDetail(message=f"{type(e).__name__}: {e}", type="server_error")
        yield f"data: {json.dumps(to_json_dict(OpenAIError(error=detail)))}\n\n"


def _encode_vector(vector: np.ndarray, *, fmt: str) -> list[float] | str:
    if fmt == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return [float(x) for x in vector]


def _error(
    status: int,
    message: str,
    *,
    kind: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> JSONResponse:
    detail = OpenAIErrorDetail(message=message, type=kind, param=param, code=code)
    return JSONResponse(to_json_dict(OpenAIError(error=detail)), status_code=status)
