"""One scale for the cosine similarities of different embedders.

The sentence choice's weights, the gate's threshold (DEFAULT_MIN_SCORE) and the duplicate
test were set on all-MiniLM-L6-v2's cosines, where unrelated sentences score about 0.2 and
an answer sentence 0.5-0.7. Other embedders put the same texts elsewhere:
multilingual-e5-small scores unrelated sentences about 0.8 and answers 0.85-0.93, so its
raw cosine passes every question. A `SemanticScale` maps an embedder's cosine onto
MiniLM's by its two fixed points, what unrelated sentences score and 1:

    scaled = REFERENCE + (cosine - unrelated) * (1 - REFERENCE) / (1 - unrelated)

`unrelated` is measured on the embedder itself (`measure_scale`: the mean cosine between
CALIBRATION sentences, about unrelated things in several languages), so the mapping holds
for an embedder nobody tuned for, in any language it reads. MiniLM's own scale is the
identity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# Mutually unrelated sentences, a few per language (the embedder's prefix is its own).
CALIBRATION = (
    "The recipe needs two eggs and a cup of flour.",
    "Heavy rain is expected in the north on Sunday.",
    "She plays the violin in a small orchestra.",
    "Der Zug nach Berlin fährt um acht Uhr ab.",
    "Mein Großvater hat den Garten selbst angelegt.",
    "Le chat dort sur le canapé toute la journée.",
    "La bibliothèque ferme à dix-huit heures le samedi.",
    "El partido de fútbol terminó empatado.",
    "Compramos fruta fresca en el mercado del pueblo.",
    "Il museo espone quadri del Rinascimento.",
)
# all-MiniLM-L6-v2's mean cosine between the CALIBRATION sentences (measured by
# tests/engine/rag/answer/test_semantic_scale.py, which holds this to the bundled model).
REFERENCE = 0.151


@dataclass(frozen=True, kw_only=True)
class SemanticScale:
    unrelated: float = REFERENCE  # the embedder's mean cosine between unrelated sentences

    def apply(self, cosine: np.ndarray | float) -> np.ndarray:
        if abs(self.unrelated - REFERENCE) < 1e-6:
            return np.asarray(cosine, dtype=np.float32)
        stretch = (1.0 - REFERENCE) / max(1e-3, 1.0 - self.unrelated)
        return np.asarray(
            REFERENCE + (np.asarray(cosine, dtype=np.float32) - self.unrelated) * stretch,
            dtype=np.float32,
        )


IDENTITY = SemanticScale()


def measure_scale(embed: Callable[[list[str]], np.ndarray]) -> SemanticScale:
    """The scale of the embedder behind `embed` (L2-normalised rows)."""
    vectors = np.asarray(embed(list(CALIBRATION)), dtype=np.float32)
    sims = vectors @ vectors.T
    upper = sims[np.triu_indices(len(CALIBRATION), 1)]
    return SemanticScale(unrelated=round(float(upper.mean()), 4))
