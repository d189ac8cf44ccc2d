"""A stand-in for EngineClient: a subclass, so the client's API is written down once
(engine/service/client.py); it overrides what the GUI tests need with wire values and no
engine. A call it does not fake reaches `_request` and fails saying so, and
tests/app/test_fake_client.py checks that every override keeps the real signature.

Calls are recorded; `delay_s` makes every call (and every streamed event) slow,
as a busy engine is; `fail` makes a named method raise. `step_s` spaces the
ingestion events so that a test can pause, resume or cancel a job in between.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from engine.errors import EngineRequestError
from engine.rag.ingest.fspath import to_wire
from engine.service.client import EngineClient
from engine.wire import (
    AnswerDone,
    AnswerEvent,
    Citation,
    CitationsEvent,
    DocumentInfo,
    DoneEvent,
    EmbedderOffer,
    EmbedServerInfo,
    EngineSettings,
    EngineStatus,
    FileError,
    FolderAdded,
    IngestProgress,
    IngestQueueState,
    ModelAdvice,
    ModelDownload,
    ModelServerInfo,
    PipelineInfo,
    Priority,
    ProfilingStatus,
    RecommendedModels,
    SearchedEvent,
    ServerSettings,
    SourceView,
    TokenEvent,
    Turn,
    WatchedFolder,
)
from engine.wire_hardware import (
    FitSummary,
    GpuSummary,
    HardwareInfo,
    HardwareSummary,
    PlacementSummary,
    TierSizes,
)

PAGE_TEXT = (
    "Chapter 2. Care of the garden.\n\n"
    "Water the tomatoes early in the morning so the leaves dry before noon.\n"
    "Tomatoes need at least six hours of sun a day to ripen well.\n"
    "Prune the side shoots every week during the summer."
)
PASSAGE = "Tomatoes need at least six hours of sun a day to ripen well."
PASSAGE_START = PAGE_TEXT.index(PASSAGE)

CITATIONS = [
    Citation(
        index=1,
        chunk_id="doc-a/p2#0",
        path="/docs/garden guide.pdf",
        page=2,
        text=PASSAGE,
        score=0.91,
        char_start=PASSAGE_START,
        char_end=PASSAGE_START + len(PASSAGE),
    ),
    Citation(
        index=2,
        chunk_id="doc-b#3",
        path="/docs/notes.md",
        page=None,
        text="Tomatoes like warm soil; do not plant them before May.",
        score=0.74,
        char_start=0,
        char_end=52,
    ),
]

ANSWER_TOKENS = ["Tomatoes need ", "six hours of sun [", "1]", " and warm soil [2", "]."]
ANSWER = "".join(ANSWER_TOKENS)

INGEST_PATHS = ["/docs/a.md", "/docs/broken.pdf", "/docs/c.txt"]
INGEST_ERROR = FileError(path="/docs/broken.pdf", reason="the PDF is encrypted")


def indexed_docs() -> list[DocumentInfo]:
    """What the engine holds once INGEST_PATHS were read (broken.pdf failed)."""
    return [
        DocumentInfo(
            doc_id="a",
            path="/docs/a.md",
            size=10,
            mtime=0.0,
            status="indexed",
            error=None,
            chunks=4,
            pages=None,
        ),
        DocumentInfo(
            doc_id="c",
            path="/docs/c.txt",
            size=10,
            mtime=0.0,
            status="indexed",
            error=None,
            chunks=3,
            pages=None,
        ),
    ]


GIB = 2**30
HARDWARE = HardwareInfo(
    profile=HardwareSummary(
        platform="Linux x86_64",
        gpus=[
            GpuSummary(
                index=0,
                name="Fake RTX 4060",
                backend="cuda",
                total_bytes=8 * GIB,
                free_bytes=7 * GIB,
                unified_memory=False,
                h2d_bytes_per_s=12e9,
            )
        ],
        ram_total_bytes=32 * GIB,
        ram_available_bytes=24 * GIB,
        cpu_cores_logical=16,
        cpu_cores_physical=8,
        disk_path="/home/me/.local/share/RAGDoll",
        disk_total_bytes=1000 * GIB,
        disk_free_bytes=400 * GIB,
        disk_read_bytes_per_s=2.1e9,
        fingerprint="fake",
    ),
    placement=PlacementSummary(
        model="llama-3.1-8b",
        fits=True,
        message="",
        memory_model="discrete",
        batch=4,
        weights=TierSizes(gpu=5 * GIB, cpu=10 * GIB, disk=0),
        kv=TierSizes(gpu=GIB // 2, cpu=GIB, disk=0),
        workspace=TierSizes(gpu=GIB // 4),
        partitions=TierSizes(cpu=2 * GIB),
        resident_partitions=4,
        capacities=TierSizes(gpu=7 * GIB, cpu=24 * GIB, disk=400 * GIB),
        budgets=TierSizes(gpu=int(6.5 * GIB), cpu=21 * GIB, disk=380 * GIB),
        used=TierSizes(gpu=int(5.75 * GIB), cpu=13 * GIB, disk=0),
    ),
    fit=FitSummary(
        a=0.25,
        c=0.6,
        r2=0.998,
        samples=[[1.0, 0.25], [2.0, 0.37], [4.0, 0.58], [8.0, 0.86]],
        retrieval_samples=[[1.0, 0.4], [8.0, 0.1]],
        batch=4,
        resident_partitions=4,
        model="llama-3.1-8b",
        measured_at=1_700_000_000.0,
    ),
)


RECOMMENDED = RecommendedModels(
    models=[
        ModelAdvice(
            id="Qwen/Qwen2-0.5B-Instruct",
            name="Qwen2 0.5B Instruct",
            params=494_032_768,
            licence="Apache-2.0",
            description="Tiny and quick.",
            weight_bytes=988_065_536,
            download_bytes=1_000_000_000,
            verdict="fits on GPU",
            verdict_kind="gpu",
            offloaded_percent=0,
            missing_bytes=0,
            expected_tokens_per_s=120.0,
            speed_note="estimate: 0.9 GiB of weights read per token; limited by memory reads",
            installed=True,
            installed_path="/models/Qwen--Qwen2-0.5B-Instruct",
        ),
        ModelAdvice(
            id="meta-llama/Llama-3.1-8B-Instruct",
            name="Llama 3.1 8B Instruct",
            params=8_030_261_248,
            licence="Llama 3.1 Community License",
            description="The usual first choice.",
            weight_bytes=16_060_522_496,
            download_bytes=16_070_000_000,
            verdict="offloaded 40%",
            verdict_kind="offloaded",
            offloaded_percent=40,
            missing_bytes=0,
            expected_tokens_per_s=2.5,
            speed_note="estimate: 15.0 GiB of weights read per token; limited by streaming",
            installed=False,
        ),
        ModelAdvice(
            id="meta-llama/Llama-3.1-70B-Instruct",
            name="Llama 3.1 70B Instruct",
            params=70_553_706_496,
            licence="Llama 3.1 Community License",
            description="Much larger.",
            weight_bytes=141_107_412_992,
            verdict="too large: 12.0 GiB missing",
            verdict_kind="too_large",
            offloaded_percent=0,
            missing_bytes=12 * GIB,
            expected_tokens_per_s=None,
            speed_note="does not fit: no speed to expect",
            installed=False,
        ),
    ],
    hardware_note="Planned for this machine: 8 GiB GPU. Speeds are estimates.",
)


@dataclass(kw_only=True, eq=False)
class FakeClient(EngineClient):
    delay_s: float = 0.0
    fail: dict[str, BaseException] = field(default_factory=dict)
    started_here: bool = False
    keep_running: bool = False
    model: str | None = None
    loading: bool = False  # the model is chosen and still loading: answers are quoted
    embedder: str = "fake-embedder"
    embedder_job: str | None = None  # a re-embedding after set_embedder
    reranker: str | None = None  # what set_reranker saved
    server: ModelServerInfo | None = None  # what set_model_server saved
    server_list: list[str] = field(default_factory=lambda: ["llama-3.1-70b", "qwen2.5-7b"])
    embedder_offer: EmbedderOffer | None = None  # what status offers (none once switched)
    embed_server: EmbedServerInfo | None = None  # the embeddings server, once one is chosen
    note: str | None = "No language model is installed: answers quote your documents."
    tokens: list[str] = field(default_factory=lambda: list(ANSWER_TOKENS))
    token_delay_s: float = 0.0
    hardware_info: HardwareInfo = HARDWARE
    profiling: ProfilingStatus | None = None
    step_s: float = 0.0
    recommended: RecommendedModels = field(default_factory=lambda: RECOMMENDED)
    download_steps: int = 3  # polls before a download is done
    download_error: str = ""  # set: a download fails so at its first poll, its size unknown
    _downloads: dict[str, ModelDownload] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, object]]] = field(default_factory=list)
    watched: list[WatchedFolder] = field(default_factory=list)
    queue_jobs: list[IngestProgress] = field(default_factory=list)  # jobs the engine started
    pipeline: PipelineInfo | None = None
    _docs: list[DocumentInfo] = field(default_factory=list)
    _paused: threading.Event = field(default_factory=threading.Event)
    _cancelled: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _call(self, name: str, **kwargs: object) -> None:
        with self._lock:
            self.calls.append((name, kwargs))
        if self.delay_s:
            time.sleep(self.delay_s)
        error = self.fail.get(name)
        if error is not None:
            raise error

    def called(self, name: str) -> list[dict[str, object]]:
        with self._lock:
            return [kw for n, kw in self.calls if n == name]

    # -- plain calls -----------------------------------------------------------

    def status(self) -> EngineStatus:
        self._call("status")
        return EngineStatus(
            version="0-test",
            pid=4242,
            documents=len(self._docs),
            chunks=sum(d.chunks for d in self._docs),
            embedder=self.embedder,
            # As the engine: the server's model while a model server writes the answers.
            model=self.server.model if self.server else self.model,
            answer_mode="generative"
            if (self.model and not self.loading) or self.server
            else "extractive",
            profiling=self.profiling,
            pipeline=self.pipeline,
            embedder_in_force=self.embedder,
            embedder_job=self.embedder_job,
            reranker=self.reranker,
            server=self.server,
            embedder_offer=self.embedder_offer,
            embed_server=self.embed_server,
        )

    def skip_profiling(self) -> ProfilingStatus:
        self._call("skip_profiling")
        self.profiling = ProfilingStatus(state="skipped")
        return self.profiling

    def settings(self) -> EngineSettings:
        self._call("settings")
        server = self.server
        return EngineSettings(
            model=self.model,
            server_url=server.url if server else None,
            server_model=server.model if server else None,
        )

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
        self._call(
            "set_model_server",
            url=url,
            model=model,
            api_key=api_key,
            ca_file=ca_file,
            concurrency=concurrency,
        )
        self.server = (
            ModelServerInfo(url=url, model=model or "", concurrency=concurrency or 8)
            if url
            else None
        )
        return self.settings()

    def server_models(
        self, *, url: str, api_key: str | None = None, ca_file: str | None = None
    ) -> list[str]:
        self._call("server_models", url=url, api_key=api_key, ca_file=ca_file)
        return list(self.server_list)

    def set_model(self, *, model: str | None, weights: str | None = None) -> EngineSettings:
        self._call("set_model", model=model)
        self.model = model
        self.server = None  # a local model (or none) chosen: generation leaves the server
        return EngineSettings(model=model, model_weights=weights or "auto")

    def set_reranker(self, *, reranker: str | None) -> EngineSettings:
        self._call("set_reranker", reranker=reranker)
        self.reranker = reranker
        return EngineSettings(model=self.model, reranker=reranker)

    def set_embedder(self, *, embedder: str) -> EngineSettings:
        self._call("set_embedder", embedder=embedder)
        self.embedder, self.embedder_job = embedder, "embed-1"
        self.embedder_offer = None
        self.embed_server = None
        return EngineSettings(model=self.model, embedder=embedder)

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
        self._call(
            "set_embedder_server",
            url=url,
            model=model,
            api_key=api_key,
            ca_file=ca_file,
            batch=batch,
            timeout_s=timeout_s,
        )
        # As the engine: the server's id is the embedder, re-embedding starts.
        self.embedder, self.embedder_job = f"server:{model}@{url}", "embed-1"
        self.embed_server = EmbedServerInfo(url=url, model=model, batch=batch or 32, in_force=False)
        return EngineSettings(
            model=self.model, embedder=self.embedder, embed_server_batch=batch or 32
        )

    def documents(self) -> list[DocumentInfo]:
        self._call("documents")
        return list(self._docs)

    def errors(self) -> list[FileError]:
        self._call("errors")
        return [INGEST_ERROR] if self._docs else []

    def source(self, *, chunk_id: str) -> SourceView:
        self._call("source", chunk_id=chunk_id)
        citation = next(c for c in CITATIONS if c.chunk_id == chunk_id)
        text = PAGE_TEXT if citation.page is not None else citation.text
        return SourceView(
            chunk_id=chunk_id,
            path=citation.path,
            page=citation.page,
            page_count=4 if citation.page is not None else None,
            page_text=text,
            char_start=citation.char_start,
            char_end=citation.char_end,
        )

    def hardware(self) -> HardwareInfo:
        self._call("hardware")
        return self.hardware_info

    def ingest(self, *, paths: Sequence[str | Path]) -> IngestProgress:
        self._call("ingest", paths=paths)
        self._cancelled.clear()
        return IngestProgress(job_id="job-1", state="queued", paused=self._paused.is_set())

    def ingest_progress(self, *, job_id: str) -> IngestProgress:
        self._call("ingest_progress", job_id=job_id)
        if job_id == self.embedder_job:  # a re-embedding under way
            return replace(self._progress(job_id=job_id, done=1), origin="embedder")
        return self._progress(job_id=job_id, done=3)

    def ingest_events(self, *, job_id: str) -> Iterator[IngestProgress]:
        self._call("ingest_events", job_id=job_id)
        with self._lock:  # a job the engine started says so in every event
            origin = next((j.origin for j in self.queue_jobs if j.job_id == job_id), "request")
            origin = "embedder" if job_id == self.embedder_job else origin
        for progress in self._events(job_id=job_id):
            yield replace(progress, origin=origin)

    def _events(self, *, job_id: str) -> Iterator[IngestProgress]:
        done = 0
        while done < 4:
            if self.delay_s or self.step_s:
                time.sleep(self.delay_s or self.step_s)
            if self._cancelled.is_set():
                yield replace(self._progress(job_id=job_id, done=done), state="cancelled")
                return
            if self._paused.is_set():
                # As the engine does: say so once, then wait between files.
                yield self._progress(job_id=job_id, done=done, paused=True)
                while self._paused.is_set() and not self._cancelled.is_set():
                    time.sleep(0.02)
                continue
            if done == 3:
                self._docs = indexed_docs()
            yield self._progress(job_id=job_id, done=done)
            done += 1

    def cancel_ingest(self, *, job_id: str) -> IngestProgress:
        self._call("cancel_ingest", job_id=job_id)
        self._cancelled.set()
        return IngestProgress(job_id=job_id, state="running", files_total=3)

    def pause_ingest(self) -> IngestQueueState:
        self._call("pause_ingest")
        self._paused.set()
        return IngestQueueState(paused=True)

    def resume_ingest(self) -> IngestQueueState:
        self._call("resume_ingest")
        self._paused.clear()
        return IngestQueueState(paused=False)

    def ingest_queue(self) -> IngestQueueState:
        with self._lock:
            jobs = list(self.queue_jobs)
        return IngestQueueState(paused=self._paused.is_set(), jobs=jobs)

    def _progress(self, *, job_id: str, done: int, paused: bool = False) -> IngestProgress:
        running = 0 < done < 3
        return IngestProgress(
            job_id=job_id,
            state="done" if done == 3 else "running",
            files_total=3,
            files_done=done,
            current=INGEST_PATHS[done] if done < 3 else None,
            chunks_added=[0, 4, 4, 7][done],
            errors=[INGEST_ERROR] if done >= 2 else [],
            paused=paused,
            files_per_s=2.0 if running else 0.0,
            chunks_per_s=8.0 if running else 0.0,
            eta_s=(3 - done) * 45.0 if running else None,
        )

    def shutdown(self) -> None:
        self._call("shutdown")

    def alive(self, *, timeout_s: float = 5.0) -> bool:
        return True

    def folders(self) -> list[WatchedFolder]:
        with self._lock:
            return list(self.watched)

    def add_folder(
        self, *, path: str | Path, collection: str = "default", ingest: bool = True
    ) -> FolderAdded:
        self._call("add_folder", path=path, ingest=ingest, collection=collection)
        path = to_wire(path)  # as the real client sends it and the engine lists it
        folder = WatchedFolder(path=path, collection=collection)
        with self._lock:
            self.watched = [f for f in self.watched if f.path != path] + [folder]
        return FolderAdded(folder=folder)

    def remove_folder(self, *, path: str | Path) -> WatchedFolder:
        self._call("remove_folder", path=path)
        path = to_wire(path)
        with self._lock:
            folder = next((f for f in self.watched if f.path == path), None)
            if folder is None:
                raise EngineRequestError(f"not a watched folder: {path}", status=404)
            self.watched = [f for f in self.watched if f.path != path]
            self._docs = [d for d in self._docs if not d.path.startswith(path + "/")]
        return folder

    def server_settings(self) -> ServerSettings:
        return ServerSettings(keep_engine_running=self.keep_running)

    def set_server_settings(
        self, *, allowed_origins: list[str] | None = None, keep_engine_running: bool | None = None
    ) -> ServerSettings:
        self._call("set_server_settings", keep_engine_running=keep_engine_running)
        if keep_engine_running is not None:
            self.keep_running = keep_engine_running
        return self.server_settings()

    def close(self) -> None:
        with self._lock:
            self.calls.append(("close", {}))

    def _request(self, method: str, url: str, **kw: object) -> dict[str, object]:
        raise NotImplementedError(f"FakeClient does not fake {method} {url}: override its method")

    def _stream(self, method: str, url: str, **kw: object) -> Iterator[object]:
        raise NotImplementedError(f"FakeClient does not fake {method} {url}: override its method")

    # -- streams -----------------------------------------------------------

    def ask_stream(
        self,
        *,
        question: str,
        k: int = 5,
        priority: Priority = "interactive",
        history: Sequence[Turn] = (),
        cancel: threading.Event | None = None,
    ) -> Iterator[AnswerEvent]:
        self._call("ask_stream", question=question, k=k, history=list(history))
        try:
            if history:  # as the engine tells how it searched a conversation's question
                yield SearchedEvent(query=question, context=history[-1].question)
            yield CitationsEvent(citations=list(CITATIONS))
            for token in self.tokens:
                if self.token_delay_s or self.delay_s:
                    time.sleep(self.token_delay_s or self.delay_s)
                if cancel is not None and cancel.is_set():
                    return  # as the real client ends a stream its caller cut
                yield TokenEvent(text=token)
            done = AnswerDone(answer="".join(self.tokens), mode="extractive", note=self.note)
            yield DoneEvent(done=done)
        finally:  # the reader closed the stream, as the real client closes its HTTP stream
            with self._lock:
                self.calls.append(("ask_stream_closed", {"question": question}))

    # -- models ------------------------------------------------------------

    def recommended_models(self) -> RecommendedModels:
        self._call("recommended_models")
        return self.recommended

    def download_model(self, *, repo_id: str, file: str | None = None) -> ModelDownload:
        self._call("download_model", repo_id=repo_id, file=file)
        state = ModelDownload(
            download_id=f"dl-{len(self._downloads) + 1}",
            repo_id=repo_id,
            state="running",
            folder=f"/models/{repo_id.replace('/', '--')}",
            file=file,
            files_total=self.download_steps,
            bytes_total=None if self.download_error else self.download_steps * 100,
        )
        with self._lock:
            self._downloads[state.download_id] = state
        return state

    def download_progress(self, *, download_id: str) -> ModelDownload:
        self._call("download_progress", download_id=download_id)
        with self._lock:
            s = self._downloads[download_id]
            if s.state == "running" and self.download_error:
                s = replace(s, state="failed", error=self.download_error)
                self._downloads[download_id] = s
            if s.state == "running":
                done = s.files_done + 1
                s = replace(
                    s,
                    files_done=done,
                    bytes_done=done * 100,
                    state="done" if done >= s.files_total else "running",
                )
                self._downloads[download_id] = s
            return s

    def cancel_download(self, *, download_id: str) -> ModelDownload:
        self._call("cancel_download", download_id=download_id)
        with self._lock:
            s = replace(self._downloads[download_id], state="cancelled")
            self._downloads[download_id] = s
            return s


def request_error(message: str) -> EngineRequestError:
    return EngineRequestError(message, status=400)
