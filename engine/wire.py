"""The wire contract between the engine and its clients (GUI, CLI, others).

Every value the engine sends across the HTTP boundary is one of these frozen
dataclasses, turned into JSON with `to_json_dict` and back with `from_json_dict`.
The server and the client both import this module and its siblings (wire_events,
wire_openai, wire_each, and wire_hardware for /v1/hardware); nothing else defines
the shapes of what the engine answers. What a route accepts (its request body, with the
lengths, ranges and patterns it is checked against) is defined in one other place,
engine/service/api/bodies.py, the engine's side of the boundary; a body becomes a
value of this module before the engine sees it (`AskBody.turns` → `Turn`).

Streams are server-sent events, typed events encoded and decoded by the one codec
in engine/wire_events.py (re-exported here). `/v1/ask` sends, in order:
  event: searched   data: {"query": "...", ...}            SearchedEvent (follow-ups)
  event: citations  data: {"citations": [Citation, ...]}   CitationsEvent
  event: token      data: {"text": "..."}  (repeated)      TokenEvent
  event: done       data: AnswerDone                       DoneEvent
  event: error      data: {"message": "..."}               FailedEvent, instead of done
`/v1/ingest/{job_id}/events` sends `event: progress` with an IngestProgress each
time it changes, the last one with a final `state` (ProgressEvent).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from engine.wire_events import (
    ANSWER_EVENTS,
    AnswerDone,
    AnswerEvent,
    AnswerMode,
    Citation,
    CitationsEvent,
    DoneEvent,
    FailedEvent,
    SearchedEvent,
    StreamEvent,
    TokenEvent,
    Turn,
    decode_sse,
    encode_sse,
    ends_answer,
    from_json_dict,
    to_json_dict,
)
from engine.wire_openai import (
    OpenAIChatCompletion,
    OpenAIChatCompletionChunk,
    OpenAIChoice,
    OpenAIChunkChoice,
    OpenAICompletion,
    OpenAICompletionChoice,
    OpenAIDelta,
    OpenAIEmbedding,
    OpenAIEmbeddingList,
    OpenAIEmbeddingUsage,
    OpenAIError,
    OpenAIErrorDetail,
    OpenAIMessage,
    OpenAIModel,
    OpenAIModelList,
    OpenAIUsage,
)

__all__ = [  # re-exported: the answer stream's events and the codec, the OpenAI shapes
    "ANSWER_EVENTS",
    "AnswerDone",
    "AnswerEvent",
    "AnswerMode",
    "Citation",
    "CitationsEvent",
    "DoneEvent",
    "FailedEvent",
    "OpenAIChatCompletion",
    "OpenAIChatCompletionChunk",
    "OpenAIChoice",
    "OpenAIChunkChoice",
    "OpenAICompletion",
    "OpenAICompletionChoice",
    "OpenAIDelta",
    "OpenAIEmbedding",
    "OpenAIEmbeddingList",
    "OpenAIEmbeddingUsage",
    "OpenAIError",
    "OpenAIErrorDetail",
    "OpenAIMessage",
    "OpenAIModel",
    "OpenAIModelList",
    "OpenAIUsage",
    "SearchedEvent",
    "StreamEvent",
    "TokenEvent",
    "Turn",
    "decode_sse",
    "encode_sse",
    "ends_answer",
    "from_json_dict",
    "to_json_dict",
]

JobState = Literal["queued", "running", "done", "cancelled", "failed"]
# A job (ingestion, a model download) in one of these states changes no more.
FINAL_STATES: frozenset[str] = frozenset({"done", "cancelled", "failed"})
Priority = Literal["interactive", "background"]


@dataclass(frozen=True, kw_only=True)
class Answer:
    """A whole answer, as `ragdoll ask --json` prints it."""

    answer: str
    citations: list[Citation]
    mode: AnswerMode
    note: str | None = None
    model: str | None = None


@dataclass(frozen=True, kw_only=True)
class AskRequest:
    question: str
    k: int = 5
    # "interactive": the chat a person is watching goes first; "background": batch
    # questions and API clients (served in value order, never starved).
    priority: Priority = "interactive"
    # The conversation so far, oldest first: a follow-up is resolved against it and
    # the model sees it (within its context; the oldest turns are dropped first).
    history: list[Turn] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class FileError:
    path: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class FileNote:
    """Something to know about a file that was read: "only the first 100,000
    rows were read", or that it yields a huge number of chunks."""

    path: str
    note: str


@dataclass(frozen=True, kw_only=True)
class DiskFull:
    """A job stopped because the disk holding the index is full."""

    mount: str  # the full disk, as its mount point
    folder: str  # the index folder on it
    files_in: int  # files of this job in the index, whole (read or unchanged)
    files_not_read: int  # files of this job not read: they go in when there is room
    free_bytes: int | None = None


@dataclass(frozen=True, kw_only=True)
class IngestRequest:
    paths: list[str]


@dataclass(frozen=True, kw_only=True)
class IngestProgress:
    job_id: str
    state: JobState
    files_total: int = 0
    files_done: int = 0
    current: str | None = None
    chunks_added: int = 0
    files_indexed: int = 0  # read and (re)indexed by this job
    files_skipped: int = 0  # unchanged since the last ingest
    errors: list[FileError] = field(default_factory=list)
    message: str | None = None  # why a job failed, when it did
    paused: bool = False  # the queue is paused: the job waits between files
    chunks_embedded: int = 0  # vectors computed (the rest were reused)
    files_per_s: float = 0.0  # files read (unchanged ones not counted) per working second
    chunks_per_s: float = 0.0
    eta_s: float | None = None  # None until there is a rate to go by
    origin: str = "request"  # "request" | "watcher" (a folder changed) | "rescan" (at start)
    pages_read: int = 0  # pages of the files parsed so far (1 for a file without pages)
    chunks_found: int = 0  # chunks of the files chunked so far; chunks_embedded of them computed
    bytes_total: int = 0  # the size of the job's files: the work, for the bar and the ETA
    bytes_done: int = 0  # of which done (a file being embedded: its share embedded)
    notes: list[FileNote] = field(default_factory=list)
    disk_full: DiskFull | None = None  # set when the job stopped on a full disk


@dataclass(frozen=True, kw_only=True)
class ProgressEvent(StreamEvent):
    """One state of an ingestion job, as `/v1/ingest/{job_id}/events` streams it."""

    name: ClassVar[str] = "progress"
    progress: IngestProgress

    def payload(self) -> dict[str, Any]:
        return to_json_dict(self.progress)  # the wire carries IngestProgress itself

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> ProgressEvent:
        return cls(progress=from_json_dict(IngestProgress, data))


@dataclass(frozen=True, kw_only=True)
class IngestQueueState:
    """`/v1/ingest/queue`, `/pause`, `/resume`: the whole ingestion queue."""

    paused: bool
    jobs: list[IngestProgress] = field(default_factory=list)  # queued and running


@dataclass(frozen=True, kw_only=True)
class SourceView:
    """What the viewer shows for a citation: the page's text and the span."""

    chunk_id: str
    path: str
    page: int | None
    page_count: int | None
    page_text: str
    char_start: int
    char_end: int


@dataclass(frozen=True, kw_only=True)
class DocumentInfo:
    doc_id: str
    path: str
    size: int
    mtime: float
    status: str  # "indexed" | "error"
    error: str | None
    chunks: int
    pages: int | None


@dataclass(frozen=True, kw_only=True)
class WatchedFolder:
    """A folder the person added: its files are indexed and kept in step with
    it. Requests that name paths are confined to these folders."""

    path: str  # absolute, symlinks resolved
    collection: str = "default"
    added_at: float = 0.0  # seconds since the epoch


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    model: str | None = None  # local folder or Hugging Face id; None = extractive
    # How the model's weights are held (engine/runtime/models/compress.py): "auto" (as stored,
    # bf16 computed in bf16 where that is fast), "int8"/"int4" (a safetensors model
    # compressed once into the cache), "bf16"/"f32" (the compute dtype).
    model_weights: str = "auto"
    embedder: str = "all-MiniLM-L6-v2"
    # A cross-encoder (local folder or Hugging Face cache id) that re-orders the top 20
    # candidates of each question; None: retrieval's own order (engine/rag/answer/reranker.py).
    reranker: str | None = None
    # An OpenAI-compatible model server that generates instead of `model` (kept for
    # going back); its key lives in its own 0600 file, never here (engine/rag/answer/server_key.py).
    server_url: str | None = None
    server_model: str | None = None
    server_ca_file: str | None = None  # a private CA's certificates (PEM); None: the system's
    server_concurrency: int = 8  # requests in flight at once on the server
    # How long a request may wait for its first token (a busy or CPU-only server, a
    # long prompt's prefill, its own queue): then the answer fails, saying so.
    server_first_token_s: float = 120.0
    # The embeddings server when `embedder` names one (`server:MODEL@URL`,
    # engine/rag/ingest/server_embedder.py); its key lives in its own 0600 file.
    embed_server_ca_file: str | None = None  # a private CA's certificates (PEM)
    embed_server_batch: int = 32  # texts a request
    embed_server_timeout_s: float = 60.0  # the most a request may wait for its vectors
    max_file_mb: int = 512  # larger files are listed as errors, never read
    parse_time_limit_s: float = 120.0  # per file, in the parsing child
    parse_memory_mb: int = 2048  # address space of the parsing child


@dataclass(frozen=True, kw_only=True)
class ProfilingStatus:
    """Active profiling (first start, or after the setup changed markedly)."""

    # "waiting": a run gave way to the person's work and starts again once idle.
    state: Literal["idle", "running", "waiting", "done", "skipped", "failed"]
    message: str = ""
    fraction: float = 0.0
    reason: str | None = None  # why it runs: "first start", "the model changed (…)", …
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class ModelServerInfo:
    """The model server generating the answers (never its key)."""

    url: str
    model: str
    concurrency: int
    first_token_ms: float | None = None  # median of recent answers, measured here
    cached_tokens: int | None = None  # the last prompt's tokens its prefix cache served


@dataclass(frozen=True, kw_only=True)
class EmbedServerInfo:
    """The embeddings server the collection's text is sent to (never its key):
    the chosen embedder's, or the one of the index in force while a switch runs."""

    url: str
    model: str
    batch: int
    in_force: bool  # its index answers questions now (else: being re-embedded into)


@dataclass(frozen=True, kw_only=True)
class EmbedderOffer:
    """A multilingual embedder the window offers when the collection is not in English,
    or questions are asked in another language, and the embedder in force reads English
    only (engine/rag/ingest/embedder_offer.py)."""

    repo_id: str  # on the Hugging Face hub; downloaded only when the person accepts
    name: str
    download_bytes: int
    languages: list[str]  # the collection's (ISO 639-1), most text first
    # The languages other than English that questions were asked in since the engine
    # started (ISO 639-1), most asked first.
    asked: list[str] = field(default_factory=list)

    @property
    def for_questions(self) -> bool:
        """Offered for the questions' languages (`asked`): the documents are English."""
        return all(code == "en" for code in self.languages)


@dataclass(frozen=True, kw_only=True)
class EngineStatus:
    version: str
    pid: int
    documents: int
    chunks: int
    embedder: str  # the one chosen (the settings)
    model: str | None
    answer_mode: AnswerMode
    model_error: str | None = None  # why the chosen model is not in use
    profiling: ProfilingStatus | None = None
    pipeline: PipelineInfo | None = None  # None until the first question
    # The embedder the index was built with, which embeds questions now; differs
    # from `embedder` while a switch re-embeds the collection (job `embedder_job`).
    embedder_in_force: str | None = None
    embedder_job: str | None = None
    # What re-orders each question's candidates (EngineSettings.reranker): None,
    # "model" (the language model in use) or a cross-encoder.
    reranker: str | None = None
    server: ModelServerInfo | None = None  # generation on a model server, when it is
    embed_server: EmbedServerInfo | None = None  # embeddings from a server, when they are
    # The collection's languages (ISO 639-1, most text first), and the embedder
    # offered for them when the one in force reads English only.
    languages: list[str] = field(default_factory=list)
    embedder_offer: EmbedderOffer | None = None


# -- the two pipelines: queues, batches, placement, latency (issue #6) ----------------


@dataclass(frozen=True, kw_only=True)
class PipelineWorkerInfo:
    """One worker (retrieval or generation) now."""

    queue_length: int  # requests waiting for this worker
    running: int  # requests in the batch being processed
    cap: int  # largest batch the placement in force allows
    batch_size: int | None  # size chosen for the current (or last) batch
    batches: int  # batches run since the engine started
    fit_a: float | None  # T(B) = a·B^c in force (None: no fit yet)
    fit_c: float | None
    fit_online: bool  # the fit comes from observed batches, not the profile


@dataclass(frozen=True, kw_only=True)
class BatchPoint:
    """One finished batch, for the batch-size / placement timeline (Figure 9)."""

    worker: Literal["retrieval", "generation"]
    started: float  # seconds since the epoch
    seconds: float
    size: int
    backlog: int  # requests waiting when it was formed, itself included
    cap: int
    placement: int  # placements applied before this batch (a step = a change)


@dataclass(frozen=True, kw_only=True)
class RequestPoint:
    """One finished request, for latency over time (Figure 7) and Table 1."""

    finished: float  # seconds since the epoch
    priority: Priority
    status: Literal["done", "cancelled", "error"]
    waiting_s: float  # in queues, before either worker took it
    retrieval_s: float
    generation_s: float
    latency_s: float  # submitted -> finished
    ttft_s: float | None  # submitted -> first token (None: no token)
    tokens: int  # generated tokens (0 in extractive mode)


@dataclass(frozen=True, kw_only=True)
class PipelineInfo:
    retrieval: PipelineWorkerInfo
    generation: PipelineWorkerInfo
    placement: str  # the Placement in force, in words ("extractive" without a model)
    placement_batch: int | None  # its batch size
    placements_applied: int
    submitted: int
    finished: int
    tokens_per_s: float  # generated tokens per second over the last 30 s
    batches: list[BatchPoint] = field(default_factory=list)  # the last 128, oldest first
    requests: list[RequestPoint] = field(default_factory=list)  # the last 256, oldest first


# -- watched folders, collections, search, queue, server settings -------------------


@dataclass(frozen=True, kw_only=True)
class FolderAdded:
    """POST /v1/folders: the folder as registered and the job indexing it (None
    when the request asked only for the grant)."""

    folder: WatchedFolder
    job: IngestProgress | None = None


@dataclass(frozen=True, kw_only=True)
class CollectionInfo:
    """A named group of watched folders and what is indexed from them."""

    name: str
    folders: list[str]
    documents: int
    chunks: int


@dataclass(frozen=True, kw_only=True)
class SearchResponse:
    """POST /v1/search: the passages that match, best first, as citations."""

    query: str
    hits: list[Citation]


@dataclass(frozen=True, kw_only=True)
class QueueStatus:
    """Work in the engine now: ingestion jobs not finished, answers being written."""

    ingest_jobs: list[IngestProgress]
    answers_active: int
    shutting_down: bool


@dataclass(frozen=True, kw_only=True)
class ServerSettings:
    """Who may reach the API besides the user's own programs, and whether the
    window leaves the engine running when it closes (to keep watching folders)."""

    allowed_origins: list[str] = field(default_factory=list)  # e.g. "http://localhost:3000"
    keep_engine_running: bool = False
    # OpenAI-compatible answers end with their sources as a numbered list in the text
    # (generic clients show no `citations` field); a request can say otherwise.
    api_sources_in_text: bool = True


@dataclass(frozen=True, kw_only=True)
class ApiError:
    """The body of a refusal from the engine's own routes (4xx)."""

    detail: str


# -- models: recommendations and downloads ---------------------------------------

Verdict = Literal["gpu", "offloaded", "too_large", "ram"]
ModelRole = Literal["model", "reranker"]
DownloadState = Literal["queued", "running", "done", "cancelled", "failed"]


@dataclass(frozen=True, kw_only=True)
class GGUFVariantAdvice:
    """A GGUF file of a recommended model: its size (an estimate from the parameter
    count and the format's bits per weight) and the planner's verdict for it here."""

    repo: str
    file: str
    quant: str  # Q4_K_M, Q8_0, ...
    file_bytes: int
    verdict: str
    note: str
    installed_path: str | None = None  # the .gguf to choose when it is in the HF cache


@dataclass(frozen=True, kw_only=True)
class ModelAdvice:
    """One recommended model, as the planner sees it on this machine.

    `verdict` says it in words ("fits on GPU", "offloaded 40%", "too large: 12.0 GiB
    missing"); `verdict_kind` is the same for code. `expected_tokens_per_s` is a
    roofline estimate for one sequence (`speed_note` says how it was made), never a
    measurement; None when the model does not fit."""

    id: str  # Hugging Face repo id
    name: str
    params: int
    licence: str
    description: str
    weight_bytes: int
    verdict: str
    verdict_kind: Verdict
    offloaded_percent: int
    missing_bytes: int
    expected_tokens_per_s: float | None
    speed_note: str
    installed: bool
    installed_path: str | None = None  # the folder to choose when installed
    chosen: bool = False
    download_bytes: int = 0  # what Download fetches (0: not known)
    gguf_variants: list[GGUFVariantAdvice] = field(default_factory=list)
    # "reranker": a cross-encoder that orders each question's sources (chosen as the
    # engine's reranker, never as the answer model); its cost is per question.
    role: ModelRole = "model"
    seconds_per_question: float | None = None  # a reranker's estimate at 20 passages


@dataclass(frozen=True, kw_only=True)
class RecommendedModels:
    models: list[ModelAdvice]
    hardware_note: str  # what the verdicts were computed for


@dataclass(frozen=True, kw_only=True)
class ModelDownload:
    """A download from the Hugging Face hub, started only when a person asks."""

    download_id: str
    repo_id: str
    state: DownloadState
    folder: str  # where the files go; a model folder once done
    file: str | None = None  # one .gguf file of the repo (None: the model's own files)
    files_done: int = 0
    files_total: int = 0
    bytes_done: int = 0
    bytes_total: int | None = None
    bytes_resumed: int = 0  # bytes already on disk from an earlier, interrupted try
    current_file: str | None = None
    error: str | None = None
