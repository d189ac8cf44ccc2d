"""Sentence vectors already computed, so that the relevance gate does not embed the
same sentences again.

The gate (engine/rag/pipeline/answering.py) embeds every sentence of a question's
passages to find the one that answers it; on this CPU that is most of a question's
retrieval time (0.9 of 1.0 s for two passages at load 10). A conversation's
follow-ups retrieve the passages of earlier turns again, and with a model in use that
time comes before the first token on every turn, however much of the prompt the prefix
cache serves. Vectors are kept by text for the embedder of the index in force (a
change of embedder empties the memo), least recently used dropped first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

Embed = Callable[[list[str]], np.ndarray]

DEFAULT_SIZE = 4096  # sentences: 384 floats each with MiniLM, about 6 MiB


class SentenceMemo:
    """A bounded LRU of sentence vectors, shared by the threads that embed."""

    def __init__(self, *, size: int = DEFAULT_SIZE, key: Callable[[], str] = lambda: "") -> None:
        self._size = max(0, size)
        self._key = key  # the embedder in force: vectors of another one are dropped
        self._owner = ""
        self._rows: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def embed(self, *, first: str, texts: Sequence[str], embed: Embed) -> np.ndarray:
        """`first`'s vector (never kept: a question) then each of `texts`', in one
        call to `embed` for those not kept."""
        return self._vectors(first=[first], texts=texts, embed=embed)

    def rows(self, *, texts: Sequence[str], embed: Embed) -> np.ndarray:
        """Each of `texts`' vectors, embedding only those not kept (no call when none)."""
        return self._vectors(first=[], texts=texts, embed=embed)

    def _vectors(self, *, first: list[str], texts: Sequence[str], embed: Embed) -> np.ndarray:
        key = self._key()
        with self._lock:
            if key != self._owner:
                self._rows.clear()
                self._owner = key
            known = {t: self._rows[t] for t in texts if t in self._rows}
            for t in known:
                self._rows.move_to_end(t)
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        asked = [*first, *missing]
        fresh = np.asarray(embed(asked), dtype=np.float32) if asked else None
        made = fresh[len(first) :] if fresh is not None else []
        with self._lock:
            self.hits += len(texts) - sum(t in missing for t in texts)
            self.misses += len(missing)
            if key == self._owner and self._size:
                for t, row in zip(missing, made, strict=True):
                    self._rows[t] = row
                while len(self._rows) > self._size:
                    self._rows.popitem(last=False)
        rows = dict(zip(missing, made, strict=True)) | known
        if fresh is None and not known:
            return np.empty((0, 0), dtype=np.float32)
        width = fresh.shape[1] if fresh is not None else next(iter(known.values())).shape[0]
        out = np.empty((len(first) + len(texts), width), dtype=np.float32)
        if first:
            assert fresh is not None
            out[: len(first)] = fresh[: len(first)]
        for i, t in enumerate(texts):
            out[len(first) + i] = rows[t]
        return out

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._rows)
