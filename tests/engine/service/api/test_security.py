"""Refusals, from a real engine process: the right status for each, and nothing
read from outside the watched folders. The token never reaches a log."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engine.errors import EngineRequestError
from engine.paths import resolve_paths
from engine.service.auth import identity_proof
from tests.support.engine import RunningEngine


def _http(engine: RunningEngine, *, token: str | None = "ok", **headers: str) -> httpx.Client:
    endpoint = engine.client.endpoint
    if token == "ok":
        token = endpoint.token
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.Client(base_url=endpoint.base_url, headers=headers, trust_env=False, timeout=30)


@pytest.mark.parametrize(
    ("token", "headers", "status"),
    [
        (None, {}, 401),
        ("wrong-token", {}, 401),
        ("ok", {"Host": "evil.example"}, 403),  # DNS rebinding
        ("ok", {"Host": "127.0.0.1.evil.example:80"}, 403),
        ("ok", {"Origin": "http://evil.example"}, 403),  # a web page's cross-site request
        ("ok", {"Origin": "http://localhost.evil.example"}, 403),
        ("ok", {"Origin": "null"}, 403),
        ("ok", {"Origin": "http://localhost:3000"}, 200),  # a page on this machine
        ("ok", {"Origin": "http://127.0.0.1:8080"}, 200),
        ("ok", {}, 200),
    ],
)
def test_each_request_is_checked(
    api_engine: RunningEngine, token: str | None, headers: dict[str, str], status: int
) -> None:
    with _http(api_engine, token=token, **headers) as http:
        for path in ("/v1/models", "/v1/status", "/openapi.json"):
            response = http.get(path)
            assert response.status_code == status, (path, response.text)
            assert "access-control-allow-origin" not in response.headers  # no CORS by default


def test_docs_pages_are_not_served(api_engine: RunningEngine) -> None:
    # Their pages would load scripts from a CDN.
    with _http(api_engine) as http:
        assert http.get("/docs").status_code == 404
        assert http.get("/openapi.json").json()["paths"]["/v1/chat/completions"]


def test_oversize_bodies_are_refused(api_engine: RunningEngine) -> None:
    big = b'{"question": "' + b"a" * (1 << 20) + b'"}'

    def chunked() -> Iterator[bytes]:
        for start in range(0, len(big), 64 << 10):
            yield big[start : start + (64 << 10)]

    with _http(api_engine) as http:
        headers = {"Content-Type": "application/json"}
        assert http.post("/v1/ask", content=big, headers=headers).status_code == 413
        # No Content-Length: the guard counts the chunks as they come.
        response = http.post("/v1/chat/completions", content=chunked(), headers=headers)
        assert response.status_code == 413
        small = b'{"input": "raised beds"}'
        response = http.post("/v1/embeddings", content=iter([small]), headers=headers)
        assert response.status_code == 200  # a small chunked body passes


def test_paths_outside_the_watched_folders_are_refused(
    api_engine: RunningEngine, notes_dir: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("The safe combination is 12-34-56.")
    link = notes_dir / "innocent.txt"
    os.symlink(secret, link)
    try:
        for path in (
            str(secret),
            str(notes_dir / ".." / ".." / tmp_path.name / "secret.txt"),
            str(link),  # a symlink in a watched folder to a file outside it
            "/etc/passwd",
            "relative/path.txt",
        ):
            with pytest.raises(EngineRequestError) as refused:
                api_engine.client.ingest(paths=[path])
            assert refused.value.status == 403, path
            assert "outside every watched folder" in str(refused.value)
    finally:
        link.unlink()
    assert not any("secret" in d.path for d in api_engine.client.documents())
    answer = api_engine.client.ask(question="What is the safe combination?")
    assert "12-34-56" not in answer.answer


def test_source_endpoint_serves_only_indexed_passages(api_engine: RunningEngine) -> None:
    with _http(api_engine) as http:
        for chunk_id in ("..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd", "nope"):
            assert http.get(f"/v1/chunks/{chunk_id}/source").status_code == 404


def test_an_allowed_origin_gets_cors_and_only_it(api_engine: RunningEngine) -> None:
    client = api_engine.client
    allowed = "http://notes.example:8080"
    try:
        settings = client.set_server_settings(allowed_origins=[allowed])
        assert settings.allowed_origins == [allowed]
        with _http(api_engine, token=None, Origin=allowed) as http:
            preflight = http.options(
                "/v1/chat/completions",
                headers={
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "authorization, content-type",
                },
            )
            assert preflight.status_code == 204  # a preflight carries no token
            assert preflight.headers["access-control-allow-origin"] == allowed
            assert "authorization" in preflight.headers["access-control-allow-headers"]
            # Without the token the real request is still refused, readable by the page.
            refused = http.get("/v1/models")
            assert refused.status_code == 401
            assert refused.headers["access-control-allow-origin"] == allowed
        with _http(api_engine, Origin=allowed) as http:
            response = http.get("/v1/models")
            assert response.status_code == 200
            assert response.headers["access-control-allow-origin"] == allowed
        with _http(api_engine, token=None, Origin="http://other.example") as http:
            preflight = http.options("/v1/models", headers={"Access-Control-Request-Method": "GET"})
            assert preflight.status_code == 403
            assert "access-control-allow-origin" not in preflight.headers
        with pytest.raises(EngineRequestError, match="not an origin"):
            client.set_server_settings(allowed_origins=["*"])
    finally:
        client.set_server_settings(allowed_origins=[])
    with _http(api_engine, Origin=allowed) as http:
        assert http.get("/v1/models").status_code == 403  # withdrawn at once


def test_the_token_never_reaches_the_log(api_engine: RunningEngine) -> None:
    token = api_engine.client.endpoint.token
    with _http(api_engine, token="a-guessed-token-that-must-not-be-logged") as http:
        assert http.get("/v1/status").status_code == 401
    with _http(api_engine) as http:
        assert http.get("/v1/chunks/missing/source").status_code == 404
        assert http.post("/v1/ask", json={"question": "garden budget?"}).status_code == 200
    paths = resolve_paths(env={"RAGDOLL_HOME": str(api_engine.home)})
    log = paths.engine_log.read_text(encoding="utf-8")
    assert "listening on" in log  # the right log, and it is written
    assert token not in log
    assert "a-guessed-token" not in log
    token_file = paths.token_file
    assert token_file.stat().st_mode & 0o077 == 0


def test_the_engine_proves_who_it_is_without_the_token(api_engine: RunningEngine) -> None:
    endpoint = api_engine.client.endpoint
    port = int(endpoint.base_url.rsplit(":", 1)[1])
    challenge = "5a" * 32
    with _http(api_engine, token=None) as http:
        answer = http.get("/v1/identity", params={"challenge": challenge})
        assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store"
        body = answer.json()
        assert body["pid"] == api_engine.pid and body["port"] == port
        assert body["proof"] == identity_proof(
            token=endpoint.token, challenge=challenge, pid=api_engine.pid, port=port
        )
        assert endpoint.token not in answer.text
        assert http.get("/v1/identity", params={"challenge": "x"}).status_code == 400
        assert http.post("/v1/identity", params={"challenge": challenge}).status_code == 405
        foreign = http.get(
            "/v1/identity", params={"challenge": challenge}, headers={"Host": "evil.example"}
        )
        assert foreign.status_code == 403  # the Host check comes first, as for every path
