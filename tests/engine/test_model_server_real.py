"""A real OpenAI-compatible server process (llama-cpp-python's, with the real
Qwen2.5-Coder-0.5B-Instruct GGUF) as the generator of a real engine: the answer
streams with its citations through the engine's API and its OpenAI-compatible API,
and a follow-up keeps the first turn as the start of its prompt, which the server's
KV cache serves (its log says how many tokens). Skipped, saying why, without the
`server-bench` extra or the model."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from bench.llama_server import llama_server, missing_server_parts
from bench.real_models import fetch_hint, find_real_model
from bench.server_proxy import timing_relay
from engine.wire import Citation, CitationsEvent, Turn, from_json_dict
from engine.wire_events import TokenEvent
from tests.support.engine import RunningEngine

NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m"
QUESTION = "When is the honey extracted?"
FEW_TOKENS = 6  # enough to see the answer stream; the server is a CPU one under load


@pytest.fixture(scope="module")
def real_model() -> Path:
    missing = missing_server_parts()
    if missing:
        pytest.skip(
            f"llama-cpp-python's server is not installed ({', '.join(missing)} missing): "
            "pip install 'ragdoll-desktop[server-bench]'"
        )
    path = find_real_model(NAME)
    if path is None:
        pytest.skip(fetch_hint(NAME))
    return path


def _first_tokens(engine: RunningEngine, **asked: object) -> tuple[list[object], str]:
    """The events up to FEW_TOKENS pieces of text, then the answer is stopped."""
    cancel = threading.Event()
    events: list[object] = []
    text = ""
    for event in engine.client.ask_stream(cancel=cancel, **asked):  # type: ignore[arg-type]
        events.append(event)
        if isinstance(event, TokenEvent):
            text += event.text
            if sum(isinstance(e, TokenEvent) for e in events) >= FEW_TOKENS:
                cancel.set()
                break
    return events, text


@pytest.mark.timeout(1200)
def test_a_real_server_writes_cited_answers_and_serves_the_follow_ups_prefix(
    real_model: Path, engine: RunningEngine, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "bees.md").write_text(
        "# Apiary\n\nThe hives are inspected every Saturday morning. The honey is "
        "extracted in late August and stored in the cellar.\n"
    )
    assert engine.ingest(notes).state == "done"
    with (
        llama_server(model=real_model, log=tmp_path / "llama.log", threads=2) as server,
        timing_relay(upstream=server.url) as relay,
    ):
        engine.client.set_model_server(url=relay.url, model=server.alias, concurrency=1)

        # The engine's own answer stream: citations first, then the server's text.
        events, first_text = _first_tokens(engine, question=QUESTION, k=2)
        citations = next(e for e in events if isinstance(e, CitationsEvent)).citations
        assert citations and citations[0].path.endswith("bees.md")
        assert events.index(next(e for e in events if isinstance(e, CitationsEvent))) < (
            events.index(next(e for e in events if isinstance(e, TokenEvent)))
        )
        assert first_text.strip()
        first = relay.requests[-1].body["messages"]
        assert "late August" in first[-1]["content"]

        # RAGDoll's OpenAI-compatible API, streamed, with max_tokens and the citations
        # (its extension field); written whole, so that the server keeps its state.
        text, cited = _openai_answer(engine, question=QUESTION)
        assert text.strip() and cited and cited[0].path.endswith("bees.md")
        assert relay.requests[-1].body["max_tokens"] == FEW_TOKENS
        first = relay.requests[-1].body["messages"]

        # A follow-up: the earlier turn as it was sent starts the prompt, and the
        # server's cache serves it (its log says how many tokens).
        turn = Turn(question=QUESTION, answer=text, citations=cited)
        hits_before = len(server.prefix_hits())
        _first_tokens(engine, question="And where is it stored?", k=2, history=[turn])
        follow = relay.requests[-1].body["messages"]
        assert [m["role"] for m in follow] == ["system", "user", "assistant", "user"]
        assert follow[:2] == first
        assert len(server.prefix_hits()) > hits_before
        served, evaluated = server.prefix_hits()[-1]
        assert served > evaluated, (served, evaluated)


def _openai_answer(engine: RunningEngine, *, question: str) -> tuple[str, list[Citation]]:
    body = {
        "model": "ragdoll",
        "messages": [{"role": "user", "content": question}],
        "stream": True,
        "max_tokens": FEW_TOKENS,
    }
    pieces: list[str] = []
    citations: list[Citation] = []
    with engine.client._http.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                chunk = json.loads(line[5:])
                if chunk.get("citations"):
                    citations = [from_json_dict(Citation, c) for c in chunk["citations"]]
                for choice in chunk.get("choices", []):
                    pieces.append((choice.get("delta") or {}).get("content") or "")
    return "".join(pieces), citations
