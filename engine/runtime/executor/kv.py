"""The KV cache split across tiers (RAGDoll §4.4, FlexGen's cpu_cache_compute, NEO).

The Placement gives the KV share per tier; here that becomes a number of layers whose
KV lives on the host (RAM) while the others stay on the compute device. A host layer's
attention either

- "copy": copies the layer's KV to the compute device for the attention (the GPU does
  all the arithmetic; the link carries the whole KV every step), or
- "cpu_compute": runs the attention where the KV is, on the CPU (the link carries the
  query and the output only; the CPU does the attention's arithmetic).

Which is faster depends on the link, the CPU and the context length, so `choose_kv_mode`
times both on the shapes at hand. On a machine without a GPU the compute device is the
CPU: both modes are the same computation and no bytes move.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import torch
from transformers import DynamicCache, PretrainedConfig
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.modeling_utils import AttentionInterface

from engine.runtime.planner.placement import Placement

KvMode = Literal["copy", "cpu_compute"]
TIERED_ATTENTION = "ragdoll_tiered"


def host_kv_layers(*, placement: Placement, layers: int) -> int:
    """How many layers' KV live on the host: the Placement's share of KV off the
    compute tier, rounded to whole layers (the last layers go first)."""
    kv = placement.kv
    if kv.total <= 0 or placement.compute_tier != "gpu" or placement.memory_model != "discrete":
        # CPU-only or unified memory: the host *is* the compute tier. KV placed on disk
        # there stays in RAM (a disk tier for KV is not built).
        return 0
    off = (kv.cpu + kv.disk) / kv.total
    return min(layers, round(off * layers))


class HostKV:
    """Wraps a cache layer's `update`: the layer's KV is kept on `host`, and `update`
    returns it on `compute` ("copy") or where it is ("cpu_compute")."""

    def __init__(
        self, *, update: Any, host: torch.device, compute: torch.device, mode: KvMode
    ) -> None:
        self._update = update
        self.host = host
        self.compute = compute
        self.mode = mode

    def __call__(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self._update(
            key_states.to(self.host), value_states.to(self.host), *args, **kwargs
        )
        if self.mode == "copy":
            return keys.to(self.compute, non_blocking=True), values.to(
                self.compute, non_blocking=True
            )
        return keys, values


def tier_cache(
    cache: DynamicCache,
    *,
    host_layers: int,
    host: torch.device,
    compute: torch.device,
    mode: KvMode,
) -> DynamicCache:
    """Make the last `host_layers` layers of `cache` keep their KV on `host` (the layer's
    own bookkeeping — crop, batch selection, sliding window — is untouched)."""
    n = len(cache.layers)
    for layer in cache.layers[n - host_layers :] if host_layers else []:
        layer.update = HostKV(update=layer.update, host=host, compute=compute, mode=mode)
    return cache


def is_host_layer(layer: object) -> bool:
    return isinstance(getattr(layer, "update", None), HostKV)


def tiered_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, Any]:
    """SDPA attention that runs where the KV is: for a host-resident layer in
    "cpu_compute" mode the query and mask go to the host and the output comes back."""
    if key.device == query.device:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    q = query.to(key.device)
    mask = attention_mask.to(key.device) if attention_mask is not None else None
    out, weights = sdpa_attention_forward(module, q, key, value, mask, **kwargs)
    return out.to(query.device, non_blocking=True), weights


def use_tiered_attention(config: PretrainedConfig) -> None:
    """Route the model's attention through `tiered_attention` (same SDPA arithmetic, and
    SDPA's masks: an attention name without a mask function would get no mask at all)."""
    AttentionInterface.register(TIERED_ATTENTION, tiered_attention)
    AttentionMaskInterface.register(TIERED_ATTENTION, sdpa_mask)
    config._attn_implementation = TIERED_ATTENTION


def choose_kv_mode(
    *,
    compute: torch.device,
    batch: int,
    kv_heads: int,
    heads: int,
    head_dim: int,
    context: int,
    dtype: torch.dtype = torch.float16,
    repeats: int = 3,
) -> tuple[KvMode, dict[str, float]]:
    """Time one decode step's attention over a host-resident layer both ways and pick the
    faster. Without a separate compute device there is nothing to choose: "copy"."""
    if compute.type == "cpu":
        return "copy", {}
    host = torch.device("cpu")
    k = torch.randn(batch, kv_heads, context, head_dim, dtype=dtype).pin_memory()
    v = torch.randn_like(k).pin_memory()
    q = torch.randn(batch, heads, 1, head_dim, dtype=dtype, device=compute)
    groups = heads // kv_heads

    def attend(qq: torch.Tensor, kk: torch.Tensor, vv: torch.Tensor) -> torch.Tensor:
        kk = kk.repeat_interleave(groups, dim=1)
        vv = vv.repeat_interleave(groups, dim=1)
        return torch.nn.functional.scaled_dot_product_attention(qq, kk, vv)

    def copy() -> None:
        attend(q, k.to(compute, non_blocking=True), v.to(compute, non_blocking=True))

    def on_host() -> None:
        # What tiered_attention does: the KV's own dtype, where the KV is.
        attend(q.to(host), k, v).to(compute)

    timings: dict[str, float] = {}
    for name, fn in (("copy", copy), ("cpu_compute", on_host)):
        fn()  # warm-up
        _sync(compute)
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        _sync(compute)
        timings[name] = (time.perf_counter() - start) / repeats
    mode: KvMode = "copy" if timings["copy"] <= timings["cpu_compute"] else "cpu_compute"
    return mode, timings


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
