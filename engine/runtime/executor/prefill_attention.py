"""A prefill's attention by the native kernel (native/prefill_attention.c): causal, over
the KV buffers as `decoder.append_kv` keeps them, a row's left padding masked.

Torch's CPU scaled_dot_product_attention in float32 ran the real 1.5B's 1,505-token
prefill at about 120 GFLOP/s on 2 cores, a fifth of the whole prefill; the kernel is a
FlashAttention loop of 64 queries against 64 keys in AVX-512 registers. Where it does not
apply (no library, a build without AVX-512, a head size it does not handle, not float32)
`attend` returns None and the caller uses SDPA. Tested against SDPA
(tests/engine/runtime/executor/test_prefill_attention.py).
"""

from __future__ import annotations

import torch

from engine.runtime.executor import ggml_native

HEAD_SIZES = frozenset({64, 96, 128})


def attend(
    q: torch.Tensor,  # (B, heads, T, d)
    keys: torch.Tensor,  # (B, kv_heads, past + T, d): each position's d values contiguous
    values: torch.Tensor,
    *,
    padding: torch.Tensor | None,  # (B, past + T) uint8, 0 at a row's padding; None: none
    scale: float,
    threads: int,
) -> torch.Tensor | None:
    """The attention's output (B, T, heads · d) — query t at position past + t sees the
    keys up to its own that are not padding, and itself — or None: not computable here."""
    lib = ggml_native.library()
    if lib is None or not lib.prefill_attention_built:
        return None
    b, heads, t, d = q.shape
    if (
        d not in HEAD_SIZES
        or any(x.dtype != torch.float32 for x in (q, keys, values))
        or keys.shape[0] != b
        or heads % keys.shape[1] != 0
        or keys.shape[2] < t
        or keys.stride(-1) != 1
        or keys.stride(-2) != d
        or keys.stride() != values.stride()
        or keys.shape != values.shape
    ):
        return None
    if padding is not None and (
        padding.dtype != torch.uint8
        or padding.shape != (b, keys.shape[2])
        or not padding.is_contiguous()
    ):
        raise ValueError("the padding mask must be (rows, positions) uint8, contiguous")
    out = torch.empty((b, t, heads, d), dtype=torch.float32)
    rc = lib.prefill_attention(
        q=q.contiguous(),
        keys=keys,
        values=values,
        key_mask=padding,
        scale=scale,
        out=out,
        threads=threads,
    )
    if rc == -2:
        raise MemoryError("no memory for the prefill attention's blocks")
    if rc != 0:
        raise ValueError(f"the prefill attention refused q {tuple(q.shape)} (code {rc})")
    return out.view(b, t, heads * d)
