"""A small OpenAI-compatible server on loopback (real HTTP, real sockets) for the
model-server error paths: the model asked for picks the behaviour.

  stub-model  streams `ANSWER` piece by piece, then a usage chunk
  broken      500          busy   429          stall  one piece, then silence
  drop        one piece, then the connection is cut mid-stream
Any request without the right key (when `key` is set) gets 401. Every chat request's
headers and body are kept (`requests`), so tests can assert the prompt's layout.

/v1/embeddings answers the same way, by model:

  stub-embed  words hashed into EMBED_DIM buckets (texts sharing words are near);
              multilingual-e5-small, nomic-embed-text:latest too (names with task
              prefixes)
  broken 500, busy 429, stall (silence), drop (the connection cut before a reply)
  shifty      EMBED_DIM dimensions, then one more from its second request on
  per-token   one vector per word, as llama-cpp-python's server sends for a decoder
Each embeddings request's body is kept (`embed_requests`).
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = "The honey is extracted in late August [1]."
MODELS = ("stub-model", "broken", "busy", "stall", "drop")
EMBED_MODELS = (
    "stub-embed",
    "shifty",
    "multilingual-e5-small",
    "nomic-embed-text:latest",
    "per-token",
)
EMBED_DIM = 64


@dataclass
class StubState:
    key: str | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    embed_requests: list[dict[str, Any]] = field(default_factory=list)
    connections: list[socket.socket] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    piece_delay_s: float = 0.0
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class Stub:
    url: str
    state: StubState


def _handler(state: StubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def setup(self) -> None:
            super().setup()
            with state.lock:
                state.connections.append(self.connection)

        def _authorized(self) -> bool:
            if state.key is None or self.headers.get("Authorization") == f"Bearer {state.key}":
                return True
            self._json(401, {"error": {"message": "Incorrect API key provided"}})
            return False

        def _json(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if not self._authorized():
                return
            if self.path.rstrip("/") == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": m} for m in MODELS]})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            if not self._authorized():
                return
            if self.path.rstrip("/") == "/v1/embeddings":
                self._embeddings(body)
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._json(404, {"error": {"message": "not found"}})
                return
            with state.lock:
                state.requests.append(body)
                state.headers.append(dict(self.headers))
            model = body.get("model")
            if model == "broken":
                self._json(500, {"error": {"message": "CUDA out of memory"}})
                return
            if model == "busy":
                self._json(429, {"error": {"message": "Too many requests"}})
                return
            if model not in MODELS:
                self._json(404, {"error": {"message": f"The model `{model}` does not exist."}})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            with state.lock:
                state.in_flight += 1
                state.most_in_flight = max(state.most_in_flight, state.in_flight)
            counted = True

            def leave() -> None:  # once, from this thread: at the answer's end or on error
                nonlocal counted
                if counted:
                    counted = False
                    with state.lock:
                        state.in_flight -= 1

            try:
                self._stream(model=str(model), leave=leave)
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                leave()

        def _embeddings(self, body: dict[str, Any]) -> None:
            with state.lock:
                state.embed_requests.append(body)
                calls = len(state.embed_requests)
            model = body.get("model")
            if model == "broken":
                self._json(500, {"error": {"message": "CUDA out of memory"}})
            elif model == "busy":
                self._json(429, {"error": {"message": "Too many requests"}})
            elif model == "stall":
                state.release.wait(timeout=30)
            elif model == "drop":
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
            elif model not in EMBED_MODELS:
                self._json(404, {"error": {"message": f"The model `{model}` does not exist."}})
            else:
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                dim = EMBED_DIM + (1 if model == "shifty" and calls > 1 else 0)
                data = [
                    {"object": "embedding", "index": i, "embedding": word_vector(t, dim=dim)}
                    for i, t in enumerate(texts)
                ]
                if model == "per-token":
                    for row, text in zip(data, texts, strict=True):
                        row["embedding"] = [word_vector(w) for w in text.split()]
                self._json(200, {"object": "list", "data": data[::-1], "model": model})

        def _event(self, data: str) -> None:
            payload = f"data: {data}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()

        def _chunk(self, text: str) -> None:
            self._event(json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}))

        def _stream(self, *, model: str, leave: Callable[[], None]) -> None:
            """`leave()` before the answer's end is sent: once the client has it, it may
            start its next request, and this thread (late on a busy machine) must not
            still count the request then, or the count exceeds the client's bound."""
            pieces = list(_pieces(ANSWER))
            if model in ("stall", "drop"):
                self._chunk(pieces[0])
                if model == "drop":
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                state.release.wait(timeout=30)  # silent until the test ends
                return
            for piece in pieces:
                if state.piece_delay_s:
                    time.sleep(state.piece_delay_s)
                self._chunk(piece)
            leave()
            self._event(
                json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            )
            usage = {
                "prompt_tokens": 321,
                "completion_tokens": len(pieces),
                "prompt_tokens_details": {"cached_tokens": 300},
            }
            self._event(json.dumps({"choices": [], "usage": usage}))
            self._event("[DONE]")
            self.wfile.write(b"0\r\n\r\n")

    return Handler


def word_vector(text: str, *, dim: int = EMBED_DIM) -> list[float]:
    """Counts of `text`'s words hashed into `dim` buckets, not normalised (as some
    servers send them): texts sharing words are near."""
    vector = [0.0] * dim
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vector[zlib.crc32(word.encode()) % dim] += 1.0
    return vector


def _pieces(text: str) -> Iterator[str]:
    words = text.split(" ")
    for i, w in enumerate(words):
        yield w if i == 0 else " " + w


@contextmanager
def model_server_stub(*, key: str | None = None) -> Iterator[Stub]:
    state = StubState(key=key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="stub-server", daemon=True)
    thread.start()
    try:
        yield Stub(url=f"http://127.0.0.1:{server.server_address[1]}", state=state)
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        # Kept-alive connections would go on being served: a stopped server drops them.
        for connection in state.connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
