"""The guard every request passes before any route sees it.

A plain ASGI middleware rather than FastAPI's `@app.middleware("http")`: it must
see a chunked body as it arrives to cap its size, and answer CORS preflights
(which carry no token) for the origins the person allowed, and only those.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

from starlette.datastructures import Headers

from engine.service.api.body_checks import invalid_text_at
from engine.service.api.openai_routes import OPENAI_PATHS
from engine.service.auth import (
    IDENTITY_PATH,
    HostPolicy,
    host_allowed,
    identity_proof,
    normalize_origin,
    origin_allowed,
    token_matches,
    valid_challenge,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 1 << 20
# A body of at most 1 MiB on this machine takes milliseconds; the time bounds how
# long a client that trickles bytes holds a connection and a request.
BODY_TIMEOUT_S = 15.0
CORS_MAX_AGE_S = 600


class ApiGuard:
    """Host, Origin, token and body size, in that order; CORS for allowed origins.
    GET /v1/identity is answered after the Host and Origin checks, without the token.

    `allowed_origins` is read on every request so that a change in the
    settings takes effect without a restart."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        host_policy: HostPolicy,
        allowed_origins: Callable[[], list[str]],
        max_body_bytes: int = MAX_BODY_BYTES,
        body_timeout_s: float = BODY_TIMEOUT_S,
    ) -> None:
        self.app = app
        self._token = token
        self._host_policy = host_policy
        self._allowed_origins = allowed_origins
        self._max_body = max_body_bytes
        self._body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # no route uses one: refuse before any check
            await receive()
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        path = scope.get("path", "")
        if not host_allowed(headers.get("host"), policy=self._host_policy):
            await _reply(send, status=403, detail="forbidden host", path=path)
            return
        origin = headers.get("origin")
        allowed = self._allowed_origins()
        if not origin_allowed(origin, allowed=allowed):
            await _reply(send, status=403, detail="forbidden origin", path=path)
            return
        cors_origin = _cors_origin(origin, allowed=allowed)
        if (
            scope["method"] == "OPTIONS"
            and cors_origin is not None
            and "access-control-request-method" in headers
        ):
            await _reply(send, status=204, detail=None, extra=_preflight_headers(cors_origin))
            return
        cors = _cors_headers(cors_origin) if cors_origin else []
        if path == IDENTITY_PATH:
            # Before the token: a client asks this first, to learn that it talks to
            # the engine before it sends the token (engine/service/launcher.py).
            await self._identity(scope, send)
            return
        if not token_matches(header=headers.get("authorization"), token=self._token):
            await _reply(
                send,
                status=401,
                detail="missing or wrong token",
                extra=[(b"www-authenticate", b"Bearer"), *cors],
                path=path,
            )
            return
        refusal = _body_refusal(headers, limit=self._max_body)
        if refusal is not None:
            await _reply(send, status=refusal[0], detail=refusal[1], extra=cors, path=path)
            return
        if "content-length" in headers or "transfer-encoding" in headers:
            # Read here, whatever the headers announced: the limit counts what arrives,
            # and a client that sends slowly is cut off.
            try:
                async with asyncio.timeout(self._body_timeout_s):
                    body = await _read_capped(receive, limit=self._max_body)
            except TimeoutError:
                await _reply(send, status=408, detail="the body came too slowly", path=path)
                return
            if body is None:
                await _reply(send, status=413, detail="request too large", extra=cors, path=path)
                return
            where = invalid_text_at(body)
            if where is not None:
                detail = f"{where}: not valid text (a lone UTF-16 surrogate such as \\ud800)"
                await _reply(send, status=400, detail=detail, extra=cors, path=path)
                return
            receive = _replay(body, receive)
        await self.app(scope, receive, _with_headers(send, cors) if cors else send)

    async def _identity(self, scope: Scope, send: Send) -> None:
        if scope["method"] != "GET":
            await _reply(send, status=405, detail="method not allowed", path=IDENTITY_PATH)
            return
        challenge = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("challenge")
        if not challenge or not valid_challenge(challenge[0]):
            detail = "challenge: 32 to 128 lower-case hex digits"
            await _reply(send, status=400, detail=detail, path=IDENTITY_PATH)
            return
        server = scope.get("server") or ("", 0)
        pid, port = os.getpid(), int(server[1] or 0)
        proof = identity_proof(token=self._token, challenge=challenge[0], pid=pid, port=port)
        body = json.dumps({"pid": pid, "port": port, "proof": proof}).encode()
        headers = [(b"content-length", str(len(body)).encode())]
        headers.append((b"content-type", b"application/json"))
        headers.append((b"cache-control", b"no-store"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _body_refusal(headers: Headers, *, limit: int) -> tuple[int, str] | None:
    """A status and reason to refuse the request on its headers alone."""
    length = headers.get("content-length")
    if length is not None and "transfer-encoding" in headers:
        # RFC 9112 §6.1: a request smuggling attempt, or a broken client. The server
        # would read the chunked body whatever Content-Length says.
        return 400, "both Content-Length and Transfer-Encoding"
    if length is not None and (not length.isdigit() or int(length) > limit):
        return 413, "request too large"
    return None


async def _read_capped(receive: Receive, *, limit: int) -> bytes | None:
    """The whole body, or None as soon as it passes `limit` bytes."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(parts)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # then wait for the disconnect, as the server would

    return replay


def _error_body(detail: str, *, status: int, path: str) -> dict[str, Any]:
    """OpenAI's shape on its routes (its clients read `error.message`), ours elsewhere."""
    if not path.startswith(OPENAI_PATHS):
        return {"detail": detail}
    kind = "authentication_error" if status == 401 else "invalid_request_error"
    return {"error": {"message": detail, "type": kind, "param": None, "code": None}}


def _cors_origin(origin: str | None, *, allowed: list[str]) -> str | None:
    """The origin to echo in CORS headers: only one the person allowed by name."""
    if origin is None:
        return None
    normal = normalize_origin(origin)
    if normal is None or normal not in {normalize_origin(a) for a in allowed}:
        return None
    return origin


def _cors_headers(origin: str) -> list[tuple[bytes, bytes]]:
    return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]


def _preflight_headers(origin: str) -> list[tuple[bytes, bytes]]:
    return [
        *_cors_headers(origin),
        (b"access-control-allow-methods", b"GET, POST, PUT, DELETE, OPTIONS"),
        (b"access-control-allow-headers", b"authorization, content-type"),
        (b"access-control-max-age", str(CORS_MAX_AGE_S).encode()),
    ]


def _with_headers(send: Send, extra: list[tuple[bytes, bytes]]) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return wrapped


async def _reply(
    send: Send,
    *,
    status: int,
    detail: str | None,
    extra: list[tuple[bytes, bytes]] = (),
    path: str = "",
) -> None:
    body = (
        b""
        if detail is None
        else json.dumps(_error_body(detail, status=status, path=path)).encode()
    )
    headers = [(b"content-length", str(len(body)).encode()), *extra]
    if body:
        headers.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
