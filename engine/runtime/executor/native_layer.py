"""A decode step's layer computed by the native library in two calls.

engine/runtime/executor/decoder.py `layer` is a few dozen tensor operations a layer; for a
decode step's one new position each costs more in Python and dispatch than in arithmetic
(a profile of the 1.5B's step on one thread: 55% in the kernels' dot products, most of the
rest in the small operations between them). Here the same arithmetic runs in
engine/runtime/executor/native/ggml_dot.c: `rd_layer_qkv` (norm, q/k/v and their biases,
rotary embeddings), then the caller appends the new key and value to the cache exactly as
`decoder.append_kv` does, then `rd_layer_rest` (attention over the KV buffers, output
projection, residual, norm, SiLU-gated MLP, residual).

It computes a decode step's rows (up to kernel_forms.NATIVE_ROWS sequences, one new
position each, left padding masked) in float32 where every matrix of the layer is in
the "ggml" form; anything else returns None and the Python layer computes it. Tested
against `decoder.layer` (tests/engine/runtime/executor/test_native_layer.py).
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from engine.runtime.executor import decoder
from engine.runtime.executor.ggml_native import Library
from engine.runtime.executor.kernel_forms import NATIVE_ROWS, Parts, parts_of

MATRICES = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)
_BIASES = ("self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias")
_COUNT = len(MATRICES)
_P = ctypes.c_void_p
# A layer's spec: the tensors' mapping it was made from, the spec, the tensors it points to.
_Made = tuple[Mapping[str, torch.Tensor], "LayerSpec", list[torch.Tensor]]
_I64 = ctypes.c_int64


class LayerSpec(ctypes.Structure):
    """ggml_dot.c's `layer_t`: a layer's shape and where its tensors are."""

    _fields_ = [
        ("hidden", _I64),
        ("heads", _I64),
        ("kv_heads", _I64),
        ("head_dim", _I64),
        ("inter", _I64),
        ("eps", ctypes.c_float),
        ("attn_norm", _P),
        ("ffn_norm", _P),
        ("bias", _P * 3),
        ("types", ctypes.c_int * _COUNT),
        ("ws", _P * _COUNT),
        ("rows", _I64 * _COUNT),
        ("row_bytes", _I64 * _COUNT),
        ("order", _P * _COUNT),
    ]


@dataclass(frozen=True, kw_only=True)
class StepInputs:
    """What every layer of one decode step shares, in the layout the library reads: made
    once a step (`step_inputs`), not once a layer."""

    cos: torch.Tensor  # (B, head_dim) float32
    sin: torch.Tensor
    visible: torch.Tensor | None  # (B, past + 1) uint8, 0 where a row may not look


def step_inputs(
    *,
    rotary: tuple[torch.Tensor, torch.Tensor],  # cos, sin: (B, 1, head_dim)
    allowed: torch.Tensor | None,  # (B, 1, 1, past + 1) bool, or None: all visible
) -> StepInputs:
    rows = rotary[0].shape[0]
    cos, sin = (r.reshape(rows, -1).float().contiguous() for r in rotary)
    visible = None if allowed is None else allowed.reshape(rows, -1).to(torch.uint8).contiguous()
    return StepInputs(cos=cos, sin=sin, visible=visible)


class NativeLayers:
    """The native layer step of one model: each layer's LayerSpec made once while the
    layer's tensors stay the same (resident layers: every step), the tensors it points
    into kept alive beside it."""

    def __init__(self, *, lib: Library, shape: decoder.Shape, threads: int) -> None:
        self._lib = lib
        self._shape = shape
        self._threads = threads
        # layer -> (the tensors' mapping the spec was made from, the spec, what it points to)
        self._specs: dict[int, _Made] = {}
        # the specs' pointer array `step_layers` hands over, keyed by the specs it holds
        self._pointers: tuple[tuple[int, ...], ctypes.Array] | None = None

    def forget(self) -> None:
        """Drop every spec (the model's tensors are being replaced or released)."""
        self._specs.clear()
        self._pointers = None

    def _made(self, index: int, tensors: Mapping[str, torch.Tensor], *, keep: bool) -> _Made | None:
        """Layer `index`'s spec for these tensors, made again only when the tensors are
        new, and kept for the next step when `keep`; None where the layer is not in the
        native form. The caller holds the returned tuple (its tensors) for the call."""
        made = self._specs.get(index)
        if made is None or made[0] is not tensors:
            spec_held = _spec(tensors, shape=self._shape)
            if spec_held is None:
                return None
            made = (tensors, *spec_held)
            if keep:
                self._specs[index] = made
            else:
                self._specs.pop(index, None)
        return made

    def step_layers(
        self,
        hidden: torch.Tensor,  # (B, 1, H) float32
        *,
        layers: Sequence[Mapping[str, torch.Tensor]],
        inputs: StepInputs,
        kvs: Sequence[object],
    ) -> torch.Tensor | None:
        """Every layer of a decode step in one native call (`rd_layers_step`), for
        layers that stay resident: the output for B rows, or None (a layer not
        computable here, or caches of different lengths: `step` a layer at a time;
        nothing has been written to the caches)."""
        if not _takes(hidden):
            return None
        b = hidden.shape[0]
        specs: list[LayerSpec] = []
        for index, tensors in enumerate(layers):
            made = self._made(index, tensors, keep=True)
            if made is None:
                return None
            specs.append(made[1])
        s = self._shape
        reserved = [
            decoder.reserve_kv(
                kv, like=hidden, rows=b, heads=s.kv_heads, head_dim=s.head_dim, count=1
            )
            for kv in kvs
        ]
        past = reserved[0][2]
        if any(r[2] != past for r in reserved):
            return None
        visible = inputs.visible
        if visible is not None and visible.shape[1] != past + 1:
            raise ValueError("the attention mask and the KV buffers disagree in length")
        key = tuple(id(spec) for spec in specs)
        if self._pointers is None or self._pointers[0] != key:
            self._pointers = (
                key,
                (ctypes.POINTER(LayerSpec) * len(specs))(*(ctypes.pointer(spec) for spec in specs)),
            )
        out = hidden.reshape(b, -1).clone()
        rc = self._lib.layers_step(
            self._pointers[1],
            rows=b,
            h=out,
            cos=inputs.cos,
            sin=inputs.sin,
            keys=[r[0] for r in reserved],
            values=[r[1] for r in reserved],
            past=past,
            visible=visible,
            threads=self._threads,
        )
        if rc != 0:
            raise ValueError(f"the native layers refused the step (code {rc})")
        for kv, (keys, values, _) in zip(kvs, reserved, strict=True):
            decoder.commit_kv(kv, keys=keys, values=values, length=past + 1)
        return out.view(b, 1, -1)

    def step(
        self,
        index: int,
        hidden: torch.Tensor,  # (B, 1, H) float32
        *,
        tensors: Mapping[str, torch.Tensor],
        inputs: StepInputs,
        kv: object,
        keep: bool,
    ) -> torch.Tensor | None:
        """The layer's output for B rows of one new position each, or None (not
        computable here: the Python layer computes it, nothing has been written to the
        cache). `keep`: the tensors stay the same at the next step (a resident layer),
        so the spec is kept for it."""
        if not _takes(hidden):
            return None
        b = hidden.shape[0]
        made = self._made(index, tensors, keep=keep)
        if made is None:
            return None
        spec = made[1]
        s = self._shape
        q = torch.empty(b, s.heads * s.head_dim)
        k = torch.empty(b, 1, s.kv_heads, s.head_dim)
        v = torch.empty(b, 1, s.kv_heads, s.head_dim)
        h = hidden.reshape(b, -1).contiguous()
        rc = self._lib.layer_qkv(
            spec, rows=b, h=h, cos=inputs.cos, sin=inputs.sin, q=q, k=k, v=v, threads=self._threads
        )
        if rc != 0:
            raise ValueError(f"the native layer refused layer {index} (code {rc})")
        keys, values = decoder.append_kv(kv, k.transpose(1, 2), v.transpose(1, 2))
        if not _kv_ok(keys, values, head_dim=s.head_dim, rows=b):
            raise ValueError("the KV buffers are not laid out as the native layer reads them")
        visible = inputs.visible
        if visible is not None and visible.shape[1] != keys.shape[-2]:
            raise ValueError("the attention mask and the KV buffers disagree in length")
        out = h.clone()
        rc = self._lib.layer_rest(
            spec,
            rows=b,
            h=out,
            q=q,
            keys=keys,
            values=values,
            visible=visible,
            threads=self._threads,
        )
        if rc != 0:
            raise ValueError(f"the native layer refused layer {index} (code {rc})")
        return out.view(b, 1, -1)


def _takes(hidden: torch.Tensor) -> bool:
    """A decode step's hidden values the native layer computes: float32, one new
    position a row, at most NATIVE_ROWS rows."""
    return hidden.dtype == torch.float32 and hidden.shape[1] == 1 and hidden.shape[0] <= NATIVE_ROWS


def _kv_ok(keys: torch.Tensor, values: torch.Tensor, *, head_dim: int, rows: int) -> bool:
    return (
        keys.shape[0] == rows
        and all(
            t.dtype == torch.float32 and t.stride(-1) == 1 and t.stride(-2) == head_dim
            for t in (keys, values)
        )
        and keys.stride() == values.stride()
    )


def _spec(
    tensors: Mapping[str, torch.Tensor], *, shape: decoder.Shape
) -> tuple[LayerSpec, list[torch.Tensor]] | None:
    """The layer's LayerSpec and the tensors it points into, or None when a matrix is not
    in the "ggml" form, a tensor is not float32, or the layer has a part this step does
    not compute (an output or MLP bias)."""
    if "self_attn.o_proj.bias" in tensors or "mlp.down_proj.bias" in tensors:
        return None
    parts: list[Parts] = []
    for name in MATRICES:
        p = parts_of(tensors, f"{name}.weight")
        if p is None or p.form != "ggml":
            return None
        parts.append(p)
    norms = [tensors.get("input_layernorm.weight"), tensors.get("post_attention_layernorm.weight")]
    biases = [tensors.get(b) for b in _BIASES]
    floats = [t for t in [*norms, *biases] if t is not None]
    if any(n is None for n in norms) or any(
        t.dtype != torch.float32 or not t.is_contiguous() for t in floats
    ):
        return None
    hidden = parts[0].cols
    inter = parts[4].values.shape[0]
    heads_out = shape.heads * shape.head_dim
    kv_out = shape.kv_heads * shape.head_dim
    want_rows = [heads_out, kv_out, kv_out, hidden, inter, inter, hidden]
    want_cols = [hidden, hidden, hidden, heads_out, hidden, hidden, inter]
    for p, rows, cols in zip(parts, want_rows, want_cols, strict=True):
        if p.values.shape[0] != rows or p.cols != cols:
            return None
    spec = LayerSpec()
    spec.hidden, spec.heads, spec.kv_heads = hidden, shape.heads, shape.kv_heads
    spec.head_dim, spec.inter, spec.eps = shape.head_dim, inter, shape.eps
    spec.attn_norm, spec.ffn_norm = norms[0].data_ptr(), norms[1].data_ptr()  # type: ignore[union-attr]
    held: list[torch.Tensor] = [t for t in floats]
    for i, b in enumerate(biases):
        spec.bias[i] = b.data_ptr() if b is not None else None
    for i, p in enumerate(parts):
        spec.types[i] = p.qtype
        spec.ws[i] = p.values.data_ptr()
        spec.rows[i] = p.values.shape[0]
        spec.row_bytes[i] = p.values.stride(0)
        order = p.gguf_rows
        if order is not None:
            order = order.to(torch.int64).contiguous()
            held.append(order)
        spec.order[i] = order.data_ptr() if order is not None else None
        held.append(p.values)
    return spec, held
