"""An embeddings server as the collection's embedder: an OpenAI-compatible
`/v1/embeddings` endpoint (vLLM `--task embed`, Ollama, Hugging Face TEI, llama.cpp's
server `--embedding`) embeds passages and questions alike.

It stands where a local `Embedder` does (engine/rag/ingest/embedder.py): the switch
re-embeds the collection with it, the index keeps its id and dimension, questions are
embedded by it while its index is in force. Its id names the server and the model
(`server:MODEL@URL`), so the index records where its vectors came from and a
different server or model is a different embedder. The dimension is the server's:
read from the answer to one short request when it is chosen, and every later answer
is checked against it.

Chunks are still cut on this machine, by the bundled MiniLM's tokenizer (the server's
own is not at hand): 200 of its word pieces are well under the 512 tokens the usual
embedding models read. The HTTP client, its TLS and key handling and the messages
for a refusal are the model server's (engine/rag/answer/server_client.py).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from engine.errors import EmbedderError
from engine.rag.answer.semantic_scale import SemanticScale, measure_scale
from engine.rag.answer.server_client import (
    ModelServerError,
    ServerEndpoint,
    auth_headers,
    connection_error,
    http_client,
    status_error,
)
from engine.rag.ingest.embedder import (
    DEFAULT_BATCH,
    DEFAULT_EMBEDDER,
    EmbedderInfo,
    locate_embedder,
    task_prefixes,
)
from engine.rag.ingest.gguf_embedder import NOMIC_PROMPTS
from engine.rag.ingest.server_embedder_id import EmbedServerRef

ROLE = "embeddings server"
HINT = (
    "Nothing in the index is lost and the index in force keeps its vectors: try "
    "again when the server answers, or choose another embedder (Model menu; "
    "`ragdoll embedder NAME`)."
)
# Sent once when the server is chosen, to read its vectors' dimension.
PROBE_TEXT = "dimension"
# What the server reads of one text is its own limit; this bounds the local
# tokenizer's counts (the chunker's 200 word pieces stay well under it).
MAX_TOKENS = 512


class EmbeddingServerError(ModelServerError, EmbedderError):
    """The embeddings server could not be used; the message says why and what to do."""


class ServerEmbedder:
    """Embeds on the server, `batch` texts a request. Thread-safe: httpx's client
    serves several threads, so a question is never queued behind an ingestion batch
    here (the server orders them)."""

    backend = "server"
    ingest_backend = "server"
    device = "server"
    int8_making = None

    def __init__(self, *, endpoint: ServerEndpoint, batch: int) -> None:
        """Asks the server once (`PROBE_TEXT`) for its dimension. Raises
        EmbeddingServerError when it cannot be used."""
        if not endpoint.model:
            raise EmbeddingServerError("name the model the embeddings server should use")
        if batch < 1:
            raise ValueError("the batch must hold at least one text")
        self.endpoint = endpoint
        self.batch = batch
        # Servers embed the text as sent: a model trained with task prefixes gets them
        # here, known by its name (E5's in task_prefixes, nomic-embed-text's).
        prompts = NOMIC_PROMPTS if "nomic-embed" in endpoint.model.lower() else {}
        self.query_prefix, self.document_prefix = task_prefixes(
            model=endpoint.model, prompts=prompts
        )
        self._http = http_client(endpoint=endpoint)
        self._dimension: int | None = None
        self._tokenizer: Any = None
        self._tokenizer_lock = threading.Lock()
        self._scale_lock = threading.Lock()
        self._scale: SemanticScale | None = None
        try:
            first = self._request([PROBE_TEXT])
        except EmbeddingServerError:
            self._http.close()  # its connections go with the refusal
            raise
        ref = EmbedServerRef(url=endpoint.url, model=endpoint.model)
        self.info = EmbedderInfo(id=ref.id, dimension=first.shape[1], max_tokens=MAX_TOKENS)

    def embed(
        self, texts: list[str], *, batch_size: int = DEFAULT_BATCH, background: bool = False
    ) -> np.ndarray:
        """L2-normalised float32 rows, one per text, `self.batch` texts a request
        (the setting, not `batch_size`: that one is sized for a local model's
        memory). `background`: the texts are documents (their task prefix, where the
        model has one), else questions."""
        del batch_size
        if not texts:
            return np.zeros((0, self.info.dimension), dtype=np.float32)
        prefix = self.document_prefix if background else self.query_prefix
        sent = [prefix + text for text in texts] if prefix else list(texts)
        parts = [
            self._request(sent[start : start + self.batch])
            for start in range(0, len(sent), self.batch)
        ]
        return np.concatenate(parts)

    def close(self) -> None:
        self._http.close()

    @property
    def tokenizer(self) -> Any:
        """The bundled MiniLM's tokenizer: what chunks are cut by here."""
        with self._tokenizer_lock:
            if self._tokenizer is None:
                from transformers import AutoTokenizer

                try:
                    location = locate_embedder(DEFAULT_EMBEDDER)
                    self._tokenizer = AutoTokenizer.from_pretrained(location)
                except (OSError, ValueError) as e:
                    raise EmbedderError(f"the bundled tokenizer could not be read: {e}") from e
            return self._tokenizer

    def piece_counts(self, texts: list[str]) -> list[int]:
        """Each text's length in the local tokenizer's word pieces (sorting only)."""
        tokenizer = self.tokenizer
        with self._tokenizer_lock:  # a fast tokenizer is not for two threads
            ids = tokenizer(texts, truncation=True, max_length=MAX_TOKENS, verbose=False)
        return [len(p) for p in ids["input_ids"]]

    def semantic_scale(self) -> SemanticScale:
        """This model's cosines on the bundled MiniLM's scale (measured once)."""
        with self._scale_lock:
            if self._scale is None:
                self._scale = measure_scale(self.embed)
            return self._scale

    def ordinary_word(self, word: str) -> bool:
        """No vocabulary here to tell ordinary words by (engine/rag/answer/refusal.py)."""
        del word
        return False

    def _request(self, texts: Sequence[str]) -> np.ndarray:
        endpoint = self.endpoint
        body = {"model": endpoint.model, "input": list(texts), "encoding_format": "float"}
        try:
            response = self._http.post(
                f"{endpoint.base}/embeddings", json=body, headers=auth_headers(endpoint)
            )
        except httpx.TimeoutException as e:
            raise self._timeout(e) from None
        except httpx.HTTPError as e:
            raise connection_error(
                endpoint=endpoint, error=e, role=ROLE, hint=HINT, raised=EmbeddingServerError
            ) from None
        if response.status_code != 200:
            raise status_error(
                endpoint=endpoint,
                response=response,
                role=ROLE,
                hint=HINT,
                error=EmbeddingServerError,
            )
        return self._vectors(response=response, count=len(texts))

    def _vectors(self, *, response: httpx.Response, count: int) -> np.ndarray:
        at = f"the {ROLE} at {self.endpoint.url}"
        try:
            data = response.json()["data"]
            rows = sorted(data, key=lambda row: int(row.get("index", 0)))
            vectors = np.stack([_pooled(row["embedding"]) for row in rows]) if rows else np.zeros(0)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise EmbeddingServerError(
                f"{at} did not answer as an OpenAI-compatible embeddings endpoint "
                f"({type(e).__name__}). {HINT}"
            ) from None
        if vectors.ndim != 2 or vectors.shape[0] != count or vectors.shape[1] == 0:
            raise EmbeddingServerError(
                f"{at} sent {vectors.shape[0] if vectors.ndim else 0} vectors for "
                f"{count} texts. {HINT}"
            )
        if self._dimension is None:
            self._dimension = int(vectors.shape[1])
        elif vectors.shape[1] != self._dimension:
            raise EmbeddingServerError(
                f"{at} sent {vectors.shape[1]}-dimensional vectors where it first sent "
                f"{self._dimension}-dimensional ones (was its model changed?). {HINT}"
            )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        # Ollama and some TEI models send raw vectors; the index compares unit ones.
        return np.asarray(vectors / np.maximum(norms, 1e-12), dtype=np.float32)

    def _timeout(self, error: httpx.TimeoutException) -> EmbeddingServerError:
        t = self.endpoint.timeouts
        at = f"the {ROLE} at {self.endpoint.url}"
        if isinstance(error, httpx.ConnectTimeout):
            what = f"{at} did not accept a connection within {t.connect_s:g} s"
        else:
            what = f"{at} sent no vectors within {t.idle_s:g} s (a batch too large for it?)"
        return EmbeddingServerError(f"{what}. {HINT}")


def _pooled(embedding: Any) -> np.ndarray:
    """One text's vector. llama-cpp-python's server sends one vector per token for a
    model it does not pool (a decoder's GGUF): their mean, as a mean-pooling model does."""
    vector = np.asarray(embedding, dtype=np.float32)
    return vector.mean(axis=0) if vector.ndim == 2 else vector
