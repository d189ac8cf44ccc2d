"""Synthetic chunks for benchmarks at scale, written through the real LanceStore.

Clustered unit vectors (a few thousand topics, chunks scattered around them, as
sentence embeddings cluster) and text from a made-up Zipf vocabulary, as Arrow blocks
of the chunks table's schema. `bench retrieval` builds its whole table from them;
`bench pipeline` adds them as filler beside an ingested corpus, so that its store has
the size of the paper's regime while the questions still have real answers.
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from engine.rag.store.fulltext import cut_words
from engine.rag.store.lance_store import LanceStore, chunks_schema

VOCAB = 5_000
WORDS_PER_CHUNK = 24
BLOCK = 50_000


class SyntheticChunks:
    """Clustered unit vectors: a few thousand topics, chunks scattered around them."""

    def __init__(self, *, dim: int, rows: int, seed: int) -> None:
        self.dim, self.rows = dim, rows
        self.rng = np.random.default_rng(seed)
        self.centers = self.rng.normal(size=(max(64, int(rows**0.5)), dim)).astype(np.float32)
        self.centers /= np.linalg.norm(self.centers, axis=1, keepdims=True)
        self.vocab = np.array([f"w{i:04d}" for i in range(VOCAB)])

    def vectors(self, n: int) -> np.ndarray:
        topics = self.rng.integers(0, len(self.centers), n)
        noise = self.rng.normal(scale=1.2 / self.dim**0.5, size=(n, self.dim)).astype(np.float32)
        v = self.centers[topics] + noise
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def texts(self, n: int) -> list[str]:
        words = self.vocab[self.rng.zipf(1.3, size=(n, WORDS_PER_CHUNK)) % VOCAB]
        return [" ".join(w) for w in words]

    def queries(self, n: int) -> tuple[np.ndarray, list[str]]:
        texts = [" ".join(t.split()[:6]) for t in self.texts(n)]
        return self.vectors(n), texts


def arrow_block(
    *, data: SyntheticChunks, start: int, vectors: np.ndarray, schema: pa.Schema
) -> pa.Table:
    """Rows start .. start + len(vectors) as the chunks table has them: chunk ids
    `c<row>`, 40 chunks per made-up document, four file types."""
    n = len(vectors)
    ids = range(start, start + n)
    exts = np.array([".pdf", ".md", ".txt", ".docx"])[np.arange(start, start + n) % 4]
    paths = [f"/bench/f{i % 97}/doc{i // 40}{e}" for i, e in zip(ids, exts, strict=True)]
    flat_vectors = pa.array(vectors.reshape(-1), type=pa.float32())
    texts = data.texts(n)
    return pa.table(
        {
            "chunk_id": [f"c{i}" for i in ids],
            "doc_id": [f"doc{i // 40}" for i in ids],
            "path": paths,
            "ordinal": pa.array([i % 40 for i in ids], pa.int32()),
            "page": pa.array([1 + (i % 40) // 4 for i in ids], pa.int32()),
            "char_start": pa.array([0] * n, pa.int32()),
            "char_end": pa.array([200] * n, pa.int32()),
            "text": texts,
            "text_hash": [f"h{i}" for i in ids],
            "vector": pa.FixedSizeListArray.from_arrays(flat_vectors, data.dim),
            "ext": list(exts),
            "section": [""] * n,
            "words": [cut_words(t) for t in texts],
        },
        schema=schema,
    )


def bulk_fill(*, store: LanceStore, data: SyntheticChunks, block: int = BLOCK) -> float:
    """Append `data.rows` synthetic chunks to the store's chunks table in blocks (the
    table must exist: `ensure_embedder` first). Returns the seconds spent writing."""
    schema = chunks_schema(data.dim)
    write_s, done = 0.0, 0
    while done < data.rows:
        n = min(block, data.rows - done)
        table = arrow_block(data=data, start=done, vectors=data.vectors(n), schema=schema)
        t0 = time.perf_counter()
        store.chunks.add(table)
        write_s += time.perf_counter() - t0
        done += n
    return write_s
