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

A question asked in another language than its passages' (`across`) cannot reach 1: the
closest another language comes to a sentence is its translation, which multilingual-e5-
small puts at about 0.92 (unrelated 0.79). Across languages the scale's top point is
therefore what the embedder gives a translation (`translated`: the mean cosine between
each CALIBRATION sentence and its TRANSLATED one), measured with `unrelated`. An
embedder that puts translations nearer unrelated sentences than identical ones (an
English-only one) reads no other language, and keeps its one scale.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

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
# Each CALIBRATION sentence translated into another language, in the same order.
TRANSLATED = (
    "Das Rezept braucht zwei Eier und eine Tasse Mehl.",
    "Se esperan fuertes lluvias en el norte el domingo.",
    "Elle joue du violon dans un petit orchestre.",
    "The train to Berlin leaves at eight o'clock.",
    "Mio nonno ha realizzato il giardino da solo.",
    "El gato duerme en el sofá todo el día.",
    "Die Bibliothek schließt samstags um achtzehn Uhr.",
    "The football match ended in a draw.",
    "Nous achetons des fruits frais au marché du village.",
    "O museu expõe quadros do Renascimento.",
)
# all-MiniLM-L6-v2's mean cosine between the CALIBRATION sentences (measured by
# tests/engine/rag/answer/test_semantic_scale.py, which holds this to the bundled model).
REFERENCE = 0.151


@dataclass(frozen=True, kw_only=True)
class SemanticScale:
    unrelated: float = REFERENCE  # the embedder's mean cosine between unrelated sentences
    translated: float | None = None  # its mean cosine between translations (None: unknown)
    top: float = 1.0  # the cosine that maps to 1

    def across(self) -> SemanticScale:
        """The scale for a question asked in another language than its passages: the
        top point is a translation's cosine, where the embedder reads other languages."""
        if self.translated is None:
            return self
        if self.translated - self.unrelated < (1.0 - self.unrelated) / 2:
            return self  # translations nearer unrelated sentences: no other language read
        return replace(self, top=self.translated)

    def reads_across(self) -> bool:
        """Whether the embedder reads other languages: its translations lie nearer an
        identical sentence than unrelated ones (`across` has a scale of its own)."""
        return self.across() != self

    def apply(self, cosine: np.ndarray | float) -> np.ndarray:
        if abs(self.unrelated - REFERENCE) < 1e-6 and self.top == 1.0:
            return np.asarray(cosine, dtype=np.float32)
        stretch = (1.0 - REFERENCE) / max(1e-3, self.top - self.unrelated)
        return np.asarray(
            REFERENCE + (np.asarray(cosine, dtype=np.float32) - self.unrelated) * stretch,
            dtype=np.float32,
        )

    def apply_across(self, cosine: np.ndarray, *, across: Sequence[bool]) -> np.ndarray:
        """`cosine` (a row per text, a column per text it is read against) on this
        scale, where the columns marked in `across` are in another language than the
        rows: those on the scale of a translation (`across`)."""
        out = self.apply(cosine)
        other = np.asarray(across, dtype=bool)
        if other.any():
            out[:, other] = self.across().apply(np.asarray(cosine)[:, other])
        return out


IDENTITY = SemanticScale()


def passage_similarity(
    *,
    said: Sequence[str],
    sentences: Sequence[str],
    owners: Sequence[int],
    embed: Callable[[list[str]], np.ndarray],
    scale: SemanticScale,
    across: Sequence[bool],
) -> np.ndarray:
    """Each of an answer's sentences `said` (rows) against each passage sentence
    (columns; `owners[j]`: the passage of sentence j, from 1), embedded in one call, on
    `scale`; where `across[n - 1]`, passage n is in another language than the answer and
    read on a translation's scale (an empty `across`: none is)."""
    vectors = np.asarray(embed([*said, *sentences]), dtype=np.float32)
    return scale.apply_across(
        vectors[: len(said)] @ vectors[len(said) :].T,
        across=[bool(across) and across[n - 1] for n in owners],
    )


def measure_scale(embed: Callable[[list[str]], np.ndarray]) -> SemanticScale:
    """The scale of the embedder behind `embed` (L2-normalised rows)."""
    vectors = np.asarray(embed(list(CALIBRATION)), dtype=np.float32)
    sims = vectors @ vectors.T
    upper = sims[np.triu_indices(len(CALIBRATION), 1)]
    translations = np.asarray(embed(list(TRANSLATED)), dtype=np.float32)
    translated = float((vectors * translations).sum(axis=1).mean())
    return SemanticScale(unrelated=round(float(upper.mean()), 4), translated=round(translated, 4))
