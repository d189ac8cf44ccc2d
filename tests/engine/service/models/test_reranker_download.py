"""A recommended reranker, the way a person gets one: listed with this machine's
verdict, downloaded from the hub (a loopback fake serving a real BERT cross-encoder
with random weights) by a real engine process started as the window starts it, then
chosen by its repo id and ranking each question's sources."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.service.client import EngineClient
from engine.service.models.reranker_catalogue import load_rerankers
from engine.wire import FINAL_STATES, ModelAdvice
from tests.engine.rag.answer.test_model_ranker import bee_notes
from tests.engine.rag.answer.test_reranker import write_random_cross_encoder
from tests.engine.service.models.fake_hub import FakeRepo, fake_hub
from tests.support.engine import running_engine


def _rerankers(client: EngineClient) -> dict[str, ModelAdvice]:
    return {m.id: m for m in client.recommended_models().models if m.role == "reranker"}


def test_download_a_recommended_reranker_then_rank_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo_id = load_rerankers()[0].id
    folder = write_random_cross_encoder(tmp_path / "weights")
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    # What RAGDoll never fetches: weights that run code when opened, other runtimes'.
    hub_files = {**files, "pytorch_model.bin": b"pickle", "onnx/model.onnx": b"onnx"}
    repo = FakeRepo(repo_id=repo_id, files=hub_files)
    with fake_hub([repo]) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        # The person's environment says nothing about offline (tests set it by default).
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("RAGDOLL_OFFLINE", raising=False)
        with running_engine(home=tmp_path / "home") as engine:
            client = engine.client
            listed = _rerankers(client)[repo_id]
            assert not listed.installed and listed.download_bytes > listed.weight_bytes
            assert listed.verdict_kind in ("ram", "gpu") and listed.seconds_per_question

            state = client.download_model(repo_id=repo_id)
            deadline = time.monotonic() + 60
            while state.state not in FINAL_STATES and time.monotonic() < deadline:
                time.sleep(0.1)
                state = client.download_progress(download_id=state.download_id)
            assert state.state == "done", state
            got = Path(state.folder)
            assert sorted(p.name for p in got.iterdir() if not p.name.startswith(".")) == sorted(
                files
            )
            installed = _rerankers(client)[repo_id]
            assert installed.installed and installed.installed_path == str(got)

            # Chosen by its repo id, as `ragdoll reranker ID` does: the download is used.
            chosen = engine.ragdoll("reranker", repo_id)
            assert chosen.returncode == 0, chosen.stderr
            assert client.settings().reranker == str(got)
            assert client.status().reranker == str(got)
            assert _rerankers(client)[repo_id].chosen

            assert engine.ingest(bee_notes(tmp_path / "notes")).state == "done"
            answer = client.ask(question="When is the honey extracted?")
            assert answer.citations
