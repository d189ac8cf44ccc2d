"""The token goes only to the engine: a client makes whatever answers at the
endpoint file's address prove it is the engine (a challenge answered with a key
derived from the token, and the pid and start time of the lock file) before it
sends the token, and every engine start makes a new token. Through real engines."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from contextlib import suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from engine.errors import EngineRequestError, EngineUnavailableError
from engine.paths import resolve_paths
from engine.service.client import EngineClient
from tests.support.engine import process_alive


class _Recorder(ThreadingHTTPServer):
    """A local program that took the dead engine's port: it answers 200 to
    everything, with whatever proof it can make up, and keeps what it was sent."""

    allow_reuse_address = True

    def __init__(self, port: int) -> None:
        self.seen: list[dict[str, str]] = []
        super().__init__(("127.0.0.1", port), _Answer)


class _Answer(BaseHTTPRequestHandler):
    server: _Recorder

    def do_GET(self) -> None:
        self.server.seen.append({"path": self.path, **dict(self.headers)})
        body = json.dumps({"pid": 1, "port": 1, "proof": "00" * 32, "state": "ready"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


def _bind(port: int) -> _Recorder:
    """The port, once the killed engine's socket is gone (its process reaped)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return _Recorder(port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_a_listener_on_a_dead_engines_port_never_gets_the_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGDOLL_HOME", str(tmp_path / "home"))
    paths = resolve_paths()
    first = EngineClient.connect(paths=paths, start=True, wait_s=120)
    second: EngineClient | None = None
    recorder: _Recorder | None = None
    try:
        pid = first.status().pid
        old_token = first.endpoint.token
        port = urlsplit(first.endpoint.base_url).port
        assert port is not None
        first.close()
        os.kill(pid, signal.SIGKILL)  # as the OOM killer would: engine.json stays
        deadline = time.monotonic() + 30
        while process_alive(pid):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert paths.endpoint_file.exists()

        recorder = _bind(port)
        threading.Thread(target=recorder.serve_forever, daemon=True).start()
        second = EngineClient.connect(paths=paths, start=True, wait_s=120)
        sent = [h for h in recorder.seen for k, v in h.items() if k.lower() == "authorization"]
        leaked = [h["path"] for h in recorder.seen if any(old_token in v for v in h.values())]
        assert sent == [] and leaked == [], f"the listener was sent the token: {leaked or sent}"
        assert second.status().pid != pid and second.endpoint.base_url != first.endpoint.base_url
        # A new engine, a new token: a token stolen from the last one opens nothing.
        new_token = paths.token_file.read_text().strip()
        assert new_token == second.endpoint.token and new_token != old_token
        with httpx.Client(base_url=second.endpoint.base_url, trust_env=False) as http:
            stale = http.get("/v1/status", headers={"Authorization": f"Bearer {old_token}"})
            assert stale.status_code == 401
    finally:
        if recorder is not None:
            recorder.shutdown()
            recorder.server_close()
        if second is not None:
            _stop(second)


def _stop(client: EngineClient) -> None:
    with suppress(EngineUnavailableError, EngineRequestError):
        pid = client.status().pid
        client.shutdown()
        deadline = time.monotonic() + 30
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    client.close()
