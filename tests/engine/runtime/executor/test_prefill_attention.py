"""The native prefill attention against torch's scaled_dot_product_attention: causal from
the start and after a past, grouped KV heads, rows with left padding, KV buffers with room
beyond their positions, and the shapes it leaves to SDPA."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from gguf import GGMLQuantizationType
from transformers.cache_utils import DynamicLayer

from engine.runtime.executor import decoder, forward, ggml_native, prefill_attention
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.models.gguf_file import companion_folder
from engine.runtime.models.gguf_writer import write_gguf
from engine.runtime.models.synthetic import write_random_model
from tests.engine.runtime.executor.conftest import make_placement


@pytest.fixture(autouse=True)
def _built() -> None:
    lib = ggml_native.library()
    if lib is None or not lib.prefill_attention_built:
        pytest.skip("the native prefill attention is not built here (no compiler or no AVX-512)")


def _kv_buffers(keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The keys and values as views of buffers with room for more, as append_kv keeps them."""
    return decoder.append_kv(DynamicLayer(), keys, values)


def _want(q, keys, values, mask: decoder.AttentionMask, scale: float) -> torch.Tensor:
    b, heads, t, d = q.shape
    out = F.scaled_dot_product_attention(
        q,
        keys,
        values,
        attn_mask=mask.allowed,
        is_causal=mask.causal,
        scale=scale,
        enable_gqa=heads != keys.shape[1],
    )
    return out.transpose(1, 2).reshape(b, t, heads * d)


@pytest.mark.parametrize(
    ("rows", "heads", "kv_heads", "d", "past", "t", "padded"),
    [
        (1, 12, 2, 128, 0, 150, 0),  # the first chunk of a prompt: blocks of 64 and a tail
        (1, 12, 2, 128, 100, 70, 0),  # a later chunk: queries after a past
        (2, 9, 3, 64, 0, 37, 5),  # a batch, the first row left-padded
        (2, 4, 4, 96, 20, 45, 30),  # padding reaching into the chunk's own queries
        (1, 8, 2, 64, 0, 1 + 64, 0),  # one query past a block
    ],
)
def test_it_equals_sdpa(
    rows: int, heads: int, kv_heads: int, d: int, past: int, t: int, padded: int
) -> None:
    g = torch.Generator().manual_seed(rows * 1000 + t)
    s = past + t
    q = torch.randn(rows, heads, t, d, generator=g)
    keys, values = _kv_buffers(
        torch.randn(rows, kv_heads, s, d, generator=g) * 2,
        torch.randn(rows, kv_heads, s, d, generator=g),
    )
    attention = torch.ones(rows, s, dtype=torch.long)
    attention[0, :padded] = 0
    mask = decoder.attention_mask(mask=attention, queries=t, past=past)
    scale = d**-0.5
    got = prefill_attention.attend(q, keys, values, padding=mask.padding, scale=scale, threads=2)
    assert got is not None
    torch.testing.assert_close(got, _want(q, keys, values, mask, scale), rtol=1e-4, atol=1e-5)


def test_shapes_it_does_not_handle_are_left_to_sdpa() -> None:
    q = torch.randn(1, 4, 8, 80)
    kv = torch.randn(1, 2, 8, 80)
    assert prefill_attention.attend(q, kv, kv, padding=None, scale=1.0, threads=1) is None
    half = torch.randn(1, 4, 8, 64, dtype=torch.bfloat16)
    kv = torch.randn(1, 2, 8, 64, dtype=torch.bfloat16)
    assert prefill_attention.attend(half, kv, kv, padding=None, scale=1.0, threads=1) is None


def test_a_model_prefill_takes_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A model's prefill (a left-padded batch, in chunks after the first) computes its
    attention natively, with the logits SDPA gives."""
    hf = write_random_model(
        folder=tmp_path / "hf",
        architecture="qwen2",
        hidden_size=256,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=512,
        vocab_size=832,
        seed=5,
    )
    path = write_gguf(model_dir=hf, out=tmp_path / "model.gguf", qtype=GGMLQuantizationType.Q8_0)
    folder = companion_folder(gguf_path=path, cache=tmp_path / "cache")
    model = StreamingModel(
        model_dir=folder, placement=make_placement(model_dir=folder), dtype=torch.float32
    )
    monkeypatch.setattr(forward, "PREFILL_CHUNK_TOKENS", 48)  # chunks after a past
    ids = torch.randint(5, 800, (2, 130), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 130, dtype=torch.long)
    mask[0, :9] = 0
    calls: list[bool] = []
    attend = prefill_attention.attend

    def logits(native: bool) -> torch.Tensor:
        def counted(*args: object, **kwargs: object) -> torch.Tensor | None:
            calls.append(native)
            return attend(*args, **kwargs) if native else None  # type: ignore[arg-type]

        monkeypatch.setattr(prefill_attention, "attend", counted)
        return model.forward(
            input_ids=ids,
            attention_mask=mask,
            position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
            cache=model.new_cache(),
            phase="prefill",
            last_only=False,
        )

    try:
        want, got = logits(False), logits(True)
    finally:
        model.close()
    assert calls.count(True) == calls.count(False) == 2 * 3  # 2 layers, 3 chunks
    # The same logits but for the prefill's bfloat16 activations, which a last-bit
    # difference in the attention can round the other way.
    real = mask.bool()
    assert (got[real] - want[real]).norm() / want[real].norm() < 1e-2
