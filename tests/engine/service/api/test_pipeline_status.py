"""GET /v1/status over real HTTP carries the pipelines: queues, batches, the placement,
and each answered request with its priority and latency breakdown."""

from __future__ import annotations

import time

import openai

from engine.service.api.openai_routes import EXTRACTIVE_MODEL_ID
from tests.support.engine import RunningEngine


def test_status_shows_the_pipelines_after_questions(api_engine: RunningEngine) -> None:
    client = api_engine.client
    started = time.time()
    answer = client.ask(question="How much is the garden budget?", priority="background")
    assert "4,200" in answer.answer
    assert client.ask(question="When is the honey extracted?").mode == "extractive"
    endpoint = client.endpoint
    chat = openai.OpenAI(
        base_url=f"{endpoint.base_url}/v1", api_key=endpoint.token, max_retries=0
    ).chat.completions.create(
        model=EXTRACTIVE_MODEL_ID,
        messages=[{"role": "user", "content": "Where is the honey stored?"}],
    )
    assert "cellar" in (chat.choices[0].message.content or "")

    info = client.status().pipeline
    assert info is not None
    assert info.submitted >= 3 and info.finished == info.submitted
    assert info.placement.startswith("extractive") and info.placement_batch is None
    assert info.retrieval.batches >= 3 and info.retrieval.queue_length == 0
    assert info.retrieval.cap >= 1 and info.generation.cap >= 1
    mine = [r for r in info.requests if r.finished >= started]
    # The chat a person watches is interactive; /v1/ask may say background; API
    # clients (the OpenAI-compatible route) are background.
    assert [r.priority for r in mine[-3:]] == ["background", "interactive", "background"]
    for r in mine[-3:]:
        assert r.status == "done" and r.tokens == 0
        assert r.latency_s >= r.retrieval_s + r.generation_s
        assert r.waiting_s >= 0 and r.ttft_s is not None
        assert started - 1 <= r.finished <= time.time() + 1  # epoch seconds
    workers = {b.worker for b in info.batches}
    assert workers == {"retrieval", "generation"}
    assert all(b.size >= 1 and b.started >= started - 60 for b in info.batches)
