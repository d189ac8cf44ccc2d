"""What a hostile or broken client sends, refused before it can hurt, through the
real engine process: bodies whose headers lie about their size, text that is not
text, clients that send slowly."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engine.service.api.openai_routes import OPENAI_PATHS
from tests.support.engine import RunningEngine

SURROGATE = b'"\\ud800"'

# Every route that takes text, with a body that puts a lone surrogate in a text field.
TEXT_ROUTES = [
    ("POST", "/v1/search", b'{"query": %s}'),
    ("POST", "/v1/ask", b'{"question": %s}'),
    ("POST", "/v1/embeddings", b'{"input": %s}'),
    ("POST", "/v1/embeddings", b'{"input": ["fine", %s]}'),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": %s}]}'),
    (
        "POST",
        "/v1/chat/completions",
        b'{"stream": true, "messages": [{"role": "user", "content": %s}]}',
    ),
    ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}], %s: 1}'),
    ("POST", "/v1/folders", b'{"path": %s}'),
    ("DELETE", "/v1/folders", b'{"path": %s}'),
    ("POST", "/v1/ingest", b'{"paths": [%s]}'),
    ("PUT", "/v1/settings/model", b'{"model": %s}'),
    ("PUT", "/v1/settings/server", b'{"allowed_origins": [%s]}'),
    ("POST", "/v1/models/download", b'{"repo_id": %s}'),
]


def _http(engine: RunningEngine) -> httpx.Client:
    endpoint = engine.client.endpoint
    return httpx.Client(
        base_url=endpoint.base_url,
        headers={"Authorization": f"Bearer {endpoint.token}", "Content-Type": "application/json"},
        trust_env=False,
        timeout=30,
    )


def _raw(engine: RunningEngine, request: bytes, *, wait_s: float = 10.0) -> bytes:
    """Send bytes as they are (httpx would fix the headers) and read the reply: up to
    its Content-Length where it has one (the engine may keep the connection open after
    it, which cost a test the whole `wait_s`), else until the connection closes."""
    url = httpx.URL(engine.client.endpoint.base_url)
    with socket.create_connection((url.host, url.port), timeout=wait_s) as sock:
        sock.sendall(request)
        reply = b""
        try:
            while not _complete(reply) and (chunk := sock.recv(65536)):
                reply += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return reply


def _complete(reply: bytes) -> bool:
    """Whether `reply` holds a whole response with a Content-Length."""
    head, sep, body = reply.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


@pytest.mark.parametrize(("method", "path", "body"), TEXT_ROUTES)
def test_a_lone_surrogate_is_refused_on_every_text_route(
    api_engine: RunningEngine, method: str, path: str, body: bytes
) -> None:
    with _http(api_engine) as http:
        response = http.request(method, path, content=body % SURROGATE)
    assert response.status_code == 400, response.text
    reply = response.json()
    if path.startswith(OPENAI_PATHS):  # OpenAI's shape there: its clients read it
        assert "surrogate" in reply["error"]["message"]
        assert reply["error"]["type"] == "invalid_request_error"
    else:
        assert "surrogate" in reply["detail"]


def test_an_invalid_origin_is_never_saved(api_engine: RunningEngine) -> None:
    with _http(api_engine) as http:
        before = http.get("/v1/settings/server")
        refused = http.put(
            "/v1/settings/server", content=b'{"allowed_origins": ["http://a\\udc80.example"]}'
        )
        assert refused.status_code == 400
        after = http.get("/v1/settings/server")
    assert after.status_code == 200
    assert after.json() == before.json()


def test_content_length_with_chunked_is_refused_before_the_body(api_engine: RunningEngine) -> None:
    token = api_engine.client.endpoint.token
    head = (
        "POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        "Content-Length: 10\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    # 4 MiB announced as 10 bytes: the reply comes before the body is read.
    chunk = b"x" * (1 << 20)
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(4)) + b"0\r\n\r\n"
    reply = _raw(api_engine, head + body)
    assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
    assert b"Content-Length and Transfer-Encoding" in reply


def test_a_chunked_body_over_the_limit_is_refused(api_engine: RunningEngine) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"query": "'
        for _ in range(24):
            yield b"a" * (64 << 10)
        yield b'"}'

    with _http(api_engine) as http:
        assert http.post("/v1/search", content=chunks()).status_code == 413


def test_the_bearer_scheme_is_case_insensitive(api_engine: RunningEngine) -> None:
    endpoint = api_engine.client.endpoint
    for scheme in ("bearer", "BEARER", "Bearer"):
        headers = {"Authorization": f"{scheme} {endpoint.token}"}
        response = httpx.get(f"{endpoint.base_url}/v1/status", headers=headers, trust_env=False)
        assert response.status_code == 200, scheme
    wrong = {"Authorization": f"Basic {endpoint.token}"}
    assert httpx.get(f"{endpoint.base_url}/v1/status", headers=wrong).status_code == 401


def test_a_wrong_method_says_which_are_allowed(api_engine: RunningEngine) -> None:
    with _http(api_engine) as http:
        for path, allowed in (
            ("/v1/status", {"GET"}),
            ("/v1/chat/completions", {"POST"}),
            ("/v1/folders", {"GET", "POST", "DELETE"}),  # three routes, one path
        ):
            response = http.patch(path)
            assert response.status_code == 405, path
            assert set(response.headers["allow"].replace(" ", "").split(",")) - {"HEAD"} == allowed


def test_a_client_that_sends_its_headers_slowly_is_cut_off(api_engine: RunningEngine) -> None:
    url = httpx.URL(api_engine.client.endpoint.base_url)
    with socket.create_connection((url.host, url.port), timeout=30) as sock:
        sock.sendall(b"GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < 25:
            try:
                sock.sendall(b"X-Slow: 1\r\n")  # a byte now and then, never the end
                sock.settimeout(1.0)
                if sock.recv(1024) == b"":
                    closed = True
                    break
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
    assert closed
    assert time.monotonic() - started < 20  # the deadline is 10 s


def test_a_client_that_sends_its_body_slowly_is_cut_off(api_engine: RunningEngine) -> None:
    token = api_engine.client.endpoint.token
    url = httpx.URL(api_engine.client.endpoint.base_url)
    head = (
        "POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        "Content-Length: 100\r\n\r\n"
    ).encode()
    with socket.create_connection((url.host, url.port), timeout=60) as sock:
        sock.sendall(head + b'{"query": ')
        reply = sock.recv(65536)
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]


def test_a_model_path_answers_the_same_wherever_it_points(
    api_engine: RunningEngine, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("not a model")
    paths = [
        str(tmp_path / "nothing" / "here"),  # does not exist
        str(tmp_path / "empty"),  # exists, no config.json
        str(tmp_path / "file.txt"),  # a file
        "/etc",
        "/" + "m" * 256,  # too long for a file name: [Errno 36] before
    ]
    replies = set()
    with _http(api_engine) as http:
        for path in paths:
            response = http.put("/v1/settings/model", json={"model": path})
            assert response.status_code == 400, (path, response.text)
            replies.add(response.json()["detail"].replace(path, "PATH"))
        # A bare name is a Hugging Face repo id: looked up in the cache, never an errno.
        response = http.put("/v1/settings/model", json={"model": "m" * 256})
        assert response.status_code == 400 and "Errno" not in response.text
        assert http.get("/v1/settings").json()["model"] is None  # nothing saved
    assert len(replies) == 1, replies
    assert "Errno" not in replies.pop()


def test_the_schema_and_the_server_agree(api_engine: RunningEngine) -> None:
    with _http(api_engine) as http:
        schema = http.get("/openapi.json").json()["components"]["schemas"]
        # 26.0 is an integer to JSON Schema: the server takes it too.
        assert http.post("/v1/search", json={"query": "bees", "k": 3.0}).status_code == 200
        with http.stream("POST", "/v1/ask", json={"question": "bees?", "k": 3.0}) as r:
            assert r.status_code == 200
        chat = {"messages": [{"role": "user", "content": "bees?"}], "ragdoll": {"k": 2.0}}
        assert http.post("/v1/chat/completions", json=chat).status_code == 200
        assert http.post("/v1/search", json={"query": "bees", "k": 3.5}).status_code == 422
        # What the server refuses, the schema does not allow.
        assert http.post("/v1/embeddings", json={"input": []}).status_code == 400
        (list_form,) = [
            s for s in schema["EmbeddingsBody"]["properties"]["input"]["anyOf"] if "items" in s
        ]
        assert list_form["minItems"] == 1
        only_tool = {"messages": [{"role": "tool", "content": "x"}]}
        assert http.post("/v1/chat/completions", json=only_tool).status_code == 400
        contains = schema["ChatCompletionBody"]["properties"]["messages"]["contains"]
        assert contains["properties"]["role"] == {"const": "user"}
