"""The benchmark's timing relay passes a streamed chat request through unchanged and
notes when it arrived and when its first piece of text came back."""

from __future__ import annotations

import httpx

from bench.server_proxy import timing_relay
from engine.rag.answer.server_client import ServerEndpoint, chat_stream, list_models
from tests.support.model_server_stub import ANSWER, model_server_stub

MESSAGES = [{"role": "user", "content": "When?"}]


def test_the_relay_passes_the_stream_and_times_its_first_text() -> None:
    with model_server_stub() as stub:
        stub.state.piece_delay_s = 0.05
        with timing_relay(upstream=stub.url) as relay:
            endpoint = ServerEndpoint(url=relay.url, model="stub-model")
            assert "stub-model" in [m.id for m in list_models(endpoint=endpoint)]
            text = "".join(
                d.text for d in chat_stream(endpoint=endpoint, messages=MESSAGES, max_tokens=8)
            )
    assert text == ANSWER
    (request,) = relay.requests
    assert request.body["messages"] == MESSAGES
    first = request.server_first_token_s
    assert first is not None and first >= 0.05  # the stub waits before its first piece
    assert request.ended is not None and request.ended >= request.first_text


def test_a_refusal_passes_through() -> None:
    with model_server_stub() as stub, timing_relay(upstream=stub.url) as relay:
        response = httpx.post(
            f"{relay.url}/v1/chat/completions",
            json={"model": "busy", "messages": MESSAGES, "stream": True},
        )
    assert response.status_code == 429
    assert relay.requests[0].first_text is None
