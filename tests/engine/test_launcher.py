"""engine/service/launcher.py: a client attaches to an engine that is listening but slow to
answer (a first start under load) instead of calling it gone, and never to a pid
that is not the engine's any more."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from engine.errors import EngineUnavailableError
from engine.paths import Paths, resolve_paths
from engine.service.auth import identity_proof
from engine.service.launcher import ensure_engine, this_process, write_endpoint


class SlowEngine(BaseHTTPRequestHandler):
    """An engine too busy to answer at once: its proof of identity comes in 3 s."""

    def do_GET(self) -> None:
        time.sleep(3)  # longer than the first look's 2 s
        query = parse_qs(urlsplit(self.path).query)
        port = self.server.server_address[1]
        proof = identity_proof(
            token="token", challenge=query["challenge"][0], pid=os.getpid(), port=port
        )
        body = json.dumps({"pid": os.getpid(), "port": port, "proof": proof}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _record_this_process(paths: Paths, *, url: str) -> None:
    """The endpoint and lock files as an engine in this process writes them."""
    process = this_process()
    write_endpoint(paths=paths, url=url, process=process)
    paths.engine_lock.write_text(json.dumps({"pid": process.pid, "started": process.started}))


def test_a_listening_engine_that_answers_slowly_is_waited_for(tmp_path: Path) -> None:
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path)}).ensure()
    paths.token_file.write_text("token")
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowEngine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        _record_this_process(paths, url=url)
        started = time.monotonic()
        handle = ensure_engine(paths=paths, start=False, wait_s=30)
        assert handle.endpoint.base_url == url and not handle.started_here
        assert 3 <= time.monotonic() - started < 30
    finally:
        server.shutdown()


def test_a_pid_reused_by_another_program_is_no_engine(tmp_path: Path) -> None:
    """The endpoint names a live pid, but not the process that wrote it (its start
    time differs): the engine died and its pid went to someone else."""
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path)}).ensure()
    paths.token_file.write_text("token")
    url = "http://127.0.0.1:9"
    _record_this_process(paths, url=url)
    data = json.loads(paths.endpoint_file.read_text())
    data["started"] -= 3600.0
    paths.endpoint_file.write_text(json.dumps(data))
    paths.engine_lock.write_text(json.dumps({"pid": data["pid"], "started": data["started"]}))
    with pytest.raises(EngineUnavailableError, match="no engine is running"):
        ensure_engine(paths=paths, start=False, wait_s=30)


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
