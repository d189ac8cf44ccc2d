"""A clean shutdown ends answer streams with an error event at once (rather than
leaving clients hanging until the server gives up) and cancels ingestion."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from fastapi.testclient import TestClient

from engine.service.api.lifecycle import STOPPING_MESSAGE, Lifecycle
from engine.service.api.server_settings import ServerSettingsStore
from engine.service.folders import FolderRegistry
from engine.service.server import create_app
from engine.wire import AnswerDone, CitationsEvent, DoneEvent, EngineStatus, TokenEvent

TOKEN = "test-token"


class EndlessEngine:
    """Streams tokens until its answer is cancelled, as a long generation does."""

    def __init__(self, *, folder: Path) -> None:
        self.folders = FolderRegistry(file=folder / "folders.json")
        self.started = threading.Event()

    def status(self) -> EngineStatus:
        return EngineStatus(
            version="0", pid=1, documents=0, chunks=0, embedder="e", model=None,
            answer_mode="extractive",
        )  # fmt: skip

    def language_model(self) -> None:
        return None  # extractive

    def embedder(self) -> Any:
        return SimpleNamespace(tokenizer=_words)

    def ask_stream(
        self, *, question: str, k: int, cancel: threading.Event, priority: str, **_: Any
    ) -> Iterator[Any]:
        yield CitationsEvent(citations=[])
        while not cancel.wait(0.01):
            self.started.set()
            yield TokenEvent(text="more ")
        yield DoneEvent(done=AnswerDone(answer="cut", mode="extractive"))


def _words(text: str, **_: Any) -> dict[str, list[Any]]:
    """A tokenizer's shape for the usage counts: one token per word."""
    spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    return {"input_ids": list(range(len(spans))), "offset_mapping": spans}


def _stream_until_shutdown(path: str, body: dict[str, Any], tmp_path: Path) -> list[str]:
    engine = EndlessEngine(folder=tmp_path)
    stopped = threading.Event()
    app = create_app(
        engine=engine,  # type: ignore[arg-type]
        token=TOKEN,
        request_shutdown=stopped.set,
        server_settings=ServerSettingsStore(file=tmp_path / "server.json"),
        lifecycle=Lifecycle(),
    )
    lines: list[str] = []
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(app, base_url="http://127.0.0.1") as http:

        def read() -> None:
            with http.stream("POST", path, json=body, headers=headers) as response:
                assert response.status_code == 200
                lines.extend(line for line in response.iter_lines() if line)

        reader = threading.Thread(target=read)
        reader.start()
        assert engine.started.wait(10)
        assert http.post("/v1/shutdown", headers=headers).json() == {"ok": True}
        reader.join(timeout=10)
        assert not reader.is_alive(), "the stream did not end on shutdown"
        assert stopped.is_set()
    return lines


def test_ask_stream_ends_with_an_error_event(tmp_path: Path) -> None:
    lines = _stream_until_shutdown("/v1/ask", {"question": "anything"}, tmp_path)
    assert "event: token" in lines
    assert lines[-2] == "event: error"
    assert json.loads(lines[-1].removeprefix("data: "))["message"].endswith(STOPPING_MESSAGE)
    assert "event: done" not in lines  # a cut answer is not passed off as whole


def test_chat_stream_ends_with_an_openai_error(tmp_path: Path) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "anything"}], "stream": True}
    lines = _stream_until_shutdown("/v1/chat/completions", body, tmp_path)
    last = json.loads(lines[-1].removeprefix("data: "))
    assert STOPPING_MESSAGE in last["error"]["message"]  # the openai client raises APIError
    assert "data: [DONE]" not in lines


def test_lifecycle_cancels_answers_in_flight_and_later_ones() -> None:
    lifecycle = Lifecycle()
    with lifecycle.answer() as cancel:
        assert lifecycle.answers_active == 1 and not cancel.is_set()
        lifecycle.begin_shutdown()
        assert cancel.is_set()
    assert lifecycle.answers_active == 0
    with lifecycle.answer() as late:
        assert late.is_set()
