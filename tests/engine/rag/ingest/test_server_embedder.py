"""The embeddings server as an embedder, against a real HTTP server on loopback:
texts go in batches of the setting, with the key, as OpenAI's request shape; the
dimension is the server's first answer's; rows come back in order and normalised; and
every failure (key refused, busy, broken, unknown model, silent, cut, absent, a changed
dimension) is one clear EmbeddingServerError, in bounded time, that never carries the key."""

from __future__ import annotations

import logging
import socket
import time

import numpy as np
import pytest

from engine.errors import EmbedderError
from engine.rag.answer.server_client import ServerEndpoint, ServerTimeouts
from engine.rag.ingest.server_embedder import (
    HINT,
    PROBE_TEXT,
    EmbeddingServerError,
    ServerEmbedder,
)
from tests.support.model_server_stub import EMBED_DIM, model_server_stub, word_vector

KEY = "sk-embed-1a2b3c4d5e6f"
QUICK = ServerTimeouts(connect_s=2.0, first_token_s=1.0, idle_s=1.0)


def _failure(endpoint: ServerEndpoint, *, texts: list[str] | None = None) -> str:
    with pytest.raises(EmbeddingServerError) as failed:
        embedder = ServerEmbedder(endpoint=endpoint, batch=4)
        embedder.embed(texts or ["a"], background=True)
    message = str(failed.value)
    assert KEY not in message
    return message


def test_texts_go_in_batches_with_the_key_and_come_back_in_order_normalised() -> None:
    with model_server_stub(key=KEY) as stub:
        endpoint = ServerEndpoint(url=stub.url, model="stub-embed", api_key=KEY)
        embedder = ServerEmbedder(endpoint=endpoint, batch=3)
        texts = [f"text number {i} about owls" for i in range(7)]
        vectors = embedder.embed(texts, background=True)
        embedder.close()
    assert embedder.info.dimension == EMBED_DIM
    assert embedder.info.id == f"server:stub-embed@{stub.url}"
    assert vectors.shape == (7, EMBED_DIM) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    expected = np.asarray(word_vector(texts[5]), dtype=np.float32)
    assert np.allclose(vectors[5], expected / np.linalg.norm(expected))  # order kept
    sent = stub.state.embed_requests
    assert sent[0]["input"] == [PROBE_TEXT]  # the dimension, asked once
    assert [len(r["input"]) for r in sent[1:]] == [3, 3, 1]
    assert all(r["model"] == "stub-embed" and r["encoding_format"] == "float" for r in sent)
    assert KEY not in repr(endpoint)


def test_questions_and_passages_get_the_models_task_prefixes() -> None:
    with model_server_stub() as stub:
        plain = ServerEmbedder(endpoint=ServerEndpoint(url=stub.url, model="stub-embed"), batch=8)
        plain.embed(["which owls"])
        assert stub.state.embed_requests[-1]["input"] == ["which owls"]
        # An E5 model served under its own name gets its prefixes, as it does locally.
        endpoint = ServerEndpoint(url=stub.url, model="multilingual-e5-small")
        e5 = ServerEmbedder(endpoint=endpoint, batch=8)
        e5.embed(["which owls"])
        e5.embed(["Owls hunt."], background=True)
    assert [r["input"] for r in stub.state.embed_requests[-2:]] == [
        ["query: which owls"],
        ["passage: Owls hunt."],
    ]
    with model_server_stub() as stub:
        endpoint = ServerEndpoint(url=stub.url, model="nomic-embed-text:latest")
        nomic = ServerEmbedder(endpoint=endpoint, batch=8)
        nomic.embed(["which owls"])
        nomic.embed(["Owls hunt."], background=True)
    assert [r["input"] for r in stub.state.embed_requests[-2:]] == [
        ["search_query: which owls"],
        ["search_document: Owls hunt."],
    ]


@pytest.mark.parametrize(
    ("model", "key", "says"),
    [
        ("stub-embed", "sk-wrong", "refused the API key (401)"),
        ("busy", KEY, "is busy"),
        ("broken", KEY, "error of its own (500): CUDA out of memory"),
        ("no-such-model", KEY, "has no model 'no-such-model'"),
    ],
)
def test_refusals_say_what_happened(model: str, key: str, says: str) -> None:
    with model_server_stub(key=KEY) as stub:
        message = _failure(ServerEndpoint(url=stub.url, model=model, api_key=key))
    assert message.startswith("the embeddings server at")
    assert says in message and HINT in message


def test_a_stalled_reply_ends_within_the_timeout() -> None:
    with model_server_stub() as stub:
        started = time.monotonic()
        message = _failure(ServerEndpoint(url=stub.url, model="stall", timeouts=QUICK))
        assert time.monotonic() - started < 20  # the stub is silent for 30 s
    assert "sent no vectors within 1 s" in message


def test_a_dropped_connection_is_named() -> None:
    with model_server_stub() as stub:
        message = _failure(ServerEndpoint(url=stub.url, model="drop", timeouts=QUICK))
    assert "dropped" in message or "cannot reach" in message


def test_a_server_that_is_not_running() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    message = _failure(ServerEndpoint(url=f"http://127.0.0.1:{port}", model="m", timeouts=QUICK))
    assert "cannot reach the embeddings server" in message


def test_a_changed_dimension_is_refused_not_stored() -> None:
    with model_server_stub() as stub:
        embedder = ServerEmbedder(endpoint=ServerEndpoint(url=stub.url, model="shifty"), batch=4)
        assert embedder.info.dimension == EMBED_DIM
        with pytest.raises(EmbeddingServerError, match="65-dimensional vectors where it first"):
            embedder.embed(["owls"], background=True)


def test_the_error_is_an_embedder_error_and_the_key_is_never_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with model_server_stub(key=KEY) as stub:
        ServerEmbedder(
            endpoint=ServerEndpoint(url=stub.url, model="stub-embed", api_key=KEY), batch=2
        )
        with pytest.raises(EmbedderError):
            ServerEmbedder(
                endpoint=ServerEndpoint(url=stub.url, model="broken", api_key=KEY), batch=2
            )
    assert KEY not in caplog.text


def test_one_vector_per_token_is_mean_pooled() -> None:
    with model_server_stub() as stub:
        embedder = ServerEmbedder(endpoint=ServerEndpoint(url=stub.url, model="per-token"), batch=4)
        vectors = embedder.embed(["owls hunt", "owls"], background=True)
    expected = np.asarray(word_vector("owls hunt"), dtype=np.float32)  # the words' sum
    assert vectors.shape == (2, EMBED_DIM)
    assert np.allclose(vectors[0], expected / np.linalg.norm(expected))


def test_chunks_are_cut_by_the_bundled_tokenizer() -> None:
    with model_server_stub() as stub:
        embedder = ServerEmbedder(
            endpoint=ServerEndpoint(url=stub.url, model="stub-embed"), batch=4
        )
        counts = embedder.piece_counts(["owls", "owls hunt at night in the forest"])
    assert counts[0] < counts[1]
    assert embedder.tokenizer("owls", return_offsets_mapping=True)["offset_mapping"]
