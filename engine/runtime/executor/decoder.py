"""The Llama-family decoder computed straight from a unit's tensors (gpt-fast's shape).

Hugging Face's modules, run through `functional_call`, cost a decode step about as much
Python as the arithmetic of a small model: each call re-binds every parameter, and a
layer is seven matmuls and a dozen module calls. Here a layer is plain functions over the
unit's tensors as the weight store holds them (engine/runtime/executor/kernel_forms.py): q/k/v
and gate/up fused where their forms agree, so a layer is four matmuls, the KV written in
place into a buffer that grows in steps (`append_kv`) instead of concatenated every step.

The arithmetic is the library's own for Llama, Qwen2 and Mistral (full attention): RMSNorm
in float32, rotary embeddings from the model's own rotary module, scaled dot-product
attention with grouped KV heads, SiLU-gated MLP; tested against the Hugging Face forward.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PretrainedConfig

from engine.runtime.executor import prefill_attention
from engine.runtime.executor.kernel_forms import (
    GATE_UP,
    QKV,
    Workspace,
    linear,
    linear_many,
    parts_of,
)
from engine.runtime.executor.quant import dequantize
from engine.runtime.models.gguf_file import GGUFTensor

# KV buffers grow by at least this many positions (a decode step then writes in place
# for the next 256 steps; a concatenation copies the whole cache at every step).
_KV_STEP = 256


@dataclass(frozen=True, kw_only=True)
class Shape:
    """What a layer's arithmetic needs of the config."""

    heads: int
    kv_heads: int
    head_dim: int
    eps: float

    @classmethod
    def of(cls, config: PretrainedConfig) -> Shape:
        heads = int(config.num_attention_heads)
        return cls(
            heads=heads,
            kv_heads=int(getattr(config, "num_key_value_heads", None) or heads),
            head_dim=int(getattr(config, "head_dim", None) or config.hidden_size // heads),
            eps=float(config.rms_norm_eps),
        )


def runs(config: PretrainedConfig) -> bool:
    """Whether this module computes the config's layers exactly (else the Hugging Face
    modules run): full attention only, SiLU, no extras the library would apply."""
    types = getattr(config, "layer_types", None) or ["full_attention"]
    sliding = config.model_type == "mistral" and getattr(config, "sliding_window", None)
    return (
        config.model_type in ("llama", "qwen2", "mistral")
        and all(t == "full_attention" for t in types)
        and not sliding
        and getattr(config, "hidden_act", "silu") == "silu"
        and not getattr(config, "mlp_bias", False)
        and float(getattr(config, "attention_dropout", 0.0) or 0.0) == 0.0
    )


def rms_norm(x: torch.Tensor, weight: torch.Tensor, *, eps: float) -> torch.Tensor:
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def append_kv(
    layer: object, keys: torch.Tensor, values: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """A DynamicLayer's `update`, writing in place: its keys and values stay views of a
    buffer with room for later positions; a layer whose tensors were replaced (a batch
    joined, rows selected, a cached prefix put in) gets a new buffer."""
    b, h, n, d = keys.shape
    buf_k, buf_v, past = reserve_kv(layer, like=keys, rows=b, heads=h, head_dim=d, count=n)
    buf_k[:, :, past : past + n] = keys
    buf_v[:, :, past : past + n] = values
    return commit_kv(layer, keys=buf_k, values=buf_v, length=past + n)


def reserve_kv(
    layer: object, *, like: torch.Tensor, rows: int, heads: int, head_dim: int, count: int
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The layer's key and value buffers (rows, heads, capacity, head_dim) with room for
    `count` positions after its `past` ones, and `past`: its own buffers where they fit,
    else new ones (`like`'s dtype and device) holding its keys and values so far. What
    the layer shows is unchanged until `commit_kv`."""
    old_k = getattr(layer, "keys", None) if getattr(layer, "is_initialized", False) else None
    past = 0 if old_k is None or old_k.numel() == 0 else old_k.shape[-2]
    buf_k = getattr(layer, "_ragdoll_k", None)
    buf_v = getattr(layer, "_ragdoll_v", None)
    fits = (
        buf_k is not None
        and old_k is not None
        and past > 0
        and old_k.data_ptr() == buf_k.data_ptr()
        and old_k.shape[0] == buf_k.shape[0] == rows
        and buf_k.shape[-2] >= past + count
        and buf_k.dtype == like.dtype
    )
    if not fits:
        capacity = past + count + max(_KV_STEP, (past + count) // 4)
        buf_k = like.new_empty((rows, heads, capacity, head_dim))
        buf_v = like.new_empty((rows, heads, capacity, head_dim))
        if past:
            buf_k[:, :, :past] = layer.keys  # type: ignore[attr-defined]
            buf_v[:, :, :past] = layer.values  # type: ignore[attr-defined]
        layer._ragdoll_k, layer._ragdoll_v = buf_k, buf_v  # type: ignore[attr-defined]
        if past:  # the layer's views move to the new buffers: the old ones can go
            layer.keys, layer.values = buf_k[:, :, :past], buf_v[:, :, :past]  # type: ignore[attr-defined]
    assert buf_k is not None and buf_v is not None
    return buf_k, buf_v, past


def commit_kv(
    layer: object, *, keys: torch.Tensor, values: torch.Tensor, length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer shows the first `length` positions of its buffers `keys`/`values`."""
    layer.keys = keys[:, :, :length]  # type: ignore[attr-defined]
    layer.values = values[:, :, :length]  # type: ignore[attr-defined]
    if not getattr(layer, "is_initialized", False):
        layer.dtype, layer.device = keys.dtype, keys.device  # type: ignore[attr-defined]
        layer.is_initialized = True  # type: ignore[attr-defined]
    return layer.keys, layer.values  # type: ignore[attr-defined]


@dataclass(frozen=True, kw_only=True)
class AttentionMask:
    """Which positions a chunk's queries see: SDPA's boolean mask (B, 1, T, S) or None,
    its is_causal, and the rows' padding (B, S) uint8 (0 at padding) or None where no
    row has any, for the native prefill attention."""

    allowed: torch.Tensor | None
    causal: bool
    padding: torch.Tensor | None = None


def attention_mask(*, mask: torch.Tensor, queries: int, past: int) -> AttentionMask:
    """(boolean mask (B, 1, T, S) or None, is_causal) for SDPA: query t sits at column
    past + t; it sees the unpadded columns up to its own. A padding query sees at least
    itself, so that no row is fully masked (SDPA would give NaN, and NaN values of a pad
    position's KV poison every row's sum even with weight 0)."""
    padded = not bool(mask.all())
    if not padded:
        if queries == 1:
            return AttentionMask(allowed=None, causal=False)
        if past == 0:
            return AttentionMask(allowed=None, causal=True)
    columns = mask.shape[1]
    col = torch.arange(columns, device=mask.device)
    row = torch.arange(queries, device=mask.device).unsqueeze(1) + past
    causal = col.unsqueeze(0) <= row  # (T, S)
    allowed = mask.bool()[:, None, None, :] & causal[None, None]
    return AttentionMask(
        allowed=allowed | (col.unsqueeze(0) == row)[None, None],
        causal=False,
        padding=mask.to(torch.uint8).contiguous() if padded else None,
    )


def _matmul(
    x: torch.Tensor,
    tensors: Mapping[str, torch.Tensor],
    name: str,
    buffer: Workspace,
) -> torch.Tensor:
    bias = tensors.get(f"{name}.bias")
    parts = parts_of(tensors, f"{name}.weight")
    if parts is not None:
        return linear(x, parts=parts, bias=bias, buffer=buffer)
    return F.linear(x, tensors[f"{name}.weight"], bias)


def _qkv(
    x: torch.Tensor, tensors: Mapping[str, torch.Tensor], shape: Shape, buffer: Workspace
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if parts_of(tensors, f"{QKV}.weight") is not None:
        qkv = _matmul(x, tensors, QKV, buffer)
        q_dim = shape.heads * shape.head_dim
        kv_dim = shape.kv_heads * shape.head_dim
        return qkv.split((q_dim, kv_dim, kv_dim), dim=-1)  # type: ignore[return-value]
    q, k, v = _matmuls(x, tensors, _QKV_PARTS, buffer)
    return q, k, v


def _matmuls(
    x: torch.Tensor, tensors: Mapping[str, torch.Tensor], names: tuple[str, ...], buffer: Workspace
) -> list[torch.Tensor]:
    """Matrices over the same x that are not fused: one call when all have a form."""
    parts = [parts_of(tensors, f"{n}.weight") for n in names]
    if all(p is not None for p in parts):
        biases = [tensors.get(f"{n}.bias") for n in names]
        return linear_many(
            x, parts=[p for p in parts if p is not None], biases=biases, buffer=buffer
        )
    return [_matmul(x, tensors, n, buffer) for n in names]


_QKV_PARTS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")
_GATE_UP_PARTS = ("mlp.gate_proj", "mlp.up_proj")


def _mlp(x: torch.Tensor, tensors: Mapping[str, torch.Tensor], buffer: Workspace) -> torch.Tensor:
    if parts_of(tensors, f"{GATE_UP}.weight") is not None:
        gate, up = _matmul(x, tensors, GATE_UP, buffer).chunk(2, dim=-1)
    else:
        gate, up = _matmuls(x, tensors, _GATE_UP_PARTS, buffer)
    return _matmul(F.silu(gate).mul_(up), tensors, "mlp.down_proj", buffer)


def layer(
    hidden: torch.Tensor,  # (B, T, H)
    *,
    tensors: Mapping[str, torch.Tensor],
    shape: Shape,
    rotary: tuple[torch.Tensor, torch.Tensor],  # cos, sin: (B, T, head_dim)
    kv: object,  # the cache's layer (a transformers DynamicLayer)
    mask: AttentionMask,
    buffer: Workspace,
) -> torch.Tensor:
    b, t, _ = hidden.shape
    x = rms_norm(hidden, tensors["input_layernorm.weight"], eps=shape.eps)
    q, k, v = _qkv(x, tensors, shape, buffer)
    cos, sin = (r.unsqueeze(1) for r in rotary)
    q = _rotate(q.view(b, t, shape.heads, shape.head_dim).transpose(1, 2), cos, sin)
    k = _rotate(k.view(b, t, shape.kv_heads, shape.head_dim).transpose(1, 2), cos, sin)
    v = v.reshape(b, t, shape.kv_heads, shape.head_dim).transpose(1, 2)
    keys, values = append_kv(kv, k, v)
    allowed, causal = mask.allowed, mask.causal
    group = shape.heads // shape.kv_heads
    if t == 1 and group > 1:
        # One new position: a KV head's group of query heads are its queries, so SDPA
        # reads each KV head once instead of expanding it per query head (the 1.5B's
        # step: 0.51 against 0.83 ms a layer at a 1,641-token context, one thread).
        grouped = q.reshape(b, shape.kv_heads, group, shape.head_dim)
        out = F.scaled_dot_product_attention(
            grouped, keys, values, attn_mask=allowed, scale=shape.head_dim**-0.5
        )  # (B, kv_heads, group, head_dim)
        out = out.reshape(b, 1, shape.heads * shape.head_dim)
    else:
        native = (
            prefill_attention.attend(
                q,
                keys,
                values,
                padding=mask.padding,
                scale=shape.head_dim**-0.5,
                threads=buffer.threads,
            )
            if t > 1
            else None
        )
        if native is not None:
            out = native
        else:
            out = F.scaled_dot_product_attention(
                q,
                keys,
                values,
                attn_mask=allowed,
                is_causal=causal,
                scale=shape.head_dim**-0.5,
                enable_gqa=group > 1,
            )  # (B, heads, T, head_dim)
            out = out.transpose(1, 2).reshape(b, t, shape.heads * shape.head_dim)
    hidden = hidden + _matmul(out, tensors, "self_attn.o_proj", buffer)
    x = rms_norm(hidden, tensors["post_attention_layernorm.weight"], eps=shape.eps)
    return hidden + _mlp(x, tensors, buffer)


def head(
    hidden: torch.Tensor,
    *,
    tensors: Mapping[str, torch.Tensor],
    eps: float,
    buffer: Workspace,
) -> torch.Tensor:
    """Final norm and LM head: logits (B, T, V)."""
    x = rms_norm(hidden, tensors["norm.weight"], eps=eps)
    return _matmul(x, tensors, "lm_head", buffer)


def embed_rows(
    ids: torch.Tensor, *, raw: torch.Tensor, tensor: GGUFTensor, dtype: torch.dtype
) -> torch.Tensor:
    """The embedding rows of `ids` (B, T) decoded from the matrix's stored bytes alone
    (a lookup reads a few rows: the matrix is never decoded whole)."""
    rows, cols = tensor.shape
    per_row = raw.numel() // rows
    flat = ids.reshape(-1)
    picked = raw.view(rows, per_row).index_select(0, flat)
    values = dequantize(picked.reshape(-1), qtype=tensor.qtype, shape=(flat.numel(), cols))
    return values.to(dtype).reshape(*ids.shape, cols)
