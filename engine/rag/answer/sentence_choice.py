"""Which sentence answers: a weighted sum of a few features of each candidate sentence.

The extractive answerer (engine/rag/answer/extractive.py) computes, for every sentence of
the retrieved passages, the features of `FEATURES`; the sentence with the highest
`weights · features` is the answer. The gate's relevance (what a refusal reads) is a
separate, fixed sum (`RELEVANCE`), so choosing differently never makes an unanswerable
question's sentences score higher.

The weights were set by hand against the quality benchmark's tuning parts.
`bench/sentence_fit.py` and `sentence_fit_model.py` fit them instead (a listwise
ranker on one tuning part, measured on the other); no fit beat these weights on the part
it was not fitted on, in both directions, so the hand-set weights are the ones in force.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields, replace

import numpy as np

# The order of a feature row (engine/rag/answer/extractive.py `SentenceTable.features`).
FEATURES = (
    "semantic",  # the embedding's cosine similarity with the question's
    "lexical",  # the share of the question's content words it holds, weighted by rarity
    "code",  # the question's code tokens it holds verbatim (0-2)
    "heading",  # 1 for a heading-like line: it names the topic, states nothing
    "fragment",  # 1 when the passage's edge cut it
    "neighbour",  # the best relevance of the sentences beside it in its passage (>= 0)
    "rank",  # 1 - passage rank / passages: the first passage's sentences get most
)


@dataclass(frozen=True, kw_only=True)
class ChoiceWeights:
    """One weight per feature of `FEATURES`, in that order."""

    semantic: float
    lexical: float
    code: float
    heading: float
    fragment: float
    neighbour: float
    rank: float

    def vector(self) -> np.ndarray:
        return np.array(astuple(self), dtype=np.float32)

    @classmethod
    def of(cls, values: np.ndarray | list[float]) -> ChoiceWeights:
        return cls(**{f.name: float(v) for f, v in zip(fields(cls), values, strict=True)})


assert tuple(f.name for f in fields(ChoiceWeights)) == FEATURES

# The gate's relevance: semantic + lexical, the code-token bonus, the heading and
# fragment penalties (hand-set; DEFAULT_MIN_SCORE and the refusal's penalty are set
# against this scale).
RELEVANCE = ChoiceWeights(
    semantic=1.0,
    lexical=0.3,
    code=0.12,
    heading=-0.12,
    fragment=-0.08,
    neighbour=0.0,
    rank=0.0,
)
# The choice: the relevance, plus a share of the neighbours' relevance and the
# passage's rank. The English rules for the kind of token asked for
# ("where" -> a path) and for numbers ("how many") changed no answer of the blind
# multilingual set in any language, with either embedder, and were removed
# (docs/benchmarks.md, "Every language").
HAND_WEIGHTS = replace(RELEVANCE, neighbour=0.15, rank=0.04)
# What the product chooses with: a fit replaces this only when it beats HAND_WEIGHTS
# out of fold (python -m bench.sentence_fit_model).
CHOICE_WEIGHTS = HAND_WEIGHTS
