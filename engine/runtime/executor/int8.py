"""GGUF matrices of the other block types (Q5_0, Q5_1, Q5_K, Q6_K, Q8_0) computed by
torch's int8 kernel.

torch has no kernel for 5-, 6- or 8-bit groups of 32 or 16. `_weight_int8pack_mm` takes
int8 weights with one bfloat16 scale per row and bfloat16 activations, and reads one
byte a weight: the nearest thing to the file's 0.69–1.06 bytes. Measured on this
project's CPU (AMD EPYC, AVX-512 BF16, one thread, a Qwen2-1.5B-shaped model at batch 1)
it streams 12.8 GB/s where a bfloat16 matmul streams 10.8 over twice the bytes
(docs/executor.md). So such a matrix is decoded once (gguf's exact values) and
requantized per row: q = round(w / s) with s = max|w| / 127 rounded to bfloat16.

That is not the file's arithmetic: each value moves by at most half a row step
(max|w| / 254). For Q6_K (64 levels in groups of 16) the row step is about a quarter of
its largest group's own step; the greedy tokens of real models are compared with the
dequantize-then-matmul reference by `ragdoll bench offload --model` and reported. The
kernel's own reference is `int4.reference_linear` over `reference_weight` (the requantized
weights, activations rounded to bfloat16, a float32 matmul, bfloat16 out: the same
arithmetic as the int4 kernel's reference).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

INT8 = ":int8"  # suffix of a requantized weight's int8 values in a unit's tensors
SCALE8 = ":scale8"  # suffix of its (N,) bfloat16 row scales
# Rows requantized at a time: the decoded float32 rows are the transient memory (a
# 151,936-row head decoded whole would be 0.9 GB).
_CHUNK_ROWS = 4096


def available() -> bool:
    return hasattr(torch.ops.aten, "_weight_int8pack_mm")


def requantize(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 values, bfloat16 row scales) of a float32 (N, K) matrix."""
    scale = weight.abs().amax(dim=1).div_(127.0).to(torch.bfloat16)
    divisor = scale.float().masked_fill_(scale == 0, 1.0).unsqueeze(1)
    q = torch.round(weight / divisor).clamp_(-127, 127).to(torch.int8)
    return q, scale


def requantize_rows(
    *, rows: int, cols: int, decode: Callable[[int, int], torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """`requantize` of a matrix decoded `_CHUNK_ROWS` rows at a time by
    `decode(start, stop)` (float32 rows)."""
    q = torch.empty((rows, cols), dtype=torch.int8)
    scale = torch.empty(rows, dtype=torch.bfloat16)
    for start in range(0, rows, _CHUNK_ROWS):
        stop = min(rows, start + _CHUNK_ROWS)
        q[start:stop], scale[start:stop] = requantize(decode(start, stop))
    return q, scale


def dequantize_bf16(values: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The (N, K) bfloat16 matrix of int8 `values` and row `scale` (a prefill's matmul)."""
    return values.to(torch.bfloat16).mul_(scale.unsqueeze(1))


def linear(
    x: torch.Tensor, *, values: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None
) -> torch.Tensor:
    """x @ W.T + bias with W held as int8 `values` and row `scale`; x's dtype in and out."""
    flat = x.reshape(-1, x.shape[-1]).to(torch.bfloat16).contiguous()
    y = torch.ops.aten._weight_int8pack_mm(flat, values, scale)
    y = y.to(x.dtype).reshape(*x.shape[:-1], y.shape[-1])
    return y if bias is None else y.add_(bias)


def reference_weight(values: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return values.float() * scale.float().unsqueeze(1)
