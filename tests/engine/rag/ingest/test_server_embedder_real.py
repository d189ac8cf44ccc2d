"""A real embeddings server process: llama-cpp-python's server (`--embedding true`)
with the real SmolLM2-135M-Instruct GGUF, the smallest real model here. A decoder's
pooled states are poor for retrieval, but they prove the wire: the dimension read
from its first answer, batches, and a real engine re-embedding real files into LanceDB
with it, then embedding a question. Skipped, saying why, without the `server-bench`
extra or the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from bench.llama_server import LlamaServer, llama_server, missing_server_parts
from bench.real_models import fetch_hint, find_real_model
from engine.paths import resolve_paths
from engine.rag.answer.server_client import ServerEndpoint
from engine.rag.ingest.server_embedder import ServerEmbedder
from engine.service.core import Engine
from tests.support.waiting import wait_until

NAME = "smollm2-135m-instruct-q4_1"
HIDDEN = 576  # SmolLM2-135M's hidden size: what its server's vectors hold


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    missing = missing_server_parts()
    if missing:
        pytest.skip(
            f"llama-cpp-python's server is not installed ({', '.join(missing)} missing): "
            "pip install 'ragdoll-desktop[server-bench]'"
        )
    model = find_real_model(NAME)
    if model is None:
        pytest.skip(fetch_hint(NAME))
    log = tmp_path_factory.mktemp("llama") / "llama.log"
    with llama_server(
        model=model, log=log, alias="smollm2", context=1024, threads=2, embedding=True
    ) as running:
        yield running


@pytest.mark.timeout(600)
def test_a_real_server_embeds_in_batches_with_its_own_dimension(server: LlamaServer) -> None:
    embedder = ServerEmbedder(endpoint=ServerEndpoint(url=server.url, model=server.alias), batch=2)
    try:
        vectors = embedder.embed(
            ["Owls hunt at night.", "Ferns grow in shade.", "Canals have locks."],
            background=True,
        )
        question = embedder.embed(["which birds hunt at night"])
    finally:
        embedder.close()
    assert embedder.info.dimension == HIDDEN
    assert vectors.shape == (3, HIDDEN) and question.shape == (1, HIDDEN)
    assert np.all(np.isfinite(vectors)) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert not np.allclose(vectors[0], vectors[1])


@pytest.mark.slow  # ~15 s: the bundled embedder indexes first, then the server re-embeds
@pytest.mark.timeout(600)
def test_a_real_engine_switches_to_the_real_server(server: LlamaServer, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "birds.md").write_text("# Birds\n\nOwls hunt at night in the old forest.\n")
    (docs / "plants.txt").write_text("Ferns grow in the shade of tall trees.\n")
    engine = Engine(
        paths=resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")}),
        warm_up=False,
        watch=False,
    )
    try:
        _, job = engine.add_folder(path=str(docs))
        wait_until(lambda: job.snapshot().state == "done", timeout_s=180)
        chunks = engine.store.counts()[1]
        engine.embed_servers.choose(url=server.url, model=server.alias, batch=4)
        switch = engine.ingest.job(job_id=engine.status().embedder_job or "")
        assert switch is not None
        wait_until(lambda: switch.snapshot().state in ("done", "failed"), timeout_s=300)
        assert switch.snapshot().state == "done", switch.snapshot().message
        assert engine.store.meta is not None and engine.store.meta.dimension == HIDDEN
        assert engine.store.counts()[1] == chunks
        assert engine.status().embedder_in_force == f"server:{server.alias}@{server.url}"
        hits = engine.retrieve(question="owls at night", k=2)
        assert hits and {Path(h.chunk.path).name for h in hits} <= {"birds.md", "plants.txt"}
    finally:
        engine.close()
