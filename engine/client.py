"""The one way to talk to a running engine: GUI, CLI and tests all use it.

Calls block; the GUI runs them off its thread (app/engine_bridge.py). Every
failure surfaces as EngineUnavailableError (no engine) or EngineRequestError
(the engine said no), never as a raw httpx exception.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from engine.errors import EngineRequestError, EngineUnavailableError
from engine.paths import Paths
from engine.wire import (
    Answer,
    AnswerDone,
    Citation,
    DocumentInfo,
    EngineSettings,
    EngineStatus,
    FileError,
    HardwareInfo,
    IngestProgress,
    IngestQueueState,
    SourceView,
    from_json_dict,
    to_json_dict,
)


@dataclass(frozen=True, kw_only=True)
class AskEvent:
    """One step of a streamed answer: exactly one of the fields is set."""

    citations: list[Citation] | None = None
    token: str | None = None
    done: AnswerDone | None = None
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class Endpoint:
    base_url: str
    token: str


class EngineClient:
    def __init__(
        self, *, endpoint: Endpoint, started_here: bool = False, timeout_s: float = 30.0
    ) -> None:
        self.endpoint = endpoint
        # True when connect() started the engine: the caller then owns it and
        # should shut it down when done (unless the person keeps it running).
        self.started_here = started_here
        self._http = httpx.Client(
            base_url=endpoint.base_url,
            headers={"Authorization": f"Bearer {endpoint.token}"},
            timeout=httpx.Timeout(timeout_s, read=None),
            trust_env=False,  # a proxy must never see local traffic or the token
        )

    @classmethod
    def connect(cls, *, paths: Paths, start: bool = True, wait_s: float = 60.0) -> EngineClient:
        """Attach to the user's engine, starting one when `start` and none runs."""
        from engine.launcher import ensure_engine

        handle = ensure_engine(paths=paths, start=start, wait_s=wait_s)
        return cls(endpoint=handle.endpoint, started_here=handle.started_here)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plain calls -------------------------------------------------------

    def status(self) -> EngineStatus:
        return from_json_dict(EngineStatus, self._request("GET", "/v1/status"))

    def settings(self) -> EngineSettings:
        return from_json_dict(EngineSettings, self._request("GET", "/v1/settings"))

    def set_model(self, *, model: str | None) -> EngineSettings:
        """Choose a language model (local folder or Hugging Face id), or None
        for extractive answers. The engine checks it loads before saving."""
        body = self._request("PUT", "/v1/settings/model", json={"model": model})
        return from_json_dict(EngineSettings, body)

    def hardware(self) -> HardwareInfo:
        """The machine's profile, the placement for the chosen model (None in
        extractive mode) and the active-profile fit (None until one was run).
        The engine's first call measures disk bandwidth: seconds."""
        return from_json_dict(HardwareInfo, self._request("GET", "/v1/hardware"))

    def documents(self) -> list[DocumentInfo]:
        body = self._request("GET", "/v1/documents")
        return [from_json_dict(DocumentInfo, d) for d in body["documents"]]

    def errors(self) -> list[FileError]:
        body = self._request("GET", "/v1/documents/errors")
        return [from_json_dict(FileError, d) for d in body["errors"]]

    def source(self, *, chunk_id: str) -> SourceView:
        return from_json_dict(SourceView, self._request("GET", f"/v1/chunks/{chunk_id}/source"))

    def ingest(self, *, paths: list[str]) -> IngestProgress:
        """Queue files or folders for ingestion; returns the job's first state."""
        body = self._request("POST", "/v1/ingest", json={"paths": paths})
        return from_json_dict(IngestProgress, body)

    def ingest_progress(self, *, job_id: str) -> IngestProgress:
        return from_json_dict(IngestProgress, self._request("GET", f"/v1/ingest/{job_id}"))

    def cancel_ingest(self, *, job_id: str) -> IngestProgress:
        body = self._request("POST", f"/v1/ingest/{job_id}/cancel")
        return from_json_dict(IngestProgress, body)

    def ingest_queue(self) -> IngestQueueState:
        """Whether ingestion is paused, and the jobs queued or running."""
        return from_json_dict(IngestQueueState, self._request("GET", "/v1/ingest/queue"))

    def pause_ingest(self) -> IngestQueueState:
        """Pause all ingestion after the file at hand (watched folders too)."""
        return from_json_dict(IngestQueueState, self._request("POST", "/v1/ingest/pause"))

    def resume_ingest(self) -> IngestQueueState:
        return from_json_dict(IngestQueueState, self._request("POST", "/v1/ingest/resume"))

    def shutdown(self) -> None:
        self._request("POST", "/v1/shutdown")

    # -- streams -----------------------------------------------------------

    def ingest_events(self, *, job_id: str) -> Iterator[IngestProgress]:
        """Progress of one ingestion job until it ends."""
        for event, data in self._stream("GET", f"/v1/ingest/{job_id}/events"):
            if event == "progress":
                yield from_json_dict(IngestProgress, data)

    def ask_stream(self, *, question: str, k: int = 5) -> Iterator[AskEvent]:
        body = {"question": question, "k": k}
        for event, data in self._stream("POST", "/v1/ask", json=body):
            if event == "citations":
                yield AskEvent(citations=[from_json_dict(Citation, c) for c in data["citations"]])
            elif event == "token":
                yield AskEvent(token=data["text"])
            elif event == "done":
                yield AskEvent(done=from_json_dict(AnswerDone, data))
            elif event == "error":
                yield AskEvent(error=data["message"])

    def ask(self, *, question: str, k: int = 5) -> Answer:
        """The whole answer at once (the stream, collected)."""
        citations: list[Citation] = []
        for ev in self.ask_stream(question=question, k=k):
            if ev.citations is not None:
                citations = ev.citations
            elif ev.error is not None:
                raise EngineRequestError(ev.error, status=500)
            elif ev.done is not None:
                d = ev.done
                return Answer(
                    answer=d.answer, citations=citations, mode=d.mode, note=d.note, model=d.model
                )
        raise EngineRequestError("the answer stream ended without a result", status=502)

    # -- plumbing ----------------------------------------------------------

    def _request(self, method: str, url: str, **kw: Any) -> dict[str, Any]:
        try:
            response = self._http.request(method, url, **kw)
        except httpx.TransportError as e:
            raise EngineUnavailableError(f"the engine did not answer: {e}") from e
        _raise_for_status(response)
        return response.json()

    def _stream(self, method: str, url: str, **kw: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        try:
            with self._http.stream(method, url, **kw) as response:
                if response.status_code >= 400:
                    response.read()
                    _raise_for_status(response)
                yield from _parse_sse(response.iter_lines())
        except httpx.TransportError as e:
            raise EngineUnavailableError(f"the engine stopped answering: {e}") from e


def _raise_for_status(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        detail = response.text
    raise EngineRequestError(str(detail), status=response.status_code)


def _parse_sse(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    event, data = "message", []
    for line in lines:
        if not line:
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
    if data:
        yield event, json.loads("\n".join(data))


def encode_sse(*, event: str, value: Any) -> str:
    """One server-sent event; the server uses this so both sides agree."""
    payload = to_json_dict(value) if hasattr(value, "__dataclass_fields__") else value
    return f"event: {event}\ndata: {json.dumps(payload)}\n\n"
