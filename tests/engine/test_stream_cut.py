"""A client blocked in a read (an answer waiting for its turn sends nothing) ends
its stream as soon as its cancel is set, from another thread."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import pytest

from engine.service.client import EngineClient
from engine.service.launcher import Endpoint


class _Silent(http.server.BaseHTTPRequestHandler):
    """Starts an event stream and then sends nothing, as a queued answer does."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        self.server.gone.wait(10)  # type: ignore[attr-defined]

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def silent_server() -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Silent)
    server.gone = threading.Event()  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.gone.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()


def test_cancel_ends_a_read_that_waits_for_the_first_event(
    silent_server: http.server.ThreadingHTTPServer,
) -> None:
    port = silent_server.server_address[1]
    endpoint = Endpoint(base_url=f"http://127.0.0.1:{port}", token="t")
    client = EngineClient(endpoint=endpoint)
    cancel = threading.Event()
    got: list[object] = []
    reader = threading.Thread(
        target=lambda: got.extend(client.ask_stream(question="q", cancel=cancel)), daemon=True
    )
    reader.start()
    time.sleep(0.3)
    assert reader.is_alive()  # blocked in the read
    cancel.set()
    reader.join(timeout=2.0)
    assert not reader.is_alive()
    assert got == []  # no error either: the caller asked for the end
    client.close()
