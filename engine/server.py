"""The engine's HTTP server: loopback only, a bearer token on every request,
answers and ingestion progress streamed as server-sent events."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from engine.auth import host_is_loopback, load_or_create_token, token_matches
from engine.client import encode_sse
from engine.core import VERSION, Engine
from engine.errors import ModelLoadError
from engine.ingest.jobs import FINAL_STATES, IngestJob
from engine.paths import Paths
from engine.wire import to_json_dict

log = logging.getLogger(__name__)
MAX_BODY_BYTES = 1 << 20


class AskBody(BaseModel):
    question: str = Field(min_length=1, max_length=8000)
    k: int = Field(default=5, ge=1, le=50)


class IngestBody(BaseModel):
    paths: list[str] = Field(min_length=1, max_length=10000)


class ModelBody(BaseModel):
    model: str | None = Field(default=None, max_length=4096)


def create_app(*, engine: Engine, token: str, request_shutdown: Callable[[], None]) -> FastAPI:
    app = FastAPI(title="RAGDoll engine", version=VERSION)

    @app.middleware("http")
    async def guard(request: Request, call_next):  # type: ignore[no-untyped-def]
        if not host_is_loopback(request.headers.get("host")):
            return JSONResponse({"detail": "forbidden host"}, status_code=403)
        if not token_matches(header=request.headers.get("authorization"), token=token):
            return JSONResponse(
                {"detail": "missing or wrong token"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > MAX_BODY_BYTES:
            return JSONResponse({"detail": "request too large"}, status_code=413)
        return await call_next(request)

    @app.get("/v1/status")
    def status() -> dict:
        return to_json_dict(engine.status())

    @app.get("/v1/settings")
    def settings() -> dict:
        return to_json_dict(engine.settings)

    @app.put("/v1/settings/model")
    def set_model(body: ModelBody) -> dict:
        try:
            return to_json_dict(engine.set_model(model=body.model))
        except ModelLoadError as e:
            raise HTTPException(status_code=400, detail=str(e)) from e

    @app.get("/v1/hardware")
    def hardware() -> dict:
        # A sync endpoint runs in the server's thread pool: the first call measures
        # disk bandwidth (seconds) without holding up other requests.
        from engine.planner.report import hardware_info

        _, chunks = engine.store.counts()
        meta = engine.store.meta
        info = hardware_info(
            paths=engine.paths,
            model=engine.settings.model,
            chunks=chunks,
            vector_dim=meta.dimension if meta else None,
        )
        return to_json_dict(info)

    @app.get("/v1/documents")
    def documents() -> dict:
        return {"documents": [to_json_dict(d) for d in engine.documents()]}

    @app.get("/v1/documents/errors")
    def errors() -> dict:
        return {"errors": [to_json_dict(e) for e in engine.errors()]}

    @app.get("/v1/chunks/{chunk_id}/source")
    def source(chunk_id: str) -> dict:
        view = engine.source(chunk_id=chunk_id)
        if view is None:
            raise HTTPException(status_code=404, detail="no such passage (re-indexed?)")
        return to_json_dict(view)

    @app.post("/v1/ingest")
    def ingest(body: IngestBody) -> dict:
        return to_json_dict(engine.start_ingest(paths=body.paths).snapshot())

    # Before /v1/ingest/{job_id}, which would take "queue" for a job id.
    @app.get("/v1/ingest/queue")
    def ingest_queue() -> dict:
        return to_json_dict(engine.ingest.state())

    @app.post("/v1/ingest/pause")
    def ingest_pause() -> dict:
        return to_json_dict(engine.pause_ingest())

    @app.post("/v1/ingest/resume")
    def ingest_resume() -> dict:
        return to_json_dict(engine.resume_ingest())

    def job_or_404(job_id: str) -> IngestJob:
        job = engine.ingest.job(job_id=job_id)
        if job is None:
            raise HTTPException(status_code=404, detail="no such ingestion job")
        return job

    @app.get("/v1/ingest/{job_id}")
    def ingest_progress(job_id: str) -> dict:
        return to_json_dict(job_or_404(job_id).snapshot())

    @app.post("/v1/ingest/{job_id}/cancel")
    def ingest_cancel(job_id: str) -> dict:
        job_or_404(job_id)
        job = engine.ingest.cancel(job_id=job_id)
        assert job is not None
        return to_json_dict(job.snapshot())

    @app.get("/v1/ingest/{job_id}/events")
    def ingest_events(job_id: str) -> StreamingResponse:
        job = job_or_404(job_id)

        def events() -> Iterator[str]:
            version = -1
            while True:
                version, progress = job.wait_next(after=version, timeout_s=10.0)
                yield encode_sse(event="progress", value=progress)
                if progress.state in FINAL_STATES:
                    return

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/v1/ask")
    def ask(body: AskBody) -> StreamingResponse:
        cancel = threading.Event()

        def events() -> Iterator[str]:
            try:
                for name, value in engine.ask_stream(
                    question=body.question, k=body.k, cancel=cancel
                ):
                    if name == "citations":
                        payload = {"citations": [to_json_dict(c) for c in value]}
                        yield encode_sse(event="citations", value=payload)
                    elif name == "token":
                        yield encode_sse(event="token", value={"text": value})
                    else:
                        yield encode_sse(event="done", value=value)
            except Exception as e:  # the stream has begun: report in-band
                log.exception("answering failed")
                yield encode_sse(event="error", value={"message": f"{type(e).__name__}: {e}"})
            finally:
                cancel.set()  # the client went away or we finished: stop generating

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/v1/shutdown")
    def shutdown() -> dict:
        request_shutdown()
        return {"ok": True}

    return app


def serve(*, paths: Paths, host: str = "127.0.0.1", port: int = 0) -> int:
    """Run the engine until shutdown. Returns the process exit code."""
    import uvicorn

    from engine.launcher import EngineLock, remove_endpoint, write_endpoint

    paths.ensure()
    _setup_logging(paths.engine_log)
    lock = EngineLock(file=paths.engine_lock)
    if not lock.acquire():
        print("An engine is already running for this user (see `ragdoll status`).")
        return 3
    try:
        token = load_or_create_token(file=paths.token_file)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        bound_port = sock.getsockname()[1]
        engine = Engine(paths=paths)
        holder: dict[str, uvicorn.Server] = {}

        def request_shutdown() -> None:
            holder["server"].should_exit = True

        app = create_app(engine=engine, token=token, request_shutdown=request_shutdown)
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=5
        )
        server = uvicorn.Server(config)
        holder["server"] = server
        url = f"http://127.0.0.1:{bound_port}"
        write_endpoint(paths=paths, url=url, pid=os.getpid())
        log.info("engine %s listening on %s (pid %d)", VERSION, url, os.getpid())
        try:
            server.run(sockets=[sock])
        finally:
            engine.close()
            remove_endpoint(paths=paths, pid=os.getpid())
        return 0
    finally:
        lock.release()


def _setup_logging(file: Path) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(file, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for noisy in ("httpx", "pypdf", "urllib3", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
