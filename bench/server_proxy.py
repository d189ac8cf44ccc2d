"""A timing relay between RAGDoll and a model server, on loopback: what each chat
request sent, when it arrived, and when the server's first piece of text came back.
The server's own time to first token of a request is then measured on the very
request RAGDoll sent, and RAGDoll's share of an answer's first token is the rest.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


@dataclass
class Relayed:
    """One chat request as it passed (perf_counter seconds)."""

    body: dict[str, Any]
    arrived: float
    first_text: float | None = None
    ended: float | None = None

    @property
    def server_first_token_s(self) -> float | None:
        return None if self.first_text is None else self.first_text - self.arrived


@dataclass
class Relay:
    url: str
    requests: list[Relayed] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(*, upstream: str, relay: Relay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            response = httpx.get(f"{upstream}{self.path}", timeout=30)
            self._send(response.status_code, response.content, response.headers)

        def do_POST(self) -> None:
            arrived = time.perf_counter()
            data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = json.loads(data or b"{}")
            record = Relayed(body=body, arrived=arrived)
            with relay.lock:
                relay.requests.append(record)
            try:
                self._relay(data=data, record=record)
            except (BrokenPipeError, ConnectionResetError, httpx.HTTPError):
                record.ended = time.perf_counter()  # a side hung up: RAGDoll stopped reading

        def _relay(self, *, data: bytes, record: Relayed) -> None:
            timeout = httpx.Timeout(connect=10, read=3600, write=60, pool=10)
            with (
                httpx.Client(timeout=timeout) as client,
                client.stream(
                    "POST",
                    f"{upstream}{self.path}",
                    content=data,
                    headers={"Content-Type": "application/json"},
                ) as response,
            ):
                if response.status_code != 200:
                    self._send(response.status_code, response.read(), response.headers)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for line in response.iter_lines():
                    if record.first_text is None and _has_text(line):
                        record.first_text = time.perf_counter()
                    payload = (line + "\n").encode()
                    self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                record.ended = time.perf_counter()

        def _send(self, code: int, content: bytes, headers: Any) -> None:
            self.send_response(code)
            self.send_header("Content-Type", headers.get("content-type", "application/json"))
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

    return Handler


def _has_text(line: str) -> bool:
    if not line.startswith("data:") or '"content"' not in line:
        return False
    try:
        chunk = json.loads(line[5:].strip())
        return bool(chunk["choices"][0]["delta"].get("content"))
    except (ValueError, KeyError, IndexError, TypeError):
        return False


@contextmanager
def timing_relay(*, upstream: str) -> Iterator[Relay]:
    """A relay to `upstream` on a free loopback port, until the block ends."""
    relay = Relay(url="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(upstream=upstream, relay=relay))
    server.daemon_threads = True
    relay.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="timing-relay", daemon=True)
    thread.start()
    try:
        yield relay
    finally:
        server.shutdown()
        server.server_close()
