"""`POST /v1/ask/each`: one question of every document of a collection, folder or file.

The body is an EachRequest (engine/wire_each.py); the answer a stream of server-sent
events: the plan, a row per document as it finishes, then a summary. A scope that
names nothing, or holds no indexed document, is a 400 before the stream begins.
Requests that name paths are confined to the watched folders, as every route's are.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

from fastapi import APIRouter, HTTPException
from fastapi.responses import StreamingResponse

from engine.service.api.bodies import EachBody
from engine.service.api.lifecycle import Lifecycle, until_disconnect
from engine.service.core import Engine
from engine.wire import FailedEvent, encode_sse
from engine.wire_each import EachRequest, FinishedEvent

log = logging.getLogger(__name__)


def each_router(*, engine: Engine, lifecycle: Lifecycle) -> APIRouter:
    router = APIRouter(tags=["answers"])

    @router.post(
        "/v1/ask/each",
        responses={
            200: {"content": {"text/event-stream": {}}, "description": "the rows, as SSE"},
            400: {"description": "No such collection or watched path, or no document in it"},
        },
    )
    def ask_each(body: EachBody) -> StreamingResponse:
        if "\x00" in body.scope:
            raise HTTPException(status_code=400, detail="a path cannot contain a NUL character")
        request = EachRequest(
            question=body.question,
            scope=body.scope,
            k=body.k,
            whole_document=body.whole_document,
            reuse=body.reuse,
            max_new_tokens=body.max_new_tokens,
        )
        stop = threading.Event()  # the client left, or the engine is shutting down
        try:
            events = engine.each.stream(request=request, cancel=stop)
        except ValueError as e:  # ScopeError included: nothing was asked
            raise HTTPException(status_code=400, detail=str(e)) from e

        def stream() -> Iterator[str]:
            try:
                with lifecycle.answer(cancel=stop):
                    for event in events:
                        lifecycle.check()
                        yield encode_sse(event)
                        if isinstance(event, FinishedEvent):
                            return
            except Exception as e:  # the stream has begun: report in-band
                log.exception("asking each document failed")
                yield encode_sse(FailedEvent(message=f"{type(e).__name__}: {e}"))
            finally:
                events.close()

        return StreamingResponse(
            until_disconnect(stream(), cancel=stop), media_type="text/event-stream"
        )

    return router
