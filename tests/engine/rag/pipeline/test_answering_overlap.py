"""The relevance gate read while a language model (random weights) already works on
the question, as the engine's pipelines run it (engine/rag/pipeline/serving.py): a
refusal is the one the gate gives without the early start and leaves no answer KV
in the prefix cache; an answer is the one the model gives without it."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from engine.rag.answer.generative import GenerativeAnswerer
from engine.rag.answer.in_use import open_model
from engine.rag.pipeline.answer_stream import answer_events
from engine.rag.pipeline.answering import (
    NOT_FOUND_ANSWER,
    RelevanceGate,
    Searched,
    gated_generate_batch,
    may_pass,
    settled,
)
from engine.rag.pipeline.policies import Scheduling
from engine.rag.pipeline.requests import Question
from engine.rag.pipeline.stages import DONE, GenerationJob, Stages
from engine.rag.pipeline.workers import Pipeline
from engine.runtime.models.synthetic import write_random_model
from engine.wire import CitationsEvent, DoneEvent, TokenEvent
from tests.engine.rag.pipeline.test_answering import FakeStore, embed

QUESTION = "How is the air filter cleaned?"
ANSWER_TOKENS = 40  # more than two of the prefix cache's blocks past the prompt
WAIT_S = 60.0


@pytest.fixture(scope="module")
def answerer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GenerativeAnswerer]:
    folder = write_random_model(
        folder=tmp_path_factory.mktemp("m") / "llama", hidden_size=32, num_layers=2
    )
    model = open_model(model_path=folder, device="cpu", stop_at_eos=False).answerer
    yield model
    model.close()


class Overlap:
    """The gate's verdict given only once the model has written the whole answer
    (the latest a verdict can come): notes what the model started from."""

    def __init__(self, *, gate: RelevanceGate, generate: Any, wait: bool) -> None:
        self.gate = gate
        self._generate = generate
        self.wait = wait
        self.answered = threading.Event()
        self.started_from: list[object] = []

    def judge(self, question: Question, searched: object) -> object:
        if self.wait:
            assert self.answered.wait(WAIT_S)
        return self.gate.judge(question, searched)

    def generate(
        self, jobs: Sequence[GenerationJob], incoming: Any = None
    ) -> Iterator[tuple[str, object]]:
        self.started_from.extend(j.hits for j in jobs)
        for request_id, piece in self._generate(jobs, incoming=incoming):
            if piece is DONE:
                self.answered.set()
            yield request_id, piece


def ask(answerer: GenerativeAnswerer, *, min_score: float, early: bool) -> tuple[list, Overlap]:
    gate = RelevanceGate(store=FakeStore(), embed=embed, min_score=min_score)  # type: ignore[arg-type]
    run = Overlap(
        gate=gate,
        generate=gated_generate_batch(answerer=answerer, model_lock=threading.Lock()),
        wait=early,
    )
    pipe = Pipeline(
        stages=Stages(
            retrieve=gate.search,
            generate=run.generate,
            judge=run.judge,
            speculate=may_pass if early else None,
            settled=settled,
        ),
        scheduling=Scheduling(
            join_running_batch=True,
        ),
        model_name="tiny",
    )
    try:
        handle = pipe.submit(question=QUESTION, k=2, max_new_tokens=ANSWER_TOKENS)
        return list(answer_events(handle=handle, cancel=None)), run
    finally:
        pipe.close()


def stored_spellings(answerer: GenerativeAnswerer) -> list[tuple[int, ...]]:
    assert answerer.prefix_cache is not None
    return list(answerer.prefix_cache.priorities())


def prompt_ids(answerer: GenerativeAnswerer, searched: Searched) -> list[int]:
    request = answerer.prompt_request(
        question=QUESTION, passages=searched.passages, max_new_tokens=ANSWER_TOKENS
    )
    return list(request.prompt_ids)


def test_a_refusal_begun_early_is_the_same_refusal_and_stores_no_answer_kv(
    answerer: GenerativeAnswerer,
) -> None:
    refuse = 50.0  # no sentence scores that: the gate refuses
    assert answerer.prefix_cache is not None
    answerer.prefix_cache.clear()
    events, run = ask(answerer, min_score=refuse, early=True)
    # The model did start, from the search's hits, and wrote the whole answer.
    (searched,) = run.started_from
    assert isinstance(searched, Searched) and run.answered.is_set()
    assert not any(isinstance(e, TokenEvent) for e in events)
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.done.mode == "none"
    assert done.done.answer.startswith(NOT_FOUND_ANSWER)
    # The same events as a refusal at retrieval, where the model never starts.
    answerer.prefix_cache.clear()
    plain, plain_run = ask(answerer, min_score=refuse, early=False)
    assert plain_run.started_from == []
    assert plain == events
    assert isinstance(plain[0], CitationsEvent) and plain[0].citations == []
    # The early start's prompt KV may be kept (exact, a prefix of that prompt); no
    # answer token's KV is: every stored sequence is a start of the prompt.
    answerer.prefix_cache.clear()
    events, run = ask(answerer, min_score=refuse, early=True)
    prompt = tuple(prompt_ids(answerer, run.started_from[0]))  # type: ignore[arg-type]
    assert all(spelling == prompt[: len(spelling)] for spelling in stored_spellings(answerer))


def test_an_answer_begun_early_is_the_answer_and_keeps_its_kv(
    answerer: GenerativeAnswerer, tmp_path: Path
) -> None:
    passes = -50.0
    assert answerer.prefix_cache is not None
    answerer.prefix_cache.clear()
    early, run = ask(answerer, min_score=passes, early=True)
    (searched,) = run.started_from
    assert isinstance(searched, Searched)
    answerer.prefix_cache.clear()
    plain, plain_run = ask(answerer, min_score=passes, early=False)
    assert plain_run.started_from != [] and not isinstance(plain_run.started_from[0], Searched)
    assert early == plain
    kinds = [type(e) for e in early]
    assert kinds[0] is CitationsEvent and kinds[1] is TokenEvent and kinds[-1] is DoneEvent
    done = early[-1]
    assert isinstance(done, DoneEvent) and done.done.mode == "generative"
    assert done.done.completion_tokens == ANSWER_TOKENS
    # The answer's KV is kept for the next turn: stored past the prompt.
    prompt = prompt_ids(answerer, searched)
    assert max(len(s) for s in stored_spellings(answerer)) > len(prompt)
