"""Q4_K and Q6_K blocks written from float weights (gguf-py quantizes neither).

Tests and benchmarks write random-weight models as GGUF files
(engine/runtime/models/gguf_writer.py);
the K formats are what people run (Q4_K_M is Q4_K with some matrices in Q6_K), so their
files must be writable too. These are plain round-to-nearest encoders with one scale (and
for Q4_K one minimum) per sub-block, in llama.cpp's block layouts (ggml-common.h
`block_q4_K`, `block_q6_K`): not llama.cpp's search for the best scales, so their error is
somewhat larger, and gguf's own dequantizer reads them back (tested).
"""

from __future__ import annotations

import numpy as np

QK_K = 256


def _rows(weights: np.ndarray) -> int:
    if weights.ndim != 2 or weights.shape[1] % QK_K:
        raise ValueError(f"K formats need rows of a multiple of {QK_K} values: {weights.shape}")
    return int(weights.shape[0])


def _f16(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16)


def quantize_q4_k(weights: np.ndarray) -> np.ndarray:
    """(rows, cols) float32, cols a multiple of 256 → (rows, cols / 256 · 144) uint8."""
    rows = _rows(weights)
    x = weights.reshape(-1, 8, 32).astype(np.float32)  # (blocks, sub-blocks, values)
    lo = np.minimum(x.min(axis=-1), 0.0)  # w = scale · q − minimum, minimum = −lo ≥ 0
    hi = np.maximum(x.max(axis=-1), 0.0)
    scale = (hi - lo) / 15.0
    minimum = -lo
    d = _f16(scale.max(axis=-1) / 63.0)
    dmin = _f16(minimum.max(axis=-1) / 63.0)
    d32, dmin32 = d.astype(np.float32)[:, None], dmin.astype(np.float32)[:, None]
    sc = np.clip(np.rint(np.divide(scale, d32, out=np.zeros_like(scale), where=d32 > 0)), 0, 63)
    mn = np.clip(
        np.rint(np.divide(minimum, dmin32, out=np.zeros_like(minimum), where=dmin32 > 0)), 0, 63
    )
    step = (d32 * sc)[..., None]
    q = np.divide(x + (dmin32 * mn)[..., None], step, out=np.zeros_like(x), where=step > 0)
    q = np.clip(np.rint(q), 0, 15).astype(np.uint8)
    sc, mn = sc.astype(np.uint8), mn.astype(np.uint8)
    scales = np.zeros((x.shape[0], 12), dtype=np.uint8)
    scales[:, 0:4] = (sc[:, :4] & 63) | ((sc[:, 4:] >> 4) << 6)
    scales[:, 4:8] = (mn[:, :4] & 63) | ((mn[:, 4:] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:] & 15) | ((mn[:, 4:] & 15) << 4)
    pairs = q.reshape(-1, 4, 2, 32)  # sub-blocks 2c and 2c+1 share 32 bytes
    qs = (pairs[:, :, 0] | (pairs[:, :, 1] << 4)).reshape(-1, 128)
    out = np.concatenate(
        [d.view(np.uint8).reshape(-1, 2), dmin.view(np.uint8).reshape(-1, 2), scales, qs], axis=1
    )
    return out.reshape(rows, -1)


def quantize_q6_k(weights: np.ndarray) -> np.ndarray:
    """(rows, cols) float32, cols a multiple of 256 → (rows, cols / 256 · 210) uint8."""
    rows = _rows(weights)
    x = weights.reshape(-1, 16, 16).astype(np.float32)
    amax = np.abs(x).max(axis=-1)  # (blocks, 16)
    scale = amax / 31.0
    d = _f16(scale.max(axis=-1) / 127.0)
    d32 = d.astype(np.float32)[:, None]
    sc = np.clip(np.rint(np.divide(scale, d32, out=np.zeros_like(scale), where=d32 > 0)), -128, 127)
    step = (d32 * sc)[..., None]
    q = np.divide(x, step, out=np.zeros_like(x), where=step != 0)
    q = (np.clip(np.rint(q), -32, 31) + 32).astype(np.uint8).reshape(-1, 2, 4, 32)
    # Per half of 128 values: ql holds the low nibbles of values l and l+64 (byte l) and
    # l+32 and l+96 (byte l+32); qh holds their two high bits, four values a byte.
    low = q & 15
    high = q >> 4
    ql = np.concatenate(
        [low[:, :, 0] | (low[:, :, 2] << 4), low[:, :, 1] | (low[:, :, 3] << 4)], axis=-1
    ).reshape(-1, 128)
    qh = (
        high[:, :, 0] | (high[:, :, 1] << 2) | (high[:, :, 2] << 4) | (high[:, :, 3] << 6)
    ).reshape(-1, 64)
    scales = sc.astype(np.int8).view(np.uint8)
    out = np.concatenate([ql, qh, scales, d.view(np.uint8).reshape(-1, 2)], axis=1)
    return out.reshape(rows, -1)
