"""Cosines of any embedder on the bundled MiniLM's scale: MiniLM's own is the identity
(REFERENCE is what it measures), and the real multilingual-e5-small's unrelated
sentences land near it instead of at 0.8."""

from __future__ import annotations

import numpy as np
import pytest

from bench.real_e5 import find_real_e5
from engine.rag.answer.semantic_scale import IDENTITY, REFERENCE, SemanticScale, measure_scale
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
