"""The engine's HTTP server: loopback only, a bearer token on every request,
answers and ingestion progress streamed as server-sent events.

`create_app` is the app factory: the core routes live here, the OpenAI-compatible,
library and system routes in engine/service/api/, and every request first passes
engine/service/api/security.py's guard (Host, Origin, token, body size)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI, HTTPException
from fastapi.responses import StreamingResponse

from engine.environ import EngineEnviron
from engine.errors import EmbedderError, ModelLoadError
from engine.paths import Paths
from engine.rag.answer.server_client import ModelServerError, ServerAddressError
from engine.rag.ingest.fspath import from_store, to_store
from engine.rag.ingest.jobs import IngestJob
from engine.service.api.bodies import (
    AskBody,
    EmbedderBody,
    EmbedderServerBody,
    IngestBody,
    ModelBody,
    ModelServerBody,
    RerankerBody,
    ServerModelsBody,
)
from engine.service.api.lifecycle import Lifecycle, until_disconnect
from engine.service.api.openai_routes import install_openai_error_handlers, openai_router
from engine.service.api.routes_each import each_router
from engine.service.api.routes_library import library_router
from engine.service.api.routes_models import models_router
from engine.service.api.routes_system import system_router
from engine.service.api.security import MAX_BODY_BYTES, ApiGuard
from engine.service.api.server_settings import ServerSettingsStore
from engine.service.api.slow_clients import HeaderDeadlineH11
from engine.service.auth import HostPolicy, is_loopback_address, new_token
from engine.service.core import Engine
from engine.service.status_view import VERSION
from engine.wire import (
    FINAL_STATES,
    ApiError,
    DocumentInfo,
    DoneEvent,
    EngineSettings,
    EngineStatus,
    FailedEvent,
    FileError,
    IngestProgress,
    ProfilingStatus,
    ProgressEvent,
    SourceView,
    encode_sse,
    to_json_dict,
)
from engine.wire_hardware import HardwareInfo

# A citation whose passage is gone: its document left the library, or was read again.
PASSAGE_REMOVED = (
    "The document this passage came from is no longer in your library "
    "(its folder was removed, or the file was deleted)."
)
PASSAGE_REREAD = (
    "This passage is no longer in its document, which was read again since it was "
    "cited: ask again to get its current passages."
)
log = logging.getLogger(__name__)
__all__ = ["MAX_BODY_BYTES", "create_app", "serve"]
SSE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-sent events (see engine/wire.py)",
        "content": {"text/event-stream": {}},
    }
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ApiError, "description": "Not found"}}
SERVER_REFUSED: dict[int | str, dict[str, Any]] = {
    400: {"model": ApiError, "description": "Not a server address, or a CA file not found"},
    502: {"model": ApiError, "description": "The model server could not be used (why, in words)"},
}
# What the guard or the body parser may answer on any route.
COMMON_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ApiError, "description": "A body that is not JSON, or a request refused"},
    401: {"model": ApiError, "description": "No token, or the wrong one"},
    403: {"model": ApiError, "description": "A foreign Host or Origin, or a path not granted"},
    413: {"model": ApiError, "description": "A body over 1 MiB"},
}


@contextlib.contextmanager
def server_refusals() -> Iterator[None]:
    """A model or embeddings server's refusal as the route's answer: 400 for what was
    given (an address, a CA file, a value), 502 for a server that cannot be used."""
    try:
        yield
    except ServerAddressError as e:
        raise HTTPException(status_code=400, detail=str(e)) from e
    except ModelServerError as e:
        raise HTTPException(status_code=502, detail=str(e)) from e
    except (ModelLoadError, EmbedderError, OSError, ValueError) as e:
        raise HTTPException(status_code=400, detail=str(e)) from e


def create_app(
    *,
    engine: Engine,
    token: str,
    request_shutdown: Callable[[], None],
    host_policy: HostPolicy | None = None,
    server_settings: ServerSettingsStore | None = None,
    lifecycle: Lifecycle | None = None,
) -> FastAPI:
    # No /docs or /redoc: their pages load scripts from a CDN, and nothing leaves
    # the machine. /openapi.json is served (behind the token like everything else).
    app = FastAPI(
        title="RAGDoll engine",
        version=VERSION,
        docs_url=None,
        redoc_url=None,
        responses=COMMON_RESPONSES,
    )
    install_openai_error_handlers(app)
    lifecycle = lifecycle or Lifecycle()
    if server_settings is None:
        server_settings = ServerSettingsStore(file=engine.paths.config / "server.json")
    app.add_middleware(
        ApiGuard,
        token=token,
        host_policy=host_policy or HostPolicy(),
        allowed_origins=server_settings.allowed_origins,
    )
    # Before the OpenAI routes: their /v1/models/{model} would take /v1/models/recommended.
    app.include_router(models_router(engine=engine))
    app.include_router(openai_router(engine=engine, lifecycle=lifecycle, settings=server_settings))
    app.include_router(library_router(engine=engine))
    app.include_router(each_router(engine=engine, lifecycle=lifecycle))
    app.include_router(system_router(engine=engine, lifecycle=lifecycle, settings=server_settings))

    @app.get("/v1/status", response_model=EngineStatus)
    def status() -> dict:
        return to_json_dict(engine.status())

    @app.get("/v1/settings", response_model=EngineSettings)
    def settings() -> dict:
        return to_json_dict(engine.settings)

    @app.put("/v1/settings/model", response_model=EngineSettings)
    def set_model(body: ModelBody) -> dict:
        try:
            return to_json_dict(engine.models.set_model(model=body.model, weights=body.weights))
        except (ModelLoadError, OSError, ValueError) as e:  # OSError: a name too long
            raise HTTPException(status_code=400, detail=str(e)) from e

    @app.put("/v1/settings/model-server", response_model=EngineSettings, responses=SERVER_REFUSED)
    def set_model_server(body: ModelServerBody) -> dict:
        """Generate on an OpenAI-compatible server; checked first (502 when it cannot
        be used, with why). Passages of the person's documents go to it from then on."""
        with server_refusals():
            return to_json_dict(
                engine.models.set_model_server(
                    url=body.url,
                    model=body.model,
                    api_key=body.api_key,
                    ca_file=body.ca_file,
                    concurrency=body.concurrency,
                    first_token_s=body.first_token_s,
                )
            )

    @app.post(
        "/v1/model-server/models", response_model=dict[str, list[str]], responses=SERVER_REFUSED
    )
    def server_models(body: ServerModelsBody) -> dict:
        """The models a server lists (its /v1/models); nothing else is sent to it."""
        with server_refusals():
            models = engine.models.server_models(
                url=body.url, api_key=body.api_key, ca_file=body.ca_file
            )
        return {"models": models}

    @app.put("/v1/settings/embedder", response_model=EngineSettings)
    def set_embedder(body: EmbedderBody) -> dict:
        """Choose the embedder; the collection is re-embedded as a background job
        (origin "embedder" in /v1/ingest/queue) while the current index answers."""
        try:
            return to_json_dict(engine.set_embedder(embedder=body.embedder))
        except (EmbedderError, OSError, ValueError) as e:
            raise HTTPException(status_code=400, detail=str(e)) from e

    @app.put(
        "/v1/settings/embedder-server", response_model=EngineSettings, responses=SERVER_REFUSED
    )
    def set_embedder_server(body: EmbedderServerBody) -> dict:
        """Embed on an OpenAI-compatible embeddings server; asked once first (502 when
        it cannot be used, with why), then the collection is re-embedded by it in the
        background. The text of the person's documents goes to it from then on."""
        with server_refusals():
            return to_json_dict(
                engine.embed_servers.choose(
                    url=body.url,
                    model=body.model,
                    api_key=body.api_key,
                    ca_file=body.ca_file,
                    batch=body.batch,
                    timeout_s=body.timeout_s,
                )
            )

    @app.put("/v1/settings/reranker", response_model=EngineSettings)
    def set_reranker(body: RerankerBody) -> dict:
        """Re-order each question's candidates: "model" (the language model in use),
        a cross-encoder (loaded first; 400 when it does not load), or none."""
        try:
            return to_json_dict(engine.set_reranker(reranker=body.reranker))
        except (ModelLoadError, OSError, ValueError) as e:
            raise HTTPException(status_code=400, detail=str(e)) from e

    @app.get("/v1/hardware", response_model=HardwareInfo)
    def hardware() -> dict:
        # A sync endpoint runs in the server's thread pool: the first call measures
        # disk bandwidth (seconds) without holding up other requests.
        return to_json_dict(engine.system.hardware())

    @app.get("/v1/documents", response_model=dict[str, list[DocumentInfo]])
    def documents() -> dict:
        return {"documents": [to_json_dict(d) for d in engine.documents()]}

    @app.get("/v1/documents/errors", response_model=dict[str, list[FileError]])
    def errors() -> dict:
        return {"errors": [to_json_dict(e) for e in engine.errors()]}

    @app.get("/v1/chunks/{chunk_id}/source", response_model=SourceView, responses=NOT_FOUND)
    def source(chunk_id: str) -> dict:
        view = engine.source(chunk_id=chunk_id)
        if view is None:
            raise HTTPException(status_code=404, detail=passage_gone(chunk_id=chunk_id))
        return to_json_dict(view)

    def passage_gone(*, chunk_id: str) -> str:
        """Why a citation's passage is not there any more, for a person."""
        doc_id = chunk_id.rpartition(":")[0]  # engine/rag/ingest/indexer.py: "{doc_id}:{n}"
        if doc_id and any(d.doc_id == doc_id for d in engine.documents()):
            return PASSAGE_REREAD
        return PASSAGE_REMOVED

    @app.post(
        "/v1/ingest",
        response_model=IngestProgress,
        responses={403: {"description": "A path outside every watched folder"}},
    )
    def ingest(body: IngestBody) -> dict:
        # Confinement: the API reads only what lies in a folder the person added
        # (POST /v1/folders is the grant); `..` and symlinks are resolved first.
        # Paths come in the store's encoding, as the API shows them (fspath.py).
        paths = [from_store(p) for p in body.paths]
        for path, named in zip(paths, body.paths, strict=True):
            if "\x00" in str(path) or engine.library.folder_of(path=path) is None:
                raise HTTPException(
                    status_code=403,
                    detail=f"{named} is outside every watched folder; add its folder first "
                    "(POST /v1/folders)",
                )
        return to_json_dict(engine.start_ingest(paths=[str(p) for p in paths]).snapshot())

    # Before /v1/ingest/{job_id}, which would take "queue" for a job id.
    @app.get("/v1/ingest/queue")
    def ingest_queue() -> dict:
        return to_json_dict(engine.ingestion.state())

    @app.post("/v1/ingest/pause")
    def ingest_pause() -> dict:
        return to_json_dict(engine.pause_ingest())

    @app.post("/v1/ingest/resume")
    def ingest_resume() -> dict:
        return to_json_dict(engine.resume_ingest())

    def job_or_404(job_id: str) -> IngestJob:
        job = engine.ingestion.job(job_id=job_id)
        if job is None:
            raise HTTPException(status_code=404, detail="no such ingestion job")
        return job

    @app.get("/v1/ingest/{job_id}", response_model=IngestProgress, responses=NOT_FOUND)
    def ingest_progress(job_id: str) -> dict:
        return to_json_dict(job_or_404(job_id).snapshot())

    @app.post("/v1/ingest/{job_id}/cancel", response_model=IngestProgress, responses=NOT_FOUND)
    def ingest_cancel(job_id: str) -> dict:
        job_or_404(job_id)
        job = engine.ingestion.cancel(
            job_id=job_id, reason="cancelled on request (the window or a client)"
        )
        assert job is not None
        return to_json_dict(job.snapshot())

    @app.get("/v1/ingest/{job_id}/events", responses={**SSE_RESPONSE, **NOT_FOUND})
    def ingest_events(job_id: str) -> StreamingResponse:
        job = job_or_404(job_id)

        def events() -> Iterator[str]:
            version = -1
            while True:
                version, progress = job.wait_next(after=version, timeout_s=10.0)
                yield encode_sse(ProgressEvent(progress=progress))
                if progress.state in FINAL_STATES:
                    return

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/v1/ask", responses=SSE_RESPONSE)
    def ask(body: AskBody) -> StreamingResponse:
        stop = threading.Event()  # the client left, or the engine is shutting down

        def events() -> Iterator[str]:
            try:
                with lifecycle.answer(cancel=stop) as cancel:
                    yield from answer_events(cancel)
            except Exception as e:  # the stream has begun: report in-band
                log.exception("answering failed")
                yield encode_sse(FailedEvent(message=f"{type(e).__name__}: {e}"))

        def answer_events(cancel: threading.Event) -> Iterator[str]:
            events = engine.ask_stream(
                question=body.question,
                k=body.k,
                cancel=cancel,
                priority=body.priority,
                history=body.turns(),
            )
            for event in events:
                lifecycle.check()
                if isinstance(event, DoneEvent):
                    lifecycle.check()  # a cut answer is never passed off as whole
                yield encode_sse(event)

        body_stream = until_disconnect(events(), cancel=stop)
        return StreamingResponse(body_stream, media_type="text/event-stream")

    @app.post("/v1/profiling/skip", response_model=ProfilingStatus)
    def skip_profiling() -> dict:
        return to_json_dict(engine.system.skip_profiling())

    @app.post("/v1/shutdown", response_model=dict[str, bool])
    def shutdown() -> dict:
        lifecycle.begin_shutdown()
        request_shutdown()
        return {"ok": True}

    return app


def serve(
    *,
    paths: Paths,
    environ: EngineEnviron,
    host: str = "127.0.0.1",
    port: int = 0,
    allow_hosts: tuple[str, ...] = (),
    stop_with: int | None = None,
) -> int:
    """Run the engine until shutdown. Returns the process exit code.

    `host` other than a loopback address exposes the engine to the network: only
    on explicit request (`ragdoll engine --listen`), with a warning, and still
    token-only. `stop_with`: the pid of the program the engine was started for; it
    stops when that process is gone, unless kept running (engine/service/owner.py)."""
    from engine.service.launcher import (
        EngineLock,
        process_record,
        remove_endpoint,
        this_process,
        write_endpoint,
    )
    from engine.service.owner import OwnerWatch

    if os.name == "posix":
        # Everything the engine writes (index, logs, settings, the parsing child's
        # files) is this user's alone: 0600 files, 0700 folders.
        os.umask(0o077)
    paths.ensure()
    lock = EngineLock(file=paths.engine_lock)
    if not lock.acquire():
        print("An engine is already running for this user (see `ragdoll status`).")
        return 3
    try:
        process = this_process()
        lock.record(process=process)
        # A new token at every start: one taken from an earlier engine opens nothing.
        token = new_token(file=paths.token_file)
        _setup_logging(paths.engine_log, secret=token)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        # Listening before the endpoint file is written: a client that reads it
        # while uvicorn is still starting waits in the backlog instead of being
        # refused.
        sock.listen(2048)
        bound_port = sock.getsockname()[1]
        if not is_loopback_address(host):
            _warn_network(host=host, port=bound_port, token_file=paths.token_file)
        engine = Engine(paths=paths, environ=environ)
        lifecycle = Lifecycle()
        holder: dict[str, _Server] = {}

        def request_shutdown() -> None:
            holder["server"].should_exit = True

        server_settings = ServerSettingsStore(file=paths.config / "server.json")
        app = create_app(
            engine=engine,
            token=token,
            request_shutdown=request_shutdown,
            host_policy=HostPolicy.for_listen_address(address=host, extra=allow_hosts),
            server_settings=server_settings,
            lifecycle=lifecycle,
        )
        config = uvicorn.Config(
            app,
            http=HeaderDeadlineH11,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=5,
        )
        server = _Server(config, on_exit=lambda: _begin_shutdown(engine, lifecycle))
        holder["server"] = server
        url = f"http://{_local_address(host)}:{bound_port}"
        write_endpoint(paths=paths, url=url, process=process)
        log.info("engine %s listening on %s (pid %d)", VERSION, url, os.getpid())
        owner = None
        if stop_with is not None:

            def owner_gone() -> None:
                _begin_shutdown(engine, lifecycle)
                request_shutdown()

            owner = OwnerWatch(
                owner=process_record(pid=stop_with),
                keep_running=lambda: server_settings.value.keep_engine_running,
                stop=owner_gone,
            )
            owner.start()
        try:
            server.run(sockets=[sock])
        finally:
            if owner is not None:
                owner.close()
            _begin_shutdown(engine, lifecycle)
            engine.close()
            remove_endpoint(paths=paths, pid=os.getpid())
            log.info("engine stopped")
        return 0
    finally:
        lock.release()


def _begin_shutdown(engine: Engine, lifecycle: Lifecycle) -> None:
    """End answer streams now, and cancel ingestion after the file in hand, so that
    the server's graceful wait for open responses is short."""
    lifecycle.begin_shutdown()
    engine.ingestion.cancel_all()


class _Server(uvicorn.Server):
    """uvicorn's Server, telling us about SIGTERM/SIGINT before it starts to wait
    for open responses (which our streams end at once when told)."""

    def __init__(self, config: uvicorn.Config, *, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)
        # uvicorn re-raises the signal once it has shut down, which would kill the
        # process before the engine is closed and the endpoint file removed: we end
        # by returning from serve() instead (exit code 0, a clean stop).
        self._captured_signals.clear()


def _local_address(host: str) -> str:
    """The address this machine's own clients use to reach the engine."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host in ("::", "[::]"):
        return "[::1]"
    return f"[{host.strip('[]')}]" if ":" in host else host


def _warn_network(*, host: str, port: int, token_file: Path) -> None:
    lines = [
        "!" * 78,
        f"WARNING: the engine listens on {host}:{port}, NOT only on this machine.",
        "Other machines on the network can reach it. Every request still needs the",
        f"token in {token_file}; anyone who has it can read your documents.",
        "Stop the engine and run it without --listen to keep it private.",
        "!" * 78,
    ]
    for line in lines:
        print(line, file=sys.stderr, flush=True)
    log.warning("listening on a non-loopback address %s:%d on explicit request", host, port)


class _Redact(logging.Filter):
    """The token never reaches a log, whatever a message or traceback contains; a
    file name that is not UTF-8 is written as the store keeps it, not lost to an
    encoding error."""

    def __init__(self, secret: str | None) -> None:
        super().__init__()
        self._secret = secret

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = to_store(message)
        if self._secret:
            clean = clean.replace(self._secret, "[token]")
        if clean != message:
            record.msg, record.args = clean, None
        return True


def _setup_logging(file: Path, *, secret: str | None = None) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    # backslashreplace: what the filter cannot reach (a traceback's text) still
    # never makes a line vanish.
    handler = logging.FileHandler(file, encoding="utf-8", errors="backslashreplace")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_Redact(secret))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for noisy in ("httpx", "pypdf", "urllib3", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: list[str]) -> int:
    from engine.rag.store.lance_logs import quiet_lancedb_logs
    from engine.service.api.listen_args import add_listen_arguments
    from engine.service.offline import engine_environment

    quiet_lancedb_logs()
    # Started by hand too (`ragdoll engine`): the person's offline choice is read
    # before the libraries are held offline (engine/service/offline.py).
    os.environ.update(engine_environment(os.environ))

    parser = argparse.ArgumentParser(prog="python -m engine")
    add_listen_arguments(parser)
    args = parser.parse_args(argv)
    return serve_here(args)


def serve_here(args: argparse.Namespace) -> int:
    """`serve` where the listen arguments `args` say, with this process's environment:
    its RAGDOLL_* variables read once here (engine/environ.py) and handed down."""
    from engine.paths import paths_under

    environ = EngineEnviron.from_environ()
    code = serve(
        paths=paths_under(home=environ.home),
        environ=environ,
        host=args.listen,
        port=args.port,
        allow_hosts=tuple(n.lower() for n in args.allow_host),
        stop_with=args.stop_with,
    )
    # The process ends when this returns (`python -m engine`, `ragdoll engine`), with
    # the engine closed and its endpoint removed. The interpreter's last collection
    # walked every object torch and transformers had made: 1.6-1.8 s between "engine
    # stopped" and the exit here (py-spy: gc_collect_main), 0.3-0.4 s frozen. atexit
    # handlers (logging's flush among them) still run.
    gc.freeze()
    return code
