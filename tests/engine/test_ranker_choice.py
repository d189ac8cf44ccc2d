"""Choosing what re-orders each question's candidates: none, the language model in use,
or a cross-encoder (a real architecture with random weights, written locally), through
`ragdoll reranker` and the engine's HTTP API, as a person would."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import EngineRequestError
from engine.runtime.models.synthetic import write_random_model
from engine.service.ranker_choice import setting_of
from tests.engine.rag.answer.test_model_ranker import bee_notes
from tests.engine.rag.answer.test_reranker import write_random_cross_encoder
from tests.support.engine import RunningEngine


def test_what_a_choice_means(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert setting_of(None) is None
    assert setting_of("") is None
    assert setting_of(" None ") is None
    assert setting_of("off") is None
    assert setting_of("Model") == "model"
    assert setting_of("cross-encoder/ms-marco-MiniLM-L-6-v2") == (
        "cross-encoder/ms-marco-MiniLM-L-6-v2"
    )
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "ce").mkdir()
    assert setting_of("~/ce") == str((tmp_path / "ce").resolve())


def test_choose_the_model_a_cross_encoder_or_none(engine: RunningEngine, tmp_path: Path) -> None:
    assert engine.ingest(bee_notes(tmp_path / "notes")).state == "done"
    shown = engine.ragdoll("reranker")
    assert shown.returncode == 0 and "none" in shown.stdout

    # "model" without a model: saved, and extractive answers go on unranked.
    chosen = engine.ragdoll("reranker", "model")
    assert chosen.returncode == 0, chosen.stderr
    assert "none chosen" in chosen.stdout
    assert engine.client.settings().reranker == "model"
    assert engine.client.ask(question="When is the honey extracted?").mode == "extractive"

    model = write_random_model(folder=tmp_path / "llama", hidden_size=32, num_layers=2)
    assert engine.ragdoll("model", str(model)).returncode == 0
    answer = engine.client.ask(question="When is the honey extracted?")
    assert answer.mode == "generative" and answer.citations
    assert str(model) in engine.ragdoll("reranker").stdout

    # A cross-encoder that does not load is refused, and the choice before stands.
    broken = tmp_path / "not-a-cross-encoder"
    broken.mkdir()
    refused = engine.ragdoll("reranker", str(broken))
    assert refused.returncode != 0 and "could not load the reranker" in refused.stderr
    with pytest.raises(EngineRequestError) as error:
        engine.client.set_reranker(reranker=str(broken))
    assert error.value.status == 400
    assert engine.client.settings().reranker == "model"

    cross = write_random_cross_encoder(tmp_path / "tiny-ce")
    assert engine.ragdoll("reranker", str(cross)).returncode == 0
    assert engine.client.settings().reranker == str(cross.resolve())
    answer = engine.client.ask(question="When is the honey extracted?")
    assert answer.citations  # ranked by the cross-encoder now

    assert engine.ragdoll("reranker", "none").returncode == 0
    assert engine.client.settings().reranker is None
    assert engine.client.ask(question="When is the honey extracted?").citations
