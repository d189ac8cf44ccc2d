"""The model server client against a real HTTP server on loopback: answers stream,
and every failure (key refused, busy, broken, silent, cut, absent) is one clear
ModelServerError, in bounded time, that never carries the key."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from engine.rag.answer.server_client import (
    FALLBACK_HINT,
    ModelServerError,
    ServerEndpoint,
    ServerTimeouts,
    chat_stream,
    check_url,
    list_models,
)
from tests.support.model_server_stub import ANSWER, MODELS, model_server_stub

KEY = "sk-test-9f8e7d6c5b4a"
MESSAGES = [{"role": "system", "content": "Answer."}, {"role": "user", "content": "When?"}]
QUICK = ServerTimeouts(connect_s=2.0, first_token_s=1.0, idle_s=1.0)


def _answer(endpoint: ServerEndpoint) -> str:
    return "".join(d.text for d in chat_stream(endpoint=endpoint, messages=MESSAGES, max_tokens=16))


def _failure(endpoint: ServerEndpoint) -> str:
    with pytest.raises(ModelServerError) as failed:
        _answer(endpoint)
    message = str(failed.value)
    assert KEY not in message
    return message


def test_answer_streams_with_the_key_and_the_usage_counts() -> None:
    with model_server_stub(key=KEY) as stub:
        endpoint = ServerEndpoint(url=stub.url, model="stub-model", api_key=KEY)
        assert [m.id for m in list_models(endpoint=endpoint)] == ["stub-model", *MODELS[1:]]
        deltas = list(chat_stream(endpoint=endpoint, messages=MESSAGES, max_tokens=16))
        assert "".join(d.text for d in deltas) == ANSWER
        assert deltas[-1].cached_tokens == 300 and deltas[-1].prompt_tokens == 321
        sent = stub.state.requests[0]
        assert sent["stream"] is True and sent["messages"] == MESSAGES
        assert stub.state.headers[0]["Authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(endpoint)


@pytest.mark.parametrize(
    ("model", "key", "says"),
    [
        ("stub-model", "sk-wrong", "refused the API key (401)"),
        ("busy", KEY, "is busy"),
        ("broken", KEY, "error of its own (500): CUDA out of memory"),
        ("no-such-model", KEY, "has no model 'no-such-model'"),
    ],
)
def test_refusals_say_what_happened_and_keep_the_question(model: str, key: str, says: str) -> None:
    with model_server_stub(key=KEY) as stub:
        message = _failure(ServerEndpoint(url=stub.url, model=model, api_key=key))
    assert says in message
    assert FALLBACK_HINT in message


def test_a_stalled_stream_ends_within_the_idle_timeout() -> None:
    with model_server_stub() as stub:
        started = time.monotonic()
        message = _failure(ServerEndpoint(url=stub.url, model="stall", timeouts=QUICK))
        # Bounded by the timeout, not by the stub's 30 s of silence.
        assert time.monotonic() - started < 20
    assert "stopped sending the answer for 1 s" in message


def test_a_dropped_connection_is_named() -> None:
    with model_server_stub() as stub:
        message = _failure(ServerEndpoint(url=stub.url, model="drop", timeouts=QUICK))
    assert "dropped mid-answer" in message


def test_a_server_that_is_not_running() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    message = _failure(ServerEndpoint(url=f"http://127.0.0.1:{port}", model="m", timeouts=QUICK))
    assert "cannot reach the model server" in message


def test_addresses_that_are_not_servers_are_refused() -> None:
    for url in ("", "ftp://host", "localhost:8000", "http://"):
        with pytest.raises(ModelServerError):
            check_url(url)
    assert check_url(" http://gpu-box:8000/v1 ") == "http://gpu-box:8000/v1"
    assert ServerEndpoint(url="http://h:1/v1/").base == "http://h:1/v1"
    assert ServerEndpoint(url="http://h:1").base == "http://h:1/v1"


def test_a_stopped_answer_closes_a_silent_stream_at_once() -> None:
    cancel = threading.Event()
    with model_server_stub() as stub:
        endpoint = ServerEndpoint(url=stub.url, model="stall")  # the default, long timeouts
        deltas = chat_stream(endpoint=endpoint, messages=MESSAGES, max_tokens=16, cancel=cancel)
        assert next(deltas).text  # then the server goes silent
        threading.Timer(0.3, cancel.set).start()
        started = time.monotonic()
        assert list(deltas) == []  # ends quietly: the person asked it to stop
        assert time.monotonic() - started < 10  # not the 60 s idle timeout
