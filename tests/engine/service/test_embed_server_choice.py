"""An embeddings server as the collection's embedder, through the engine's one switch:
the collection (real files through the real parsers, LanceDB on disk) is re-embedded
by the server while the old index answers, then questions are embedded by it too; the
key is kept 0600 and shows in no status, setting or log; a server that fails while
re-embedding leaves the old index answering with every chunk; a server that refuses
when chosen is never saved."""

from __future__ import annotations

import json
import logging
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.paths import resolve_paths
from engine.rag.answer.server_client import ServerAddressError
from engine.rag.ingest.embedder import DEFAULT_EMBEDDER
from engine.rag.ingest.server_embedder import EmbeddingServerError
from engine.service.core import Engine
from engine.wire import FINAL_STATES, IngestProgress
from tests.fixtures.pdf_factory import PdfPage, write_pdf
from tests.support.model_server_stub import EMBED_DIM, Stub, model_server_stub
from tests.support.waiting import wait_until

KEY = "sk-embed-77aa66bb55cc"


def _docs(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "birds.md").write_text("# Birds\n\nOwls hunt at night in the old forest.\n")
    (folder / "plants.html").write_text(
        "<html><body><h1>Plants</h1><p>Ferns grow in the shade of tall trees.</p></body></html>"
    )
    write_pdf(
        path=folder / "canals.pdf",
        pages=[PdfPage(heading="Canals", paragraphs=["Canals have locks for boats."])],
    )
    return folder


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")})
    running = Engine(paths=paths, warm_up=False, watch=False)
    try:
        _, job = running.add_folder(path=str(_docs(tmp_path / "docs")))
        wait_until(lambda: job.snapshot().state == "done", timeout_s=180)
        yield running
    finally:
        running.close()


def _switch_done(engine: Engine) -> IngestProgress:
    """The embedder switch's job, once it ended."""
    job_id = engine.status().embedder_job
    assert job_id is not None
    job = engine.ingest.job(job_id=job_id)
    assert job is not None
    wait_until(lambda: job.snapshot().state in FINAL_STATES, timeout_s=120)
    return job.snapshot()


def _exposed(engine: Engine) -> list[str]:
    paths = engine.paths
    return [
        json.dumps(engine.status(), default=str),
        paths.settings_file.read_text(),
        *(p.read_text(errors="replace") for p in paths.logs.glob("*.log")),
    ]


def test_the_server_re_embeds_the_collection_and_embeds_questions(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    chunks = engine.store.counts()[1]
    assert chunks >= 3
    with model_server_stub(key=KEY) as stub:
        engine.ingest.pause()  # the switch waits: the old index answers meanwhile
        settings = engine.embed_servers.choose(
            url=stub.url, model="stub-embed", api_key=KEY, batch=2, timeout_s=30
        )
        server_id = f"server:stub-embed@{stub.url}"
        assert settings.embedder == server_id and settings.embed_server_batch == 2
        status = engine.status()
        assert status.embedder_in_force == DEFAULT_EMBEDDER and status.embedder_job
        assert status.embed_server is not None and not status.embed_server.in_force
        assert status.embed_server.model == "stub-embed" and status.embed_server.url == stub.url
        hits = engine.retrieve(question="which birds hunt at night", k=1)
        assert hits and "Owls" in hits[0].chunk.text
        assert len(stub.state.embed_requests) == 1  # only the dimension was asked yet

        engine.ingest.resume()
        assert _switch_done(engine).state == "done"
        status = engine.status()
        assert status.embedder_in_force == server_id and status.embedder_job is None
        assert status.embed_server is not None and status.embed_server.in_force
        assert engine.store.meta is not None and engine.store.meta.dimension == EMBED_DIM
        assert engine.store.counts()[1] == chunks
        sent = [t for r in stub.state.embed_requests[1:] for t in r["input"]]
        assert len(sent) == chunks and any("Canals have locks" in t for t in sent)
        assert all(len(r["input"]) <= 2 for r in stub.state.embed_requests)

        # Questions are embedded by the server now, and find their passages.
        before = len(stub.state.embed_requests)
        hits = engine.retrieve(question="where do ferns grow", k=1)
        assert hits and "Ferns" in hits[0].chunk.text
        assert stub.state.embed_requests[before]["input"] == ["where do ferns grow"]
        # A file added now is embedded by the server into the server's index.
        boats = Path(hits[0].chunk.path).parent / "boats.md"
        boats.write_text("# Boats\n\nBarges carry coal along the river.\n")
        job = engine.ingest.submit(paths=[str(boats)])
        wait_until(lambda: job.snapshot().state == "done", timeout_s=60)
        hits = engine.retrieve(question="what do barges carry", k=1)
        assert hits and "Barges" in hits[0].chunk.text

        stored = engine.paths.config / "embeddings-server.key"
        assert stat.S_IMODE(stored.stat().st_mode) == 0o600 and stored.read_text() == KEY
        assert not any(KEY in text for text in _exposed(engine))
        assert KEY not in caplog.text

        # Back to the bundled embedder: the key stays while the server's index answers,
        # and goes with it.
        engine.set_embedder(embedder=DEFAULT_EMBEDDER)
        assert stored.exists()
        assert _switch_done(engine).state == "done"
        assert engine.status().embed_server is None
        assert not stored.exists()


def test_a_server_failing_mid_switch_leaves_the_old_index_with_every_chunk(
    engine: Engine,
) -> None:
    chunks = engine.store.counts()
    with model_server_stub() as stub:
        # "shifty" answers the dimension, then sends vectors of another.
        engine.embed_servers.choose(url=stub.url, model="shifty", batch=1)
        switch = _switch_done(engine)
        assert switch.state == "failed"
        message = switch.message or ""
        assert "65-dimensional vectors where it first sent 64" in message
        assert "Nothing in the index is lost" in message
    status = engine.status()
    assert status.embedder_in_force == DEFAULT_EMBEDDER
    assert engine.store.counts() == chunks
    assert engine.store.meta is not None and engine.store.meta.dimension == 384
    hits = engine.retrieve(question="which birds hunt at night", k=1)
    assert hits and "Owls" in hits[0].chunk.text


def _refused(engine: Engine, stub: Stub, **asked: object) -> str:
    with pytest.raises((EmbeddingServerError, ServerAddressError, ValueError)) as failed:
        engine.embed_servers.choose(url=asked.pop("url", stub.url), **asked)  # type: ignore[arg-type]
    return str(failed.value)


def test_a_server_that_refuses_when_chosen_is_never_saved(engine: Engine) -> None:
    with model_server_stub(key=KEY) as stub:
        assert "refused the API key (401)" in _refused(
            engine, stub, model="stub-embed", api_key="sk-wrong"
        )
        assert "has no model 'nope'" in _refused(engine, stub, model="nope", api_key=KEY)
        assert "is busy" in _refused(engine, stub, model="busy", api_key=KEY)
        assert "not a server address" in _refused(engine, stub, url="gpu-box", model="m")
        assert "no CA file" in _refused(engine, stub, model="m", ca_file="/no/such/ca.pem")
    assert engine.settings.embedder == DEFAULT_EMBEDDER
    assert engine.status().embedder_job is None and engine.status().embed_server is None
    assert not (engine.paths.config / "embeddings-server.key").exists()


def test_the_server_down_with_its_index_in_force_is_a_clear_error(engine: Engine) -> None:
    with model_server_stub() as stub:
        engine.embed_servers.choose(url=stub.url, model="stub-embed", timeout_s=2)
        assert _switch_done(engine).state == "done"
    # The stub is gone: a question says so, quickly, and the index is kept.
    with pytest.raises(EmbeddingServerError, match="cannot reach the embeddings server"):
        engine.retrieve(question="which birds hunt at night", k=1)
    assert engine.store.meta is not None and engine.store.meta.dimension == EMBED_DIM
    # An engine starting meanwhile warms up without it: the model's load is not
    # skipped, nor is its failure reported as the model's.
    again = Engine(paths=engine.paths, warm_up=True, watch=False)
    try:
        assert again._warming is not None
        again._warming.join(timeout=60)
        assert again.models.error() is None
        assert again.status().embed_server is not None
    finally:
        again.close()
