"""The loaded language model re-orders the retrieved candidates: query likelihood.

With `EngineSettings.reranker = "model"` and a language model in use, each question's
top `MODEL_CANDIDATES` passages are re-ordered by how likely the model finds the
question after the passage ("Here is a generated relevant question: …"), summed over
the question's tokens, in one batched pass (engine/runtime/executor/likelihood.py). This is
UPR (Sachan et al., 2022, "Improving Passage Retrieval with Zero-Shot Question
Generation") as Zhuang et al. (2023, "Open-source Large Language Models are Strong
Zero-shot Query Likelihood Models for Document Ranking") run it on decoder-only
models: no training, any causal LM, and the question is the same for every row, so
the sums compare directly.

Each passage is read through its focus (engine/rag/answer/reranker.py `focus`): the whole
sentences around the one sharing most of the question's words. The scores are
blended with retrieval's rank as the cross-encoder's are (`rerank_hits`).

The pass runs under the answerer's lock, and the engine's answer lock when given (the
one profiling samples and generation batches hold): it waits for a generation batch
in progress and holds the next one back while it runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Protocol

import numpy as np

from engine.rag.answer.reranker import RerankerInfo, focus, rerank_hits
from engine.rag.store.records import SearchHit

log = logging.getLogger(__name__)
MODEL_RANKER = "model"  # the EngineSettings.reranker value that asks for it
# Candidates and focus length: the pass prefills about candidates · (focus + question
# + prompt) tokens; 10 · ~110 tokens added 2.1 s a question with SmolLM2-135M on 2
# cores. Top 10 and the rank weight were the best of a sweep on the quality benchmark's
# tuning parts (top 5/20, weight 0.15/0.5); on its held part this model ranked worse
# than retrieval alone, so the setting is off by default (`ragdoll bench quality
# --model M --reranker model` measures it).
MODEL_CANDIDATES = 10
MODEL_FOCUS_WORDS = 60
MODEL_RANK_WEIGHT = 0.3  # retrieval's rank against the model's order
PROMPT = (
    "Generate a question that is the most relevant to the given document.\n"
    "The document: {passage}\n"
    "Here is a generated relevant question:"
)


class Scores(Protocol):
    """What the ranker needs of the answerer (GenerativeAnswerer)."""

    name: str
    device: str

    def continuation_logprobs(
        self, *, contexts: Sequence[str], continuation: str
    ) -> list[float]: ...


class ModelRanker:
    def __init__(
        self,
        *,
        answerer: Scores,
        candidates: int = MODEL_CANDIDATES,
        focus_words: int = MODEL_FOCUS_WORDS,
        rank_weight: float = MODEL_RANK_WEIGHT,
        lock: threading.Lock | None = None,
    ) -> None:
        self._answerer = answerer
        self._lock = lock
        self.candidates = candidates
        self.focus_words = focus_words
        self.rank_weight = rank_weight
        self.info = RerankerInfo(id=f"{MODEL_RANKER}:{answerer.name}", device=answerer.device)

    def scores(self, *, question: str, texts: Sequence[str]) -> np.ndarray:
        """The question's log-likelihood after each text (higher is better)."""
        if not texts or not question.strip():
            return np.zeros(len(texts), dtype=np.float32)
        contexts = [PROMPT.format(passage=" ".join(t.split())) for t in texts]
        with self._lock or nullcontext():
            sums = self._answerer.continuation_logprobs(
                contexts=contexts, continuation=" " + " ".join(question.split())
            )
        return np.asarray(sums, dtype=np.float32)

    def rerank(self, *, question: str, hits: Sequence[SearchHit], k: int) -> list[SearchHit]:
        """The top `candidates` hits re-ordered, the rest after them as they came;
        cut to k."""
        read, rest = list(hits[: self.candidates]), list(hits[self.candidates :])
        texts = [focus(question=question, text=h.chunk.text, words=self.focus_words) for h in read]
        try:
            scores = self.scores(question=question, texts=texts)
        except Exception:  # out of memory, a model dropped meanwhile: answer unranked
            log.warning("the model could not rank the candidates; retrieval's order kept")
            log.debug("ranking failed", exc_info=True)
            return list(hits[:k])
        ranked = rerank_hits(hits=read, scores=scores, k=len(read), rank_weight=self.rank_weight)
        return [*ranked, *rest][:k]
