"""Cosines of any embedder on the bundled MiniLM's scale: MiniLM's own is the identity
(REFERENCE is what it measures), and the real multilingual-e5-small's unrelated
sentences land near it instead of at 0.8."""

from __future__ import annotations

import numpy as np
import pytest

from bench.real_e5 import find_real_e5
from engine.rag.answer.semantic_scale import (
    CALIBRATION,
    IDENTITY,
    REFERENCE,
    TRANSLATED,
    SemanticScale,
    measure_scale,
)
from engine.rag.ingest.embedder import Embedder


def test_the_scale_keeps_the_reference_and_one() -> None:
    scale = SemanticScale(unrelated=0.8)
    assert scale.apply(0.8) == pytest.approx(REFERENCE)
    assert scale.apply(1.0) == pytest.approx(1.0)
    assert scale.apply(0.9) > REFERENCE
    assert np.array_equal(IDENTITY.apply(np.array([0.3, 0.7])), np.array([0.3, 0.7], np.float32))


def test_the_reference_is_what_the_bundled_model_measures() -> None:
    assert measure_scale(Embedder().embed).unrelated == pytest.approx(REFERENCE, abs=0.01)
    assert Embedder().semantic_scale() == IDENTITY


def test_multilingual_e5_is_put_on_minilm_scale() -> None:
    folder = find_real_e5()
    if folder is None:
        pytest.skip("multilingual-e5-small is not converted: python -m bench.real_e5")
    e5 = Embedder(model=str(folder), backend="torch")
    scale = e5.semantic_scale()
    assert scale.unrelated > 0.6  # its raw cosines: unrelated sentences score high
    q, answer, other = e5.embed(
        [
            "Wie finde ich heraus, zu welchem Paket eine Datei gehört?",
            "Mit dpkg --search finden Sie das Paket, das eine Datei enthält.",
            "Der Zug nach Berlin fährt um acht Uhr ab.",
        ]
    )
    assert float(scale.apply(q @ other)) < 0.3
    assert float(scale.apply(q @ answer)) > 0.5
    # Its translations land between unrelated sentences and identical ones, nearer these.
    assert scale.translated is not None
    assert scale.translated - scale.unrelated > (1 - scale.unrelated) / 2


def test_across_languages_a_translation_is_the_top_of_the_scale() -> None:
    scale = SemanticScale(unrelated=0.8, translated=0.92)
    across = scale.across()
    assert across.apply(0.8) == pytest.approx(REFERENCE)
    assert across.apply(0.92) == pytest.approx(1.0)
    assert across.apply(0.86) > scale.apply(0.86)


def test_an_embedder_that_reads_one_language_keeps_its_one_scale() -> None:
    # Translations nearer its unrelated sentences than identical ones: no other language.
    english_only = SemanticScale(unrelated=0.15, translated=0.4)
    assert english_only.across() == english_only
    assert IDENTITY.across() == IDENTITY
    assert not english_only.reads_across() and not IDENTITY.reads_across()
    assert SemanticScale(unrelated=0.8, translated=0.92).reads_across()
    assert SemanticScale(unrelated=0.8).across().apply(0.9) == SemanticScale(unrelated=0.8).apply(
        0.9
    )


def test_measuring_finds_where_translations_land() -> None:
    pair_of = {
        text: i for i, pair in enumerate(zip(CALIBRATION, TRANSLATED, strict=True)) for text in pair
    }

    def embed(texts: list[str]) -> np.ndarray:
        # A sentence and its translation share one direction; the pairs are orthogonal.
        return np.stack([np.eye(len(TRANSLATED), dtype=np.float32)[pair_of[t]] for t in texts])

    scale = measure_scale(embed)
    assert scale.translated == pytest.approx(1.0)
    assert scale.unrelated == pytest.approx(0.0)


def test_columns_in_another_language_are_read_on_a_translation_s_scale() -> None:
    scale = SemanticScale(unrelated=0.8, translated=0.92)
    cosine = np.array([[0.88, 0.88]], dtype=np.float32)
    got = scale.apply_across(cosine, across=[False, True])
    assert got[0, 0] == pytest.approx(float(scale.apply(0.88)))
    assert got[0, 1] == pytest.approx(float(scale.across().apply(0.88)))
    assert got[0, 1] > got[0, 0]
    assert np.array_equal(scale.apply_across(cosine, across=[False, False]), scale.apply(cosine))
