"""The one way to talk to a running engine: GUI, CLI and tests all use it.

Calls block; the GUI runs them off its thread (app/engine_bridge.py). Every
failure surfaces as EngineUnavailableError (no engine) or EngineRequestError
(the engine said no), never as a raw httpx exception.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

import httpx

from engine.errors import EngineRequestError, EngineUnavailableError
from engine.paths import Paths
from engine.rag.ingest.fspath import from_store, to_wire
from engine.service.launcher import Endpoint, ensure_engine
from engine.stream_cut import cut_on
from engine.wire import (
    ANSWER_EVENTS,
    Answer,
    AnswerEvent,
    AskRequest,
    Citation,
    CitationsEvent,
    CollectionInfo,
    DocumentInfo,
    DoneEvent,
    EngineSettings,
    EngineStatus,
    FailedEvent,
    FileError,
    FolderAdded,
    IngestProgress,
    IngestQueueState,
    ModelDownload,
    Priority,
    ProfilingStatus,
    ProgressEvent,
    QueueStatus,
    RecommendedModels,
    SearchResponse,
    ServerSettings,
    SourceView,
    StreamEvent,
    Turn,
    WatchedFolder,
    decode_sse,
    from_json_dict,
    to_json_dict,
)
from engine.wire_each import EACH_EVENTS, EachEvent, EachRequest
from engine.wire_hardware import HardwareInfo

__all__ = ["Endpoint", "EngineClient", "folders_to_grant", "grant_folders"]


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
    def connect(
        cls,
        *,
        paths: Paths,
        start: bool = True,
        wait_s: float = 60.0,
        stop_with_caller: bool = False,
    ) -> EngineClient:
        """Attach to the user's engine, starting one when `start` and none runs; one
        started with `stop_with_caller` stops when this process ends, however it ends,
        unless the person keeps it running."""
        handle = ensure_engine(
            paths=paths, start=start, wait_s=wait_s, stop_with_caller=stop_with_caller
        )
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

    def set_model(self, *, model: str | None, weights: str | None = None) -> EngineSettings:
        """Choose a language model (local folder or Hugging Face id), or None
        for extractive answers, and how its weights are held (`weights`: auto, int8,
        int4, bf16, f32; None keeps the setting). The engine checks it loads before
        saving."""
        payload: dict[str, str | None] = {"model": model}
        if weights is not None:
            payload["weights"] = weights
        body = self._request("PUT", "/v1/settings/model", json=payload)
        return from_json_dict(EngineSettings, body)

    def set_model_server(
        self,
        *,
        url: str | None,
        model: str | None = None,
        api_key: str | None = None,
        ca_file: str | None = None,
        concurrency: int | None = None,
        first_token_s: float | None = None,
    ) -> EngineSettings:
        """Generate on an OpenAI-compatible model server (`url` None: back to the local
        model or extractive answers). The engine checks the server serves `model`
        before saving; `api_key` None keeps the stored one for the same server."""
        payload: dict[str, object] = {"url": url, "model": model, "ca_file": ca_file}
        if api_key is not None:
            payload["api_key"] = api_key
        if concurrency is not None:
            payload["concurrency"] = concurrency
        if first_token_s is not None:
            payload["first_token_s"] = first_token_s
        body = self._request("PUT", "/v1/settings/model-server", json=payload)
        return from_json_dict(EngineSettings, body)

    def server_models(
        self, *, url: str, api_key: str | None = None, ca_file: str | None = None
    ) -> list[str]:
        """The models a server lists at /v1/models, asked by the engine."""
        body = self._request(
            "POST",
            "/v1/model-server/models",
            json={"url": url, "api_key": api_key, "ca_file": ca_file},
        )
        return [str(m) for m in body["models"]]

    def set_embedder(self, *, embedder: str) -> EngineSettings:
        """Choose the embedder (a sentence-transformers folder or a Hugging Face
        cache id). The engine loads it first, then re-embeds the collection in
        the background (a job of origin "embedder"); the old index answers meanwhile."""
        body = self._request("PUT", "/v1/settings/embedder", json={"embedder": embedder})
        return from_json_dict(EngineSettings, body)

    def set_embedder_server(
        self,
        *,
        url: str,
        model: str,
        api_key: str | None = None,
        ca_file: str | None = None,
        batch: int | None = None,
        timeout_s: float | None = None,
    ) -> EngineSettings:
        """Embed on an OpenAI-compatible embeddings server. The engine asks it once
        before saving, then re-embeds the collection in the background; `api_key` None
        keeps the stored one for the same server."""
        payload: dict[str, object] = {"url": url, "model": model, "ca_file": ca_file}
        for name, value in (("api_key", api_key), ("batch", batch), ("timeout_s", timeout_s)):
            if value is not None:
                payload[name] = value
        body = self._request("PUT", "/v1/settings/embedder-server", json=payload)
        return from_json_dict(EngineSettings, body)

    def set_reranker(self, *, reranker: str | None) -> EngineSettings:
        """Choose what re-orders each question's candidates: "model" (the language
        model in use), a cross-encoder (folder or Hugging Face cache id), or None."""
        body = self._request("PUT", "/v1/settings/reranker", json={"reranker": reranker})
        return from_json_dict(EngineSettings, body)

    def hardware(self) -> HardwareInfo:
        """The machine's profile, the placement for the chosen model (None in
        extractive mode) and the active-profile fit (None until one was run).
        The engine's first call measures disk bandwidth: seconds."""
        return from_json_dict(HardwareInfo, self._request("GET", "/v1/hardware"))

    def skip_profiling(self) -> ProfilingStatus:
        """Decline active profiling (or stop a run): the planner's defaults are kept
        until the model, the hardware or the collection size change."""
        return from_json_dict(ProfilingStatus, self._request("POST", "/v1/profiling/skip"))

    def documents(self) -> list[DocumentInfo]:
        body = self._request("GET", "/v1/documents")
        return [from_json_dict(DocumentInfo, d) for d in body["documents"]]

    def errors(self) -> list[FileError]:
        body = self._request("GET", "/v1/documents/errors")
        return [from_json_dict(FileError, d) for d in body["errors"]]

    def source(self, *, chunk_id: str) -> SourceView:
        return from_json_dict(SourceView, self._request("GET", f"/v1/chunks/{chunk_id}/source"))

    def ingest(self, *, paths: Sequence[str | Path]) -> IngestProgress:
        """Queue files or folders for ingestion; returns the job's first state. A `Path`
        names a file on this machine, a `str` a path as the API showed it (fspath.to_wire)."""
        # A name that is not UTF-8 travels in the store's encoding (engine/rag/ingest/fspath.py).
        body = self._request("POST", "/v1/ingest", json={"paths": [to_wire(p) for p in paths]})
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

    def alive(self, *, timeout_s: float = 5.0) -> bool:
        """False only when nothing answers at the engine's address (it died); an
        engine too busy to answer within `timeout_s` counts as alive."""
        try:
            self._http.get("/v1/status", timeout=timeout_s)
        except httpx.TimeoutException:
            return True
        except httpx.TransportError:
            return False
        return True

    # -- watched folders, collections, search --------------------------------

    def folders(self) -> list[WatchedFolder]:
        body = self._request("GET", "/v1/folders")
        return [from_json_dict(WatchedFolder, f) for f in body["folders"]]

    def add_folder(
        self, *, path: str | Path, collection: str = "default", ingest: bool = True
    ) -> FolderAdded:
        """Watch a folder: the grant that lets requests name paths in it. With
        `ingest`, its documents are indexed too (the job is in the result)."""
        body = {"path": to_wire(path), "collection": collection, "ingest": ingest}
        return from_json_dict(FolderAdded, self._request("POST", "/v1/folders", json=body))

    def remove_folder(self, *, path: str | Path) -> WatchedFolder:
        body = self._request("DELETE", "/v1/folders", params={"path": to_wire(path)})
        return from_json_dict(WatchedFolder, body)

    def collections(self) -> list[CollectionInfo]:
        body = self._request("GET", "/v1/collections")
        return [from_json_dict(CollectionInfo, c) for c in body["collections"]]

    def search(self, *, query: str, k: int = 5, collection: str | None = None) -> SearchResponse:
        body = {"query": query, "k": k, "collection": collection}
        return from_json_dict(SearchResponse, self._request("POST", "/v1/search", json=body))

    def add_paths(self, *, paths: Sequence[str | Path]) -> IngestProgress:
        """Ingest files or folders the person named, watching their folders first
        (see `grant_folders`)."""
        grant_folders(client=self, paths=paths)
        return self.ingest(paths=paths)

    # -- work in progress and the API's own settings ---------------------------

    def queue(self) -> QueueStatus:
        return from_json_dict(QueueStatus, self._request("GET", "/v1/queue"))

    def server_settings(self) -> ServerSettings:
        return from_json_dict(ServerSettings, self._request("GET", "/v1/settings/server"))

    def set_server_settings(
        self, *, allowed_origins: list[str] | None = None, keep_engine_running: bool | None = None
    ) -> ServerSettings:
        body = {"allowed_origins": allowed_origins, "keep_engine_running": keep_engine_running}
        body = {k: v for k, v in body.items() if v is not None}
        return from_json_dict(
            ServerSettings, self._request("PUT", "/v1/settings/server", json=body)
        )

    # -- streams -----------------------------------------------------------

    def ingest_events(self, *, job_id: str) -> Iterator[IngestProgress]:
        """Progress of one ingestion job until it ends."""
        events = self._stream("GET", f"/v1/ingest/{job_id}/events", kinds=(ProgressEvent,))
        for event in events:
            yield cast(ProgressEvent, event).progress

    def ask_stream(
        self,
        *,
        question: str,
        k: int = 5,
        priority: Priority = "interactive",
        history: Sequence[Turn] = (),
        cancel: threading.Event | None = None,
    ) -> Iterator[AnswerEvent]:
        """The answer's events (engine/wire_events.py): for a follow-up the query it
        was searched as, citations, tokens, then done, or failed when the engine gave
        up after the stream began. `history`: the conversation's turns so far.
        Setting `cancel` (from any thread: the window's Stop, a batch's Cancel) ends
        the stream at once, even while it waits for its turn in the engine's queue,
        and the engine drops the request: nothing more is yielded."""
        request = AskRequest(question=question, k=k, priority=priority, history=list(history))
        body = to_json_dict(request)
        events = self._stream("POST", "/v1/ask", json=body, kinds=ANSWER_EVENTS, cancel=cancel)
        for event in events:
            yield cast(AnswerEvent, event)

    def ask_each_stream(
        self, *, request: EachRequest, cancel: threading.Event | None = None
    ) -> Iterator[EachEvent]:
        """One question of every document of a scope (engine/wire_each.py): the plan,
        a row per document as it finishes, the summary. EngineRequestError (400) for a
        scope that names nothing; setting `cancel` ends the stream and the engine drops
        the documents not answered yet."""
        body = to_json_dict(request)
        for event in self._stream(
            "POST", "/v1/ask/each", json=body, kinds=EACH_EVENTS, cancel=cancel
        ):
            yield cast(EachEvent, event)

    def ask(
        self,
        *,
        question: str,
        k: int = 5,
        priority: Priority = "interactive",
        history: Sequence[Turn] = (),
    ) -> Answer:
        """The whole answer at once (the stream, collected)."""
        citations: list[Citation] = []
        for ev in self.ask_stream(question=question, k=k, priority=priority, history=history):
            if isinstance(ev, CitationsEvent):
                citations = ev.citations
            elif isinstance(ev, FailedEvent):
                raise EngineRequestError(ev.message, status=500)
            elif isinstance(ev, DoneEvent):
                d = ev.done
                return Answer(
                    answer=d.answer, citations=citations, mode=d.mode, note=d.note, model=d.model
                )
        raise EngineRequestError("the answer stream ended without a result", status=502)

    # -- models: recommendations and hub downloads -------------------------------

    def recommended_models(self) -> RecommendedModels:
        return from_json_dict(RecommendedModels, self._models_request("GET", "/recommended"))

    def download_model(self, *, repo_id: str, file: str | None = None) -> ModelDownload:
        """Start (or join) a download from the Hugging Face hub; the person asked for it.
        `file`: one .gguf file of the repo instead of the model's own files."""
        request = {"repo_id": repo_id} if file is None else {"repo_id": repo_id, "file": file}
        body = self._models_request("POST", "/download", json=request)
        return from_json_dict(ModelDownload, body)

    def download_progress(self, *, download_id: str) -> ModelDownload:
        body = self._models_request("GET", f"/downloads/{download_id}")
        return from_json_dict(ModelDownload, body)

    def cancel_download(self, *, download_id: str) -> ModelDownload:
        body = self._models_request("POST", f"/downloads/{download_id}/cancel")
        return from_json_dict(ModelDownload, body)

    def _models_request(self, method: str, url: str, **kw: Any) -> dict[str, Any]:
        """/v1/models/* refuses in OpenAI's shape: keep only its message for people."""
        try:
            return self._request(method, f"/v1/models{url}", **kw)
        except EngineRequestError as e:
            try:
                message = json.loads(str(e))["error"]["message"]
            except (ValueError, KeyError, TypeError):
                raise e from None
            raise EngineRequestError(str(message), status=e.status) from None

    # -- plumbing ----------------------------------------------------------

    def _request(self, method: str, url: str, **kw: Any) -> dict[str, Any]:
        try:
            response = self._http.request(method, url, **kw)
        except httpx.TransportError as e:
            raise EngineUnavailableError(f"the engine did not answer: {e}") from e
        _raise_for_status(response)
        return response.json()

    def _stream(
        self,
        method: str,
        url: str,
        *,
        kinds: Iterable[type[StreamEvent]],
        cancel: threading.Event | None = None,
        **kw: Any,
    ) -> Iterator[StreamEvent]:
        try:
            with self._http.stream(method, url, **kw) as response:
                if response.status_code >= 400:
                    response.read()
                    _raise_for_status(response)
                with cut_on(cancel=cancel, response=response):
                    for event in decode_sse(lines=response.iter_lines(), kinds=kinds):
                        if cancel is not None and cancel.is_set():
                            return
                        yield event
        except httpx.TransportError as e:
            if cancel is not None and cancel.is_set():
                return  # the caller cut the stream (engine/stream_cut.py)
            raise EngineUnavailableError(f"the engine stopped answering: {e}") from e


class FolderGranting(Protocol):
    def folders(self) -> list[WatchedFolder]: ...
    def add_folder(
        self, *, path: str | Path, collection: str = "default", ingest: bool = True
    ) -> FolderAdded: ...


def folders_to_grant(*, paths: Iterable[str | Path], watched: Iterable[str]) -> list[str]:
    """The folders to watch so that the engine may read `paths`: each folder
    itself, a file's parent folder; none already inside a watched folder.

    Paths are resolved here, on the same machine as the engine, as the engine
    resolves them (symlinks, `..`)."""
    roots = [from_store(w) for w in watched]
    wanted: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser().resolve()
        folder = path if path.is_dir() else path.parent
        if not folder.is_dir() or folder == Path(folder.anchor):
            continue  # the engine reports what is missing; a whole drive is never granted
        inside = [*roots, *wanted]
        if any(folder == r or folder.is_relative_to(r) for r in inside):
            continue
        wanted = [w for w in wanted if not w.is_relative_to(folder)] + [folder]
    return [str(w) for w in wanted]


def grant_folders(*, client: FolderGranting, paths: Sequence[str | Path]) -> list[str]:
    """Watch the folders of paths the person named on this machine (a CLI
    argument, a folder picked in the window): naming them is the grant. Their
    documents are not ingested by this call. Returns the folders added."""
    watched = [f.path for f in client.folders()]
    added = folders_to_grant(paths=paths, watched=watched)
    for folder in added:
        client.add_folder(path=Path(folder), ingest=False)  # a real folder, named whole
    return added


def _raise_for_status(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        detail = response.json().get("detail", response.text)
    except ValueError:
        detail = response.text
    raise EngineRequestError(str(detail), status=response.status_code)
