"""A cross-encoder that re-orders the retrieved candidates, question and passage read together.

Retrieval fuses a bi-encoder's cosine with BM25: both score the question and each
chunk apart. A cross-encoder reads the pair in one pass, which ranks far better, at
one forward pass per candidate; so it only re-orders the top candidates retrieval
found (`RERANK_CANDIDATES`). The model is a sentence-transformers `CrossEncoder`
from a local folder or the Hugging Face cache, as the embedder is
(`engine/rag/ingest/embedder.py`): nothing is downloaded here; the Models dialog lists
recommended ones (engine/service/models/reranker_catalogue.py) and downloads one when the
user asks.

Its score is blended with the fused retrieval rank rather than replacing it: a
cross-encoder trained on web questions can be wrong on manuals, and the rank says
what both retrievers agreed on.

On a CPU its linear layers run as int8 (PyTorch dynamic quantisation): 20 candidates
of 180 word pieces took half the time of fp32 on the 2-core machine, and ONNX
Runtime in fp32 was no faster than PyTorch (docs/benchmarks-history.md, "Quality on
real documents", second round). Only the order of the scores is used, which int8's
small error barely moves.

It reads each candidate's focus, not the whole chunk: the whole sentences around
the one that shares most of the question's words, up to `FOCUS_WORDS` words. A
cross-encoder's cost grows with the pair's length (attention with its square), and
a 200-piece chunk mostly holds text about something else; the focus is the part
the extractive answer would quote from.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from engine.errors import ModelLoadError
from engine.rag.answer.content_words import content_words
from engine.rag.answer.sentences import split_sentences
from engine.rag.store.records import SearchHit
from engine.runtime.models.process_wide import one_at_a_time

RERANK_CANDIDATES = 20  # what retrieval hands the cross-encoder per question
# ms-marco-MiniLM-L-6-v2: 22.7 M parameters, about 91 MB of fp32 weights.
DEFAULT_RERANKER = "cross-encoder/ms-marco-MiniLM-L-6-v2"
_RANK_WEIGHT = 0.3  # how much the retrieval rank counts against the cross-encoder's order
# Words of a candidate the cross-encoder reads (the focus); None: the whole chunk.
# 80 words of the manuals are about 110 word pieces.
FOCUS_WORDS = 80
_MAX_TOKENS = 256  # question + passage: chunks are at most 200 word pieces
FOCUS_MAX_TOKENS = 160  # question + focus


@dataclass(frozen=True, kw_only=True)
class RerankerInfo:
    id: str
    device: str


class CandidateRanker(Protocol):
    """What the relevance gate re-orders its candidates with: this cross-encoder, or
    the loaded language model (engine/rag/answer/model_ranker.py)."""

    info: RerankerInfo
    candidates: int  # how many of retrieval's top hits it reads

    def rerank(self, *, question: str, hits: Sequence[SearchHit], k: int) -> list[SearchHit]: ...


class Reranker:
    """Thread-safe: one model instance never runs two predictions at once."""

    candidates = RERANK_CANDIDATES

    def __init__(
        self,
        *,
        model: str = DEFAULT_RERANKER,
        device: str = "cpu",
        quantize: bool = True,
        focus_words: int | None = FOCUS_WORDS,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import CrossEncoder

        location = str(Path(model).expanduser()) if Path(model).expanduser().exists() else model
        try:
            with one_at_a_time():
                self._model: Any = CrossEncoder(
                    location,
                    device=device,
                    max_length=_MAX_TOKENS if focus_words is None else FOCUS_MAX_TOKENS,
                )
        except Exception as e:  # the library raises many types; one clear error out
            raise ModelLoadError(
                f"could not load the reranker {model!r} (a local folder or a model in the "
                f"Hugging Face cache; download it from Recommended models): {e}"
            ) from e
        self.quantized = quantize and device == "cpu"
        if self.quantized:
            self._model = _int8_linear_layers(self._model)
        self.focus_words = focus_words
        self._lock = threading.Lock()
        self.info = RerankerInfo(id=model, device=device)

    def scores(self, *, question: str, texts: Sequence[str]) -> np.ndarray:
        """One relevance score per text (higher is better), in one batched pass."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        with self._lock:
            out = self._model.predict(
                [(question, t) for t in texts],
                batch_size=len(texts),
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)[:, -1]

    def rerank(self, *, question: str, hits: Sequence[SearchHit], k: int) -> list[SearchHit]:
        texts = [h.chunk.text for h in hits]
        if self.focus_words is not None:
            texts = [focus(question=question, text=t, words=self.focus_words) for t in texts]
        return rerank_hits(hits=hits, scores=self.scores(question=question, texts=texts), k=k)


def rerank_hits(
    *, hits: Sequence[SearchHit], scores: np.ndarray, k: int, rank_weight: float = _RANK_WEIGHT
) -> list[SearchHit]:
    """The top k of `hits` (in retrieval order) by a ranker's `scores` blended with the
    retrieval rank; each hit's `fused` becomes its blended score."""
    if not hits:
        return []
    n = len(hits)
    # Ranks, not raw logits: a cross-encoder's scale is its own.
    order = np.argsort(-scores, kind="stable")
    cross_rank = np.empty(n, dtype=np.float32)
    cross_rank[order] = np.arange(n, dtype=np.float32)
    retrieval_rank = np.arange(n, dtype=np.float32)
    blended = -((1 - rank_weight) * cross_rank + rank_weight * retrieval_rank)
    best = np.argsort(-blended, kind="stable")[:k]
    return [replace(hits[i], fused=float(blended[i])) for i in best]


def _int8_linear_layers(model: Any) -> Any:
    import warnings

    import torch

    with warnings.catch_warnings():
        # torch.ao.quantization is deprecated in favour of torchao, which is not a
        # dependency; the dynamic int8 path still works in the pinned torch.
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(
            model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
        )


def focus(*, question: str, text: str, words: int) -> str:
    """At most `words` words of `text`: the whole sentences around the one sharing
    most of the question's words (the first such), taken after it first, since a
    sentence naming the question's words often introduces the fact that follows."""
    if len(text.split()) <= words:
        return text
    sentences = split_sentences(text, min_words=1)
    if not sentences:
        return " ".join(text.split()[:words])
    wanted = set(content_words(question))
    overlap = [len(wanted.intersection(content_words(s))) for s in sentences]
    best = overlap.index(max(overlap))
    start, end = best, best + 1
    used = len(sentences[best].split())
    while True:
        grown = False
        for j in (end, start - 1):
            if 0 <= j < len(sentences) and not (start <= j < end):
                size = len(sentences[j].split())
                if used + size <= words:
                    start, end = min(start, j), max(end, j + 1)
                    used += size
                    grown = True
        if not grown:
            break
    return " ".join(" ".join(sentences[start:end]).split()[:words])
