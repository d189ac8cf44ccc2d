"""A tiny Hugging Face hub on loopback: the model-info API and `resolve` URLs with
Range support, serving files from a dict. Counts the bytes it sends."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(kw_only=True)
class FakeRepo:
    repo_id: str
    files: dict[str, bytes]
    sha: str = "0123456789abcdef0123456789abcdef01234567"
    gated: bool = False
    bytes_sent: int = 0
    requests: int = 0
    ranges: list[str] = field(default_factory=list)
    slow_s: float = 0.0  # a pause between 64 KiB writes, so a test can cancel midway


@contextmanager
def fake_hub(repos: list[FakeRepo]) -> Iterator[str]:
    by_id = {r.repo_id: r for r in repos}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            for repo in by_id.values():
                if repo.repo_id in path:
                    repo.requests += 1
            if path.startswith("/api/models/"):
                repo = by_id.get(path.removeprefix("/api/models/"))
                if repo is None:
                    return self._send(404, b"{}")
                if repo.gated and not self.headers.get("Authorization"):
                    return self._send(401, b"{}")
                info = {
                    "id": repo.repo_id,
                    "sha": repo.sha,
                    "siblings": [
                        {"rfilename": name, "size": len(data)} for name, data in repo.files.items()
                    ],
                }
                return self._send(200, json.dumps(info).encode())
            for repo in by_id.values():
                prefix = f"/{repo.repo_id}/resolve/{repo.sha}/"
                if path.startswith(prefix):
                    data = repo.files.get(path.removeprefix(prefix))
                    if data is None:
                        return self._send(404, b"")
                    return self._file(repo, data)
            self._send(404, b"")

        def _file(self, repo: FakeRepo, data: bytes) -> None:
            header = self.headers.get("Range")
            start = 0
            if header:
                repo.ranges.append(header)
                start = int(header.removeprefix("bytes=").split("-", 1)[0])
                if start >= len(data):
                    return self._send(416, b"")
            body = data[start:]
            self.send_response(206 if header else 200)
            self.send_header("Content-Length", str(len(body)))
            if header:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            import time

            for i in range(0, len(body), 1 << 16):
                piece = body[i : i + (1 << 16)]
                try:
                    self.wfile.write(piece)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return
                repo.bytes_sent += len(piece)
                if repo.slow_s:
                    time.sleep(repo.slow_s)

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
