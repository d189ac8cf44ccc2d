"""engine/launcher.py: a client attaches to an engine that is listening but slow to
answer (a first start under load) instead of calling it gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from engine.errors import EngineUnavailableError
from engine.launcher import ensure_engine
from engine.paths import resolve_paths


class SlowStatus(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(3)  # longer than the first look's 2 s
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


def test_a_listening_engine_that_answers_slowly_is_waited_for(tmp_path: Path) -> None:
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path)}).ensure()
    paths.token_file.write_text("token")
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowStatus)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        paths.endpoint_file.write_text(json.dumps({"url": url, "pid": os.getpid()}))
        started = time.monotonic()
        handle = ensure_engine(paths=paths, start=False, wait_s=30)
        assert handle.endpoint.base_url == url and not handle.started_here
        assert 3 <= time.monotonic() - started < 30
    finally:
        server.shutdown()


def test_an_endpoint_whose_process_is_gone_means_no_engine(tmp_path: Path) -> None:
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path)}).ensure()
    paths.token_file.write_text("token")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    paths.endpoint_file.write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": gone.pid}))
    started = time.monotonic()
    with pytest.raises(EngineUnavailableError, match="no engine is running"):
        ensure_engine(paths=paths, start=False, wait_s=30)
    assert time.monotonic() - started < 10
