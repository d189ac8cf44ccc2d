"""The language model as a reranker: query likelihood over the top candidates, on a
stand-in scorer (the logic), then a random-weight Llama through the loading code users
run."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from engine.paths import resolve_paths
from engine.rag.answer.generative import GenerativeAnswerer
from engine.rag.answer.in_use import open_model
from engine.rag.answer.model_ranker import MODEL_CANDIDATES, PROMPT, ModelRanker
from engine.runtime.models.synthetic import write_random_model
from engine.service.core import Engine
from tests.engine.rag.answer.test_reranker import hit

QUESTION = "How does git bisect find the bad commit?"


class Scorer:
    """Scores a context by how many times it says "bisect"; keeps what it was asked."""

    name = "stand-in"
    device = "cpu"

    def __init__(self) -> None:
        self.asked: list[tuple[list[str], str]] = []

    def continuation_logprobs(self, *, contexts: Sequence[str], continuation: str) -> list[float]:
        self.asked.append((list(contexts), continuation))
        return [float(c.count("bisect")) - 10.0 for c in contexts]


def test_the_likeliest_candidate_moves_up_and_the_unread_ones_follow_in_order() -> None:
    hits = [hit(i) for i in range(8)]
    hits[2] = hit(2, "git bisect halves the range; bisect marks each commit good or bad.")
    scorer = Scorer()
    ranker = ModelRanker(answerer=scorer, candidates=5, rank_weight=0.3)
    out = ranker.rerank(question=QUESTION, hits=hits, k=7)
    order = [h.chunk.ordinal for h in out]
    assert order[0] == 2  # third by retrieval, first by the model: first blended
    assert sorted(order[:5]) == [0, 1, 2, 3, 4]  # the read ones, re-ordered
    assert order[5:] == [5, 6]  # the unread ones after, as retrieval had them, cut to k
    ((contexts, continuation),) = scorer.asked
    assert len(contexts) == 5  # one pass over the candidates only
    assert continuation == " " + QUESTION
    assert contexts[2] == PROMPT.format(passage=hits[2].chunk.text)
    assert ranker.info.id == "model:stand-in"


def test_a_long_passage_is_read_through_its_focus() -> None:
    filler = " ".join(f"Filler sentence number {i} says nothing." for i in range(40))
    text = f"{filler} The bisect command finds the commit that broke the build. {filler}"
    scorer = Scorer()
    ModelRanker(answerer=scorer, focus_words=20).rerank(question=QUESTION, hits=[hit(0, text)], k=1)
    (((context,), _),) = scorer.asked
    assert "The bisect command finds the commit that broke the build." in context
    assert len(context.split()) < 20 + len(PROMPT.split())


def test_a_failing_pass_leaves_retrieval_s_order(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(Scorer):
        def continuation_logprobs(
            self, *, contexts: Sequence[str], continuation: str
        ) -> list[float]:
            raise RuntimeError("out of memory")

    hits = [hit(i) for i in range(6)]
    out = ModelRanker(answerer=Broken(), candidates=4).rerank(question=QUESTION, hits=hits, k=5)
    assert [h.chunk.ordinal for h in out] == [0, 1, 2, 3, 4]
    assert "could not rank" in caplog.text


def test_an_empty_question_scores_nothing() -> None:
    scorer = Scorer()
    ranker = ModelRanker(answerer=scorer)
    assert ranker.scores(question="  ", texts=["a", "b"]).tolist() == [0.0, 0.0]
    assert scorer.asked == []


def test_a_random_weight_llama_ranks_through_the_users_loading_code(tmp_path: Path) -> None:
    folder = write_random_model(folder=tmp_path / "llama", hidden_size=32, num_layers=2)
    answerer = open_model(model_path=folder, device="cpu").answerer
    ranker = ModelRanker(answerer=answerer, candidates=4)
    texts = [
        "The honey is extracted in late August.",
        "Bees swarm in spring when the colony grows.",
        "A queen lays up to two thousand eggs a day.",
        "Smoke calms the bees before the hive is opened.",
    ]
    hits = [hit(i, t) for i, t in enumerate(texts)]
    scores = ranker.scores(question="When is the honey extracted?", texts=texts)
    assert scores.shape == (4,) and np.isfinite(scores).all() and (scores < 0).all()
    # The same pass row by row: padding the batch changes nothing.
    alone = [ranker.scores(question="When is the honey extracted?", texts=[t])[0] for t in texts]
    assert np.allclose(scores, alone, atol=1e-3)
    out = ranker.rerank(question="When is the honey extracted?", hits=hits, k=4)
    assert sorted(h.chunk.ordinal for h in out) == [0, 1, 2, 3]


def bee_notes(folder: Path) -> Path:
    """A folder with one Markdown note of two sections (a few chunks to rank)."""
    folder.mkdir(parents=True)
    (folder / "bees.md").write_text(
        "# Apiary\n\nThe hives are inspected every Saturday morning. The honey is "
        "extracted in late August and stored in the cellar.\n\n## Swarms\n\n"
        "Swarms leave the hive in May. A swarm is caught in an empty box.\n"
    )
    return folder


def test_the_engine_ranks_with_the_model_in_use_when_the_settings_say_model(
    ragdoll_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = bee_notes(tmp_path / "notes")
    paths = resolve_paths().ensure()
    paths.settings_file.write_text(json.dumps({"reranker": "model"}))
    calls: list[int] = []
    scored = GenerativeAnswerer.continuation_logprobs

    def counted(
        self: GenerativeAnswerer, *, contexts: Sequence[str], continuation: str
    ) -> list[float]:
        calls.append(len(contexts))
        return scored(self, contexts=contexts, continuation=continuation)

    monkeypatch.setattr(GenerativeAnswerer, "continuation_logprobs", counted)
    engine = Engine(paths=paths, warm_up=False)
    try:
        job = engine.start_ingest(paths=[str(notes)])
        deadline = time.monotonic() + 120
        while job.snapshot().state not in ("done", "failed") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert job.snapshot().state == "done"
        # No model yet: the setting asks for nothing, extractive answers as before.
        assert engine.reranker() is None
        events = list(engine.ask_stream(question="When is the honey extracted?"))
        assert events[-1].done.mode == "extractive" and calls == []

        model = write_random_model(folder=tmp_path / "llama", hidden_size=32, num_layers=2)
        engine.models.set_model(model=str(model))
        assert isinstance(engine.reranker(), ModelRanker)
        events = list(engine.ask_stream(question="When is the honey extracted?"))
        assert events[-1].done.mode == "generative"
        assert len(calls) == 1 and 1 <= calls[0] <= MODEL_CANDIDATES  # one batched pass
    finally:
        engine.close()
