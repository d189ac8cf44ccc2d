"""llama-cpp-python's OpenAI-compatible server as a real model server on loopback, for
the model-server benchmark and its integration test: started as its own process
(`python -m llama_cpp.server`), waited for, stopped; and the prefix its KV cache
served for each request, read from its log ("N prefix-match hit").

Needs the `server` extra (`pip install 'ragdoll-desktop[server-bench]'`): never a
dependency of the app.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench import peer_env

_PREFIX_HIT = re.compile(r"(\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
SERVER_MODULES = ("llama_cpp", "sse_starlette", "starlette_context", "pydantic_settings")


def missing_server_parts() -> list[str]:
    """The modules llama-cpp-python's server needs that are not installed."""
    return [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]


@dataclass(frozen=True, kw_only=True)
class LlamaServer:
    url: str  # http://127.0.0.1:PORT
    alias: str  # the model's name at /v1/models
    log: Path
    pid: int

    def prefix_hits(self) -> list[tuple[int, int]]:
        """(tokens the KV cache served, tokens evaluated) of each prompt so far."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return [(int(a), int(b)) for a, b in _PREFIX_HIT.findall(text)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def llama_server(
    *,
    model: Path,
    log: Path,
    alias: str = "qwen-0.5b",
    context: int = 4096,
    threads: int | None = None,
    wait_s: float = 300.0,
    embedding: bool = False,
) -> Iterator[LlamaServer]:
    """The server for `model` (a GGUF file) on a free loopback port, until the block ends;
    `embedding`: it serves /v1/embeddings (and no completions)."""
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(context),
        "--n_threads",
        str(threads or max(1, (os.cpu_count() or 2))),
        # Its state cache: a conversation's earlier turns are served from it when
        # another prompt ran in between (the KV of the last prompt is reused anyway).
        "--cache",
        "true",
        *(("--embedding", "true") if embedding else ()),
    ]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=peer_env())
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + wait_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited ({process.returncode}): see {log}")
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not start in {wait_s:.0f} s: see {log}")
            time.sleep(0.5)
        yield LlamaServer(url=url, alias=alias, log=log, pid=process.pid)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)
