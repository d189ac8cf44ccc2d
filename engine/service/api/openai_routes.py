"""OpenAI-compatible endpoints: /v1/chat/completions, /v1/completions, /v1/models,
/v1/embeddings.

Existing OpenAI clients work unchanged against the engine (base URL
http://127.0.0.1:PORT/v1, api key = the engine's token). Chat answers come from
the person's documents: the last user message is the question and the user /
assistant messages before it are the conversation (a follow-up is resolved against
them and the model sees them); retrieval is on unless the request says
`"ragdoll": {"retrieval": false}`. The sources are in an extension field `citations`
(on the response, and on the first chunk of a stream) and, unless turned off (per
request or in the server settings), appended to the text as a numbered list.
`max_tokens` / `max_completion_tokens` and `stop` are honoured, `usage` is counted.
Sampling parameters (temperature, top_p, ...) are accepted and ignored: answers are
greedy so that the same question gets the same cited answer; what cannot be honoured
(n > 1, a required tool call, a response format) is refused with a 400. docs/api.md
says it all exactly.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import APIRouter, FastAPI, Request
from fastapi.exception_handlers import (
    http_exception_handler,
    request_validation_exception_handler,
)
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.service.api.bodies import (
    EXTRACTIVE_MODEL_ID,
    AnswerBody,
    ChatCompletionBody,
    ChatMessageIn,
    CompletionBody,
    EmbeddingsBody,
)
from engine.service.api.lifecycle import Lifecycle, until_disconnect
from engine.service.api.openai_answer import (
    AnswerAsked,
    Shaped,
    answer_events,
    collect,
    shaped,
    stop_sequences,
    usage_tokenizer,
)
from engine.service.api.openai_chunks import chat_chunks, completion_chunks
from engine.service.api.openai_shape import ChatText, question_and_history
from engine.service.api.server_settings import ServerSettingsStore
from engine.service.core import Engine
from engine.wire import (
    Citation,
    OpenAIChatCompletion,
    OpenAIChoice,
    OpenAICompletion,
    OpenAICompletionChoice,
    OpenAIEmbedding,
    OpenAIEmbeddingList,
    OpenAIEmbeddingUsage,
    OpenAIError,
    OpenAIErrorDetail,
    OpenAIMessage,
    OpenAIModel,
    OpenAIModelList,
    Turn,
    to_json_dict,
)

log = logging.getLogger(__name__)
MAX_QUESTION_CHARS = 8000
OPENAI_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models")
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": OpenAIError, "description": "The request is malformed or cannot be answered"},
    404: {"model": OpenAIError, "description": "No such model"},
    422: {"model": OpenAIError, "description": "Not used: invalid requests get 400"},
}


def openai_router(
    *, engine: Engine, lifecycle: Lifecycle, settings: ServerSettingsStore
) -> APIRouter:
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
        refusal = _refusal(body) or _chat_refusal(body)
        if refusal is not None:
            return refusal
        messages = [ChatText(role=m.role, text=_text_of(m)) for m in body.messages]
        question, history = question_and_history(messages)
        if not question:
            return _error(400, "no user message with text: the last user message is the question")
        max_tokens = body.max_completion_tokens or body.max_tokens
        asked = _asked(body, question=question, history=history, max_tokens=max_tokens)
        if isinstance(asked, JSONResponse):
            return asked
        return _respond(
            asked=asked,
            body=body,
            id_prefix="chatcmpl",
            chunks=chat_chunks,
            whole=lambda answer, ended: OpenAIChatCompletion(
                id=answer.id,
                created=answer.created,
                model=answer.model,
                choices=[
                    OpenAIChoice(
                        index=0,
                        message=OpenAIMessage(role="assistant", content=answer.text),
                        finish_reason=ended.finish_reason,
                    )
                ],
                citations=answer.citations,
                usage=ended.usage,
                note=ended.note,
            ),
        )

    @router.post(
        "/v1/completions",
        response_model=OpenAICompletion,
        responses={
            **ERROR_RESPONSES,
            200: {
                "description": "The answer to the prompt (the legacy text API); with "
                "`stream: true`, server-sent events of text_completion objects",
                "content": {"text/event-stream": {}},
            },
        },
    )
    def completions(body: CompletionBody) -> Any:
        refusal = _refusal(body)
        if refusal is not None:
            return refusal
        if body.echo:
            return _error(400, "echo is not supported: the prompt is a question", param="echo")
        prompt = body.prompt if isinstance(body.prompt, str) else body.prompt[0]
        if not prompt.strip():
            return _error(400, "the prompt is empty", param="prompt")
        asked = _asked(body, question=prompt.strip(), history=[], max_tokens=body.max_tokens)
        if isinstance(asked, JSONResponse):
            return asked
        return _respond(
            asked=asked,
            body=body,
            id_prefix="cmpl",
            chunks=completion_chunks,
            whole=lambda answer, ended: OpenAICompletion(
                id=answer.id,
                created=answer.created,
                model=answer.model,
                choices=[
                    OpenAICompletionChoice(
                        index=0, text=answer.text, finish_reason=ended.finish_reason
                    )
                ],
                citations=answer.citations,
                usage=ended.usage,
                note=ended.note,
            ),
        )

    def _respond(
        *,
        asked: AnswerAsked,
        body: AnswerBody,
        id_prefix: str,
        chunks: Callable[..., Iterator[str]],
        whole: Callable[[_Collected, Any], Any],
    ) -> Any:
        """One answer as the OpenAI shape a route gives: `chunks` streams it, `whole`
        builds the single response from what was collected."""
        model_id = _model_id(engine)
        completion_id = f"{id_prefix}-{uuid.uuid4().hex}"
        created = int(time.time())
        stop = threading.Event()  # the client left (a stream), or the engine stops
        stream = _shaped_answer(asked=asked, model=model_id, cancel=stop)
        if body.stream:
            include_usage = body.stream_options is not None and body.stream_options.include_usage
            streamed = chunks(
                stream,
                completion_id=completion_id,
                created=created,
                model=model_id,
                include_usage=include_usage,
            )
            body_stream = until_disconnect(_guarded(streamed), cancel=stop)
            return StreamingResponse(body_stream, media_type="text/event-stream")
        try:
            citations, answer, ended = collect(stream)
        except Exception as e:
            log.exception("answering failed")
            return _error(500, f"{type(e).__name__}: {e}", kind="server_error")
        collected = _Collected(
            id=completion_id, created=created, model=model_id, text=answer, citations=citations
        )
        return whole(collected, ended)

    def _asked(
        body: AnswerBody, *, question: str, history: list[Turn], max_tokens: int | None
    ) -> AnswerAsked | JSONResponse:
        if len(question) > MAX_QUESTION_CHARS:
            return _error(400, f"the question is longer than {MAX_QUESTION_CHARS} characters")
        options = body.ragdoll
        if not options.retrieval and engine.status().answer_mode != "generative":
            return _error(
                400,
                "retrieval is off but no language model is in use: choose a model "
                "(PUT /v1/settings/model) or leave retrieval on",
            )
        in_text = options.sources_in_text
        return AnswerAsked(
            question=question,
            history=history,
            k=options.k,
            retrieval=options.retrieval,
            max_tokens=max_tokens,
            stops=stop_sequences(body.stop),
            sources_in_text=settings.value.api_sources_in_text if in_text is None else in_text,
        )

    def _shaped_answer(
        *, asked: AnswerAsked, model: str, cancel: threading.Event
    ) -> Iterator[Shaped]:
        tokenizer, extractive = usage_tokenizer(engine)
        events = answer_events(
            engine=engine, lifecycle=lifecycle, asked=asked, model=model, cancel=cancel
        )
        return shaped(events=events, asked=asked, tokenizer=tokenizer, extractive=extractive)

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

    async def on_not_found(request: Request, exc: Exception) -> Response:
        """A path no route serves: OpenAI's shape under /v1/ (a client trying an API
        the engine does not have, e.g. /v1/responses, gets an error it can read)."""
        assert isinstance(exc, StarletteHTTPException)
        path = request.url.path
        if exc.status_code == 404 and path.startswith("/v1/") and exc.detail == "Not Found":
            return _error(
                404,
                f"no such endpoint: {request.method} {path} (see docs/api.md for the "
                "OpenAI-compatible endpoints RAGDoll serves)",
                code="unknown_url",
            )
        return await on_http(request, exc)

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_not_found)


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


@dataclass(frozen=True, kw_only=True)
class _Collected:
    """A whole answer with the ids its response carries."""

    id: str
    created: int
    model: str
    text: str
    citations: list[Citation]


def _model_id(engine: Engine) -> str:
    status = engine.status()
    if status.answer_mode != "generative" or not status.model:
        return EXTRACTIVE_MODEL_ID
    local = Path(os.path.expanduser(status.model))
    # A local folder's full path says more about the disk than about the model.
    return local.name if local.is_dir() else status.model


def _text_of(message: ChatMessageIn) -> str:
    content = message.content
    if isinstance(content, list):
        content = " ".join(p.text for p in content if p.type == "text" and p.text)
    return content or ""


def _refusal(body: AnswerBody) -> JSONResponse | None:
    """What cannot be honoured is said, not silently ignored."""
    if body.n > 1:
        return _error(
            400,
            "n > 1 is not supported: answers are greedy, so every choice would be the same "
            "answer; ask once (n = 1)",
            param="n",
            code="unsupported_parameter",
        )
    return None


def _chat_refusal(body: ChatCompletionBody) -> JSONResponse | None:
    choice = body.tool_choice
    if body.tools and (choice == "required" or isinstance(choice, dict)):
        return _error(
            400,
            "tool calls are not supported: RAGDoll answers from your documents and never "
            "calls tools, so tool_choice cannot be 'required' or name a function "
            "(tools with tool_choice 'auto' or 'none' are accepted and ignored)",
            param="tool_choice",
            code="unsupported_parameter",
        )
    fmt = body.response_format
    if fmt is not None and fmt.get("type", "text") != "text":
        return _error(
            400,
            f"response_format {fmt.get('type')!r} is not supported: answers are text "
            "with [n] citations (leave response_format out, or use {'type': 'text'})",
            param="response_format",
            code="unsupported_parameter",
        )
    return None


def _guarded(chunks: Iterator[str]) -> Iterator[str]:
    try:
        yield from chunks
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
