"""Talking to an OpenAI-compatible model server (vLLM, Ollama, llama.cpp's server):
its model list and streamed chat completions, with every failure turned into one
message a person can act on (ModelServerError).

Nothing is sent anywhere but the server the person named; the key goes only in the
Authorization header to it and never into a message, a log line or an exception
(`_scrub`). TLS certificates are verified, against `ca_file` when one is given.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from engine.errors import ModelLoadError
from engine.stream_cut import cut_on


class Cancel(Protocol):
    """A stop the stream heeds: `threading.Event` is one."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


# What a person is told to do when the server fails them; the window offers both.
FALLBACK_HINT = (
    "Your question is kept: ask again, or choose the local model or extractive "
    "answers (Model menu; `ragdoll model PATH` or `ragdoll model --none`)."
)


class ModelServerError(ModelLoadError):
    """The model server could not be used; the message says why and what to do."""


class ServerAddressError(ModelServerError, ValueError):
    """What was given is not a server to ask (no http(s) address, no CA file there)."""


@dataclass(frozen=True, kw_only=True)
class ServerTimeouts:
    """Nothing waits forever: `connect_s` to open the connection, `first_token_s`
    from the request to the answer's first token, `idle_s` between two pieces. A
    server that sends nothing at all is given up after the larger of the last two
    (the socket's read timeout: a long prompt's prefill may be silent); one that
    sends without writing the answer (keep-alives, empty pieces) after each's own."""

    connect_s: float = 5.0
    first_token_s: float = 120.0
    idle_s: float = 60.0


@dataclass(frozen=True, kw_only=True)
class ServerEndpoint:
    """Where generation goes: the server's base URL (with or without /v1), the model
    it serves, the key (never shown), and the CA file its certificate is checked
    against (None: the system's)."""

    url: str
    model: str = ""
    api_key: str | None = None
    ca_file: str | None = None
    timeouts: ServerTimeouts = ServerTimeouts()

    def __repr__(self) -> str:  # the key never shows, whoever prints this
        key = "set" if self.api_key else "none"
        return f"ServerEndpoint(url={self.url!r}, model={self.model!r}, api_key={key})"

    @property
    def base(self) -> str:
        url = self.url.strip().rstrip("/")
        return url if url.endswith("/v1") else f"{url}/v1"


@dataclass(frozen=True, kw_only=True)
class ChatDelta:
    """One streamed piece of a completion (text may be empty: a role or usage chunk)."""

    text: str
    finish_reason: str | None = None
    prompt_tokens: int | None = None  # from the usage chunk, where the server sends one
    cached_tokens: int | None = None  # prompt tokens the server's prefix cache served


def check_url(url: str) -> str:
    """The URL as given, or ModelServerError for one that is not http(s)."""
    parsed = httpx.URL(url.strip()) if url.strip() else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise ServerAddressError(f"not a server address: {url!r} (expected http://HOST:PORT)")
    return url.strip()


@dataclass(frozen=True, kw_only=True)
class ServerModel:
    """One entry of the server's /v1/models: its id and, where the server says
    (vLLM's max_model_len), its context window."""

    id: str
    context_length: int | None = None


def list_models(*, endpoint: ServerEndpoint) -> list[ServerModel]:
    """The server's /v1/models, or ModelServerError."""
    with http_client(endpoint=endpoint) as client:
        try:
            response = client.get(f"{endpoint.base}/models", headers=auth_headers(endpoint))
        except httpx.HTTPError as e:
            raise connection_error(endpoint=endpoint, error=e) from None
        if response.status_code != 200:
            raise status_error(endpoint=endpoint, response=response)
        try:
            data = response.json().get("data", [])
            return [
                ServerModel(id=str(m["id"]), context_length=_context_of(m))
                for m in data
                if isinstance(m, dict) and "id" in m
            ]
        except (ValueError, AttributeError) as e:
            raise ModelServerError(
                f"{endpoint.base}/models did not answer as an OpenAI-compatible server ({e})"
            ) from None


def _context_of(entry: dict[str, Any]) -> int | None:
    value = entry.get("max_model_len")
    return int(value) if isinstance(value, int) and value > 0 else None


def chat_stream(
    *,
    endpoint: ServerEndpoint,
    messages: Sequence[dict[str, str]],
    max_tokens: int,
    temperature: float = 0.0,
    cancel: Cancel | None = None,
    http: httpx.Client | None = None,
) -> Iterator[ChatDelta]:
    """The completion of `messages` as it streams (/v1/chat/completions, stream=true).
    Raises ModelServerError on any failure, timeouts included; stops when `cancel` is
    set (the connection is closed, so the server stops generating too). `http`: a
    client of `http_client(endpoint)` kept by the caller (its connections and TLS
    set-up reused: a new client costs 40-300 ms on a busy machine)."""
    body: dict[str, Any] = {
        "model": endpoint.model,
        "messages": list(messages),
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    t = endpoint.timeouts
    started = time.monotonic()
    got_token = False
    with (
        contextlib.nullcontext(http)
        if http is not None
        else http_client(endpoint=endpoint) as client
    ):
        try:
            with client.stream(
                "POST",
                f"{endpoint.base}/chat/completions",
                json=body,
                headers=auth_headers(endpoint),
                # Before the first token the server may prefill a long prompt in silence.
                timeout=httpx.Timeout(
                    connect=t.connect_s, read=max(t.first_token_s, t.idle_s), write=30, pool=5
                ),
            ) as response:
                if response.status_code != 200:
                    response.read()
                    raise status_error(endpoint=endpoint, response=response)
                last = time.monotonic()
                # A stopped answer closes the connection even while the server is
                # silent (a long prefill): the server sees it leave and stops too.
                with cut_on(cancel=cancel, response=response):
                    for data in _sse_data(response.iter_lines()):
                        now = time.monotonic()
                        if got_token and now - last > t.idle_s:
                            raise httpx.ReadTimeout("idle")
                        if not got_token and now - started > t.first_token_s:
                            raise httpx.ReadTimeout("first token")
                        if (cancel is not None and cancel.is_set()) or data == "[DONE]":
                            return
                        delta = _delta(data=data, endpoint=endpoint)
                        if delta is None:
                            continue
                        if delta.text:
                            got_token, last = True, now
                        yield delta
        except ModelServerError:
            raise
        except httpx.TimeoutException as e:
            if cancel is not None and cancel.is_set():
                return
            raise _timeout(endpoint=endpoint, error=e, got_token=got_token) from None
        except httpx.HTTPError as e:
            if cancel is not None and cancel.is_set():
                return
            raise connection_error(endpoint=endpoint, error=e, got_token=got_token) from None


def http_client(*, endpoint: ServerEndpoint) -> httpx.Client:
    """A client for `endpoint`: its certificates checked (against its CA file when it
    has one), no proxy or redirect."""
    t = endpoint.timeouts
    verify: ssl.SSLContext | bool = True
    if endpoint.ca_file:
        try:
            verify = ssl.create_default_context(cafile=endpoint.ca_file)
        except (OSError, ssl.SSLError) as e:
            raise ModelServerError(
                f"the CA file {endpoint.ca_file} could not be read: {e}"
            ) from None
    # trust_env=False: no proxy or .netrc from the environment sees the key or the passages.
    return httpx.Client(
        timeout=httpx.Timeout(connect=t.connect_s, read=t.idle_s, write=30, pool=5),
        verify=verify,
        trust_env=False,
        follow_redirects=False,  # a redirect would carry the key to another address
        # Room for every request the concurrency setting allows (at most 256).
        limits=httpx.Limits(max_connections=256, max_keepalive_connections=32),
    )


def auth_headers(endpoint: ServerEndpoint) -> dict[str, str]:
    return {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}


def _sse_data(lines: Iterator[str]) -> Iterator[str]:
    """The data of each server-sent event (one `data:` line each, as OpenAI sends)."""
    for line in lines:
        if line.startswith("data:"):
            yield line[5:].strip()


def _delta(*, data: str, endpoint: ServerEndpoint) -> ChatDelta | None:
    try:
        chunk = json.loads(data)
    except ValueError:
        raise ModelServerError(
            f"the model server at {endpoint.url} sent something that is not JSON mid-answer"
        ) from None
    if not isinstance(chunk, dict):
        return None
    if "error" in chunk:  # some servers report a failure inside the stream
        message = chunk["error"].get("message") if isinstance(chunk["error"], dict) else ""
        raise ModelServerError(
            f"the model server at {endpoint.url} failed mid-answer: "
            f"{_scrub(str(message or chunk['error']), endpoint)}. {FALLBACK_HINT}"
        )
    text, finish = "", None
    choices = chunk.get("choices") or []
    if choices and isinstance(choices[0], dict):
        text = (choices[0].get("delta") or {}).get("content") or ""
        finish = choices[0].get("finish_reason")
    usage = chunk.get("usage") if isinstance(chunk.get("usage"), dict) else None
    prompt = cached = None
    if usage is not None:
        prompt = usage.get("prompt_tokens")
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            cached = details.get("cached_tokens")
    if not text and finish is None and usage is None:
        return None
    return ChatDelta(text=text, finish_reason=finish, prompt_tokens=prompt, cached_tokens=cached)


def status_error(
    *,
    endpoint: ServerEndpoint,
    response: httpx.Response,
    role: str = "model server",
    hint: str = FALLBACK_HINT,
    error: type[ModelServerError] = ModelServerError,
) -> ModelServerError:
    """`response`'s refusal as one message; `role` names the server ("model server",
    "embeddings server"), `hint` says what to do, `error` is the class raised."""
    code = response.status_code
    detail = _scrub(_error_detail(response), endpoint)
    at = f"the {role} at {endpoint.url}"
    if code in (401, 403):
        what = f"{at} refused the API key ({code}): check the key file"
    elif code == 404:
        what = (
            f"{at} has no model {endpoint.model!r} or no OpenAI API at {endpoint.base} (404)"
            if endpoint.model
            else f"{at} has no OpenAI API at {endpoint.base} (404)"
        )
    elif code == 429:
        what = f"{at} is busy: it refused the request as one too many (429); wait, then ask again"
    elif code >= 500:
        what = f"{at} failed with an error of its own ({code})"
    else:
        what = f"{at} refused the request ({code})"
    return error(f"{what}{': ' + detail if detail else ''}. {hint}")


def _error_detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:200]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message", ""))[:200]
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])[:200]
    return str(error or "")[:200]


def _timeout(*, endpoint: ServerEndpoint, error: Exception, got_token: bool) -> ModelServerError:
    t = endpoint.timeouts
    if isinstance(error, httpx.ConnectTimeout):
        what = (
            f"the model server at {endpoint.url} did not accept a connection "
            f"within {t.connect_s:g} s"
        )
    elif got_token:
        what = f"the model server at {endpoint.url} stopped sending the answer for {t.idle_s:g} s"
    else:
        what = f"the model server at {endpoint.url} sent no answer within {t.first_token_s:g} s"
    return ModelServerError(f"{what}. {FALLBACK_HINT}")


def connection_error(
    *,
    endpoint: ServerEndpoint,
    error: Exception,
    got_token: bool = False,
    role: str = "model server",
    hint: str = FALLBACK_HINT,
    raised: type[ModelServerError] = ModelServerError,
) -> ModelServerError:
    """A connection's failure as one message (`role`, `hint`, `raised`: as
    `status_error`'s); a timeout is told apart by whether the answer had begun."""
    at = f"the {role} at {endpoint.url}"
    if isinstance(error, httpx.TimeoutException):
        return _timeout(endpoint=endpoint, error=error, got_token=got_token)
    text = str(error)
    if isinstance(error, httpx.ConnectError):
        if "CERTIFICATE_VERIFY_FAILED" in text or "certificate" in text.lower():
            what = (
                f"{at} has a certificate this machine does not trust; give its CA file "
                "(the server dialog's CA file, or --ca-file)"
            )
        else:
            what = f"cannot reach {at}: is it running? ({_scrub(text, endpoint)})"
    elif isinstance(error, httpx.RemoteProtocolError | httpx.ReadError):
        what = f"the connection to {at} dropped mid-answer"
    else:
        what = f"{at} could not be used: {type(error).__name__}: {_scrub(text, endpoint)}"
    return raised(f"{what}. {hint}")


def _scrub(text: str, endpoint: ServerEndpoint) -> str:
    """`text` without the key, should a server echo it back."""
    key = endpoint.api_key
    return text.replace(key, "***") if key else text
