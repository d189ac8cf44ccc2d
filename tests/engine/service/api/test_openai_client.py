"""The official `openai` client, unchanged, against a real engine process."""

from __future__ import annotations

import base64

import numpy as np
import openai
import pytest

from engine.service.api.openai_routes import EXTRACTIVE_MODEL_ID
from tests.support.engine import RunningEngine


def _client(engine: RunningEngine) -> openai.OpenAI:
    endpoint = engine.client.endpoint
    return openai.OpenAI(base_url=f"{endpoint.base_url}/v1", api_key=endpoint.token, max_retries=0)


def test_streams_a_chat_with_citations(api_engine: RunningEngine) -> None:
    client = _client(api_engine)
    stream = client.chat.completions.create(
        model=EXTRACTIVE_MODEL_ID,
        messages=[
            {"role": "system", "content": "Answer from my notes."},
            {"role": "user", "content": "How much is the garden budget?"},
        ],
        stream=True,
    )
    chunks = list(stream)
    citations = [c.citations for c in chunks if getattr(c, "citations", None)]
    assert len(citations) == 1  # sent once, on the first chunk
    first = citations[0][0]
    assert first["path"].endswith("garden.txt")
    assert first["index"] == 1 and first["chunk_id"]
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert "4,200" in text
    assert chunks[-1].choices[0].finish_reason == "stop"
    # No model: the note the window shows says so, on the finishing chunk only.
    notes = [getattr(c, "note", None) for c in chunks]
    assert notes[-1] and "No language model" in notes[-1] and not any(notes[:-1])
    assert {c.id for c in chunks} == {chunks[0].id}
    # A citation leads to the passage through the engine's source endpoint.
    source = api_engine.client.source(chunk_id=first["chunk_id"])
    assert "4,200" in source.page_text[source.char_start : source.char_end]


def test_whole_answer_carries_citations(api_engine: RunningEngine) -> None:
    completion = _client(api_engine).chat.completions.create(
        model="any-name-is-accepted",
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "When is honey extracted?"}]}
        ],
    )
    assert completion.model == EXTRACTIVE_MODEL_ID  # what answered, not what was asked
    assert "August" in (completion.choices[0].message.content or "")
    assert completion.citations[0]["path"].endswith("bees.md")  # type: ignore[attr-defined]
    assert "No language model" in completion.note  # type: ignore[attr-defined]


def test_unanswerable_question_says_so_without_citations(api_engine: RunningEngine) -> None:
    completion = _client(api_engine).chat.completions.create(
        model=EXTRACTIVE_MODEL_ID,
        messages=[{"role": "user", "content": "What is the airspeed of a swallow over Jupiter?"}],
    )
    assert completion.citations == []  # type: ignore[attr-defined]
    assert "Not found in your documents" in (completion.choices[0].message.content or "")


def test_retrieval_off_needs_a_model(api_engine: RunningEngine) -> None:
    with pytest.raises(openai.BadRequestError, match="no language model"):
        _client(api_engine).chat.completions.create(
            model=EXTRACTIVE_MODEL_ID,
            messages=[{"role": "user", "content": "Hello"}],
            extra_body={"ragdoll": {"retrieval": False}},
        )


def test_invalid_request_is_an_openai_error(api_engine: RunningEngine) -> None:
    with pytest.raises(openai.BadRequestError, match="messages"):
        _client(api_engine).chat.completions.create(model=EXTRACTIVE_MODEL_ID, messages=[])


def test_lists_models(api_engine: RunningEngine) -> None:
    client = _client(api_engine)
    ids = [m.id for m in client.models.list()]
    assert ids[0] == EXTRACTIVE_MODEL_ID
    assert "all-MiniLM-L6-v2" in ids
    assert client.models.retrieve(EXTRACTIVE_MODEL_ID).id == EXTRACTIVE_MODEL_ID
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4")


def test_embeddings_as_floats_and_base64(api_engine: RunningEngine) -> None:
    client = _client(api_engine)
    single = client.embeddings.create(model="all-MiniLM-L6-v2", input="raised beds")
    long = client.embeddings.create(model="all-MiniLM-L6-v2", input="raised beds " * 2000)
    assert len(long.data[0].embedding) == 384
    assert len(single.data) == 1 and len(single.data[0].embedding) == 384
    assert single.usage.prompt_tokens > 0
    many = client.embeddings.create(
        model="all-MiniLM-L6-v2", input=["raised beds", "honey"], encoding_format="base64"
    )
    assert [d.index for d in many.data] == [0, 1]
    raw = many.data[0].embedding
    # The client leaves base64 as sent when it is asked for explicitly.
    vector = np.frombuffer(base64.b64decode(raw), dtype="<f4") if isinstance(raw, str) else raw
    assert np.allclose(vector, single.data[0].embedding, atol=1e-5)
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-3


def test_the_wrong_token_is_refused(api_engine: RunningEngine) -> None:
    endpoint = api_engine.client.endpoint
    client = openai.OpenAI(base_url=f"{endpoint.base_url}/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        client.models.list()
