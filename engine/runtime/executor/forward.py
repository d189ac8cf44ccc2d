"""Layer-by-layer forward of a Hugging Face causal LM whose weights stream from tiers.

The model's modules are built on the meta device (no memory); every call passes the
unit's tensors with `torch.func.functional_call`, so a module never owns weights and a
streamed layer holds nothing once its call returns. Masks, rotary embeddings and the KV
cache are those of the installed transformers (5.x), so the arithmetic is the library's own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache, PretrainedConfig

from engine.runtime.executor import decoder, ggml_native, hf_modules
from engine.runtime.executor.checkpoint import EMBED, HEAD, layer_unit
from engine.runtime.executor.kernel_forms import native_step, single_torch_thread
from engine.runtime.executor.kv import (
    KvMode,
    choose_kv_mode,
    host_kv_layers,
    tier_cache,
    use_tiered_attention,
)
from engine.runtime.executor.native_layer import NativeLayers, step_inputs
from engine.runtime.executor.packed import (
    KERNEL_MODES,
    PER_MATRIX,
    DecodeMode,
    MatrixBinding,
    bind_matrices,
    bound,
    matrix_decoding,
)
from engine.runtime.executor.prefetch import Prefetcher
from engine.runtime.executor.weights import WeightStore, unit_homes
from engine.runtime.models.process_wide import one_at_a_time
from engine.runtime.planner.demotion import demoted
from engine.runtime.planner.model_spec import PREFILL_CHUNK_TOKENS
from engine.runtime.planner.placement import Placement

Phase = Literal["prefill", "decode"]

# Attention on a GPU, without cuDNN's: cuDNN builds a plan for each new key length, and
# every decode step is one (2.4 ms of CPU a call on an H200, 63% of a SmolLM2-sized
# step; docs/executor.md, "GPU form"). The others compute the same attention.
GPU_ATTENTION = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)


def compute_device(placement: Placement) -> torch.device:
    if placement.compute_tier == "gpu":
        if placement.memory_model == "unified":
            return torch.device("mps")
        return torch.device("cuda")
    return torch.device("cpu")


# The decoder families whose forward is exactly embed -> layers -> norm -> head, as
# StreamingModel runs it (tested against transformers' own forward).
ARCHITECTURES = frozenset({"llama", "qwen2", "mistral"})


class StreamingModel:
    """One model under one Placement. Not thread-safe: one forward at a time."""

    def __init__(
        self,
        *,
        model_dir: Path,
        placement: Placement,
        dtype: torch.dtype | None = None,
        device: torch.device | None = None,
        evict_after_read: bool = False,
        fault_hook: Callable[[str], None] | None = None,
        kv_host_layers: int | None = None,
        kv_mode: KvMode | None = None,
        compressed: bool = True,
        decode: DecodeMode | None = None,
        repack_cache: Path | None = None,
        lean: bool = True,
    ) -> None:
        """`fault_hook(unit)` runs before each unit computes (tests inject faults there).
        `kv_host_layers` / `kv_mode` override the Placement's KV split and the measured
        choice of where host-resident KV is attended to. `compressed`: layers stored in
        fewer bytes than the compute dtype stay so in every tier and are decoded per use
        (False decodes them once at load: the reference the tests compare with). `decode`:
        "layer" decodes a packed layer whole one layer ahead, "matrix" one weight matrix at
        a time just before its matmul (same values; for tight memory), "kernel" computes
        quantized matrices in the forms of torch's CPU kernels (engine/runtime/executor/
        kernel_forms.py); None chooses from the device, the formats and the placement
        (packed.choose_decode). `repack_cache`: the folder where the kernel forms are kept
        once made (engine/runtime/executor/repacked.py: resident layers are mapped from it, streamed
        ones read from it; None makes them at load, and streamed ones at every use). `lean=False`:
        the Hugging Face modules compute every layer, never engine/runtime/executor/decoder.py
        (the reference the decoder is tested against)."""
        if len(placement.layer_tiers) == 0:
            raise ValueError("placement has no layers")
        config = AutoConfig.from_pretrained(model_dir)
        if config.model_type not in ARCHITECTURES:
            # Others (Gemma's scaled embeddings and soft-capped logits, ...) compute more
            # than embed -> layers -> norm -> head: run here they would answer nonsense.
            raise ValueError(
                f"the layer-streaming executor runs {', '.join(sorted(ARCHITECTURES))} "
                f"models; this one is {config.model_type!r}"
            )
        if config.num_hidden_layers != len(placement.layer_tiers):
            raise ValueError(
                f"placement is for {len(placement.layer_tiers)} layers, "
                f"the model has {config.num_hidden_layers}"
            )
        self.config: PretrainedConfig = config
        self.device = device or compute_device(placement)
        self.dtype = dtype or _config_dtype(config)
        self.placement = placement
        with one_at_a_time(), torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, dtype=self.dtype)
        # An override (tests, benchmarks) holds until an out-of-memory moves KV down.
        self._kv_fixed = kv_host_layers is not None
        self.kv_host_layers = (
            kv_host_layers
            if kv_host_layers is not None
            else host_kv_layers(placement=placement, layers=config.num_hidden_layers)
        )
        self.kv_mode: KvMode = kv_mode or self._measured_kv_mode()
        self._attn_config = model.config
        if self.kv_host_layers:
            # Attention runs where each layer's KV is (the same SDPA arithmetic).
            use_tiered_attention(model.config)
        self._layers = list(model.model.layers)
        self._head = hf_modules.Head(norm=model.model.norm, lm_head=model.lm_head)
        # Rotary tables are computed from the config, not stored: build them for real.
        self._rotary: nn.Module = type(model.model.rotary_emb)(config=config).to(self.device)
        self._layer_types: list[str] = hf_modules.layer_types(config)
        # engine/runtime/executor/decoder.py computes the layers where it can: on a CPU, in the
        # kernel forms (the store then holds the layers as that module reads them).
        kernel_lean = lean and self.device.type == "cpu" and compressed and decoder.runs(config)
        self.store = WeightStore(
            model_dir=model_dir,
            homes=unit_homes(placement),
            compute_tier=placement.compute_tier,
            device=self.device,
            dtype=self.dtype,
            tied_head=bool(getattr(config, "tie_word_embeddings", False)),
            evict_after_read=evict_after_read,
            compressed=compressed,
            decode=decode,
            repack_cache=repack_cache,
            lean=kernel_lean,
        )
        self._lean = kernel_lean and self.store.decode in KERNEL_MODES
        self._shape = decoder.Shape.of(config)
        lib = ggml_native.library() if self._lean else None
        self._native_layers = (
            NativeLayers(lib=lib, shape=self._shape, threads=self.store.workspace.threads)
            if lib is not None and not self.store.workspace.reference
            else None
        )
        self._order = [EMBED] + [layer_unit(i) for i in range(len(self._layers))] + [HEAD]
        self._packed = any(self.store.is_packed(u) for u in self._order)
        # A model held decoded is computed by the decoder too, on any device: plain torch
        # operations instead of the Hugging Face modules' per-call parameter binding, and
        # the KV written in place instead of concatenated at every step (docs/executor.md,
        # "GPU form"). Not with KV on the host: tiered attention is the modules' own.
        self._dense = lean and decoder.runs(config) and not self._packed and not self._lean
        self._fault_hook = fault_hook
        # Resident packed units' bindings (packed.bind_matrices), reused every step.
        self._bindings: dict[str, tuple[dict[str, torch.Tensor], MatrixBinding]] = {}
        self.forward_calls = 0  # instrumentation: forwards run by this model
        self.prefetcher: Prefetcher | None = None
        self._start_prefetcher()

    def _start_prefetcher(self) -> None:
        if self.prefetcher is not None:
            self.prefetcher.close()
            self.prefetcher = None
        streamed = [u for u in self._order if self.store.is_streamed(u)]
        if streamed:
            self.prefetcher = Prefetcher(
                store=self.store,
                units=streamed,
                depth=self.placement.prefetch_depth_prefill,
                device=self.device,
            )

    def apply_placement(self, placement: Placement) -> int:
        """Run under `placement` from the next forward on; only units whose home changed
        move (a demoted unit's memory is freed now, a promoted one is read when first
        needed). Returns how many units changed home. Call between forwards."""
        if not self._kv_fixed:
            self._set_host_kv(host_kv_layers(placement=placement, layers=len(self._layers)))
        if placement.layer_tiers == self.placement.layer_tiers and (
            placement.embed_tier,
            placement.head_tier,
        ) == (self.placement.embed_tier, self.placement.head_tier):
            self.placement = placement  # depths, KV or batch limits only
            return 0
        if len(placement.layer_tiers) != len(self._layers):
            raise ValueError("a placement for another model")
        if placement.compute_tier != self.placement.compute_tier:
            raise ValueError("the compute tier cannot change under a loaded model")
        if self.prefetcher is not None:
            # Stop the copy thread before the homes change: it reads the store's homes and
            # host copies (and, on CUDA, copies from them) while set_homes rewrites them.
            self.prefetcher.close()
            self.prefetcher = None
        moved = self.store.set_homes(unit_homes(placement))
        self._bindings.clear()  # they hold the old tensors
        if self._native_layers is not None:
            self._native_layers.forget()  # so do the native layers' specs
        self.placement = placement
        self._start_prefetcher()  # the streamed units are another set now
        return moved

    def degrade(self) -> Placement | None:
        """Free compute-tier memory after an out-of-memory and return the placement it
        runs under now (None when nothing is left to move): on a GPU, half of the KV
        layers still there move to the host first; then the later half of the resident
        layers one tier down (engine/runtime/planner/demotion.py decides which). The caller
        hands the result to the PlacementOwner."""
        step = demoted(
            self.placement,
            kv_host_layers=self.kv_host_layers,
            kv_first=self.device.type == "cuda",
        )
        if step is None:
            return None
        if step.kv_host_layers != self.kv_host_layers:
            # The caller rebuilds the cache from the checkpoint, so moving KV costs
            # nothing now, and a KV byte on the host costs less per step than a weight
            # byte (it is attended to where it is, or copied once per step).
            self._set_host_kv(step.kv_host_layers)
            self.placement = step.placement
            return step.placement
        self.apply_placement(step.placement)
        return step.placement

    def _set_host_kv(self, layers: int) -> None:
        """From the next cache on, the last `layers` layers keep their KV on the host."""
        if layers == self.kv_host_layers:
            return
        self.kv_host_layers = layers
        if layers:
            use_tiered_attention(self._attn_config)

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        eos = self.config.eos_token_id
        if eos is None:
            return ()
        return tuple(eos) if isinstance(eos, list | tuple) else (int(eos),)

    def new_cache(self) -> DynamicCache:
        cache = DynamicCache(config=self.config)
        if self.kv_host_layers:
            tier_cache(
                cache,
                host_layers=self.kv_host_layers,
                host=torch.device("cpu"),
                compute=self.device,
                mode=self.kv_mode,
            )
        return cache

    def _measured_kv_mode(self) -> KvMode:
        if not self.kv_host_layers or self.device.type != "cuda":
            return "copy"
        c = self.config
        heads = int(c.num_attention_heads)
        mode, _ = choose_kv_mode(
            compute=self.device,
            batch=max(1, self.placement.batch),
            kv_heads=int(getattr(c, "num_key_value_heads", None) or heads),
            heads=heads,
            head_dim=int(getattr(c, "head_dim", None) or c.hidden_size // heads),
            context=max(1, self.placement.context_tokens),
            dtype=self.dtype,
        )
        return mode

    @torch.inference_mode()
    def forward(
        self,
        *,
        input_ids: torch.Tensor,  # (B, T) new tokens
        attention_mask: torch.Tensor,  # (B, past + T), 0 at left padding
        position_ids: torch.Tensor,  # (B, T)
        cache: DynamicCache,
        phase: Phase,
        last_only: bool = True,
        tail: int | None = None,
    ) -> torch.Tensor:
        """Logits (B, 1, V) for the last position, (B, T, V) with last_only=False, or
        (B, tail, V) for the last `tail` positions. `cache` grows by T positions."""
        if self.prefetcher is not None:
            depth = (
                self.placement.prefetch_depth_prefill
                if phase == "prefill"
                else self.placement.prefetch_depth_decode
            )
            # A packed resident layer is decoded while the one before it computes.
            self.prefetcher.set_depth(max(depth, 1 if self._packed else 0))
        self.forward_calls += 1
        # A step of a few rows is the kernels' work and many small operations: those on
        # one torch thread, the kernels on every core (kernel_forms.single_torch_thread).
        few_rows = self._lean and native_step(input_ids.numel())
        gpu = self.device.type == "cuda"
        try:
            with (
                single_torch_thread() if few_rows else contextlib.nullcontext(),
                sdpa_kernel(list(GPU_ATTENTION)) if gpu else contextlib.nullcontext(),
            ):
                return self._forward(
                    input_ids=input_ids.to(self.device),
                    attention_mask=attention_mask.to(self.device),
                    position_ids=position_ids.to(self.device),
                    cache=cache,
                    tail=tail if tail is not None else (1 if last_only else None),
                )
        except BaseException:
            # A forward cut short leaves the copy thread mid-cycle: start it afresh so the
            # next forward (a retry from the checkpoint) asks in order again.
            self._start_prefetcher()
            raise

    def _forward(
        self,
        *,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        cache: DynamicCache,
        tail: int | None,
    ) -> torch.Tensor:
        if self._lean or (self._dense and not self.kv_host_layers):
            return self._lean_forward(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                cache=cache,
                tail=tail,
            )
        hidden = self._with_unit(EMBED, lambda t: self._embed_rows(input_ids, t))  # (B, T, H)
        masks = hf_modules.masks(
            hidden,
            config=self.config,
            kinds=self._layer_types,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=cache,
        )
        rotary = self._rotary(hidden, position_ids)  # (cos, sin), each (B, T, head_dim)
        for i, layer in enumerate(self._layers):
            hidden = self._call(
                layer_unit(i),
                layer,
                hidden,
                attention_mask=masks[self._layer_types[i]],
                position_embeddings=rotary,
                position_ids=position_ids,
                past_key_values=cache,
                use_cache=True,
            )
        if tail is not None:
            # The head over every position costs B·T·V: only the positions read.
            hidden = hidden[:, -tail:, :]
        return self._call(HEAD, self._head, hidden)  # (B, T', V)

    def _lean_forward(
        self,
        *,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        cache: DynamicCache,
        tail: int | None,
    ) -> torch.Tensor:
        """`_forward` by engine/runtime/executor/decoder.py on the units' tensors as held. A
        prompt longer than PREFILL_CHUNK_TOKENS goes through each layer in chunks (the
        layer's matrices decoded once for all of them): a chunk's activations, not the
        prompt's, are the workspace (engine/runtime/planner/model_spec.py)."""
        workspace = self.store.workspace
        hidden = self._with_unit(EMBED, lambda t: self._embed_rows(input_ids, t))  # (B, T, H)
        cos, sin = self._rotary(hidden, position_ids)  # each (B, T, head_dim)
        queries = input_ids.shape[1]
        past = attention_mask.shape[1] - queries
        chunks = [
            (start, min(queries, start + PREFILL_CHUNK_TOKENS))
            for start in range(0, queries, PREFILL_CHUNK_TOKENS)
        ]
        masks = [
            decoder.attention_mask(
                mask=attention_mask[:, : past + stop], queries=stop - start, past=past + start
            )
            for start, stop in chunks
        ]

        # A decode step (one new position a row): each layer in the native library's
        # two calls.
        native = self._native_layers if queries == 1 and not masks[0].causal else None
        shared = step_inputs(rotary=(cos, sin), allowed=masks[0].allowed) if native else None

        def run_layer(i: int, tensors: dict[str, torch.Tensor], h: torch.Tensor) -> torch.Tensor:
            if native is not None and shared is not None:
                out = native.step(
                    i,
                    h,
                    tensors=tensors,
                    inputs=shared,
                    kv=cache.layers[i],
                    keep=not self.store.is_streamed(layer_unit(i)),
                )
                if out is not None:
                    return out
            outs = [
                decoder.layer(
                    h[:, start:stop],
                    tensors=tensors,
                    shape=self._shape,
                    rotary=(cos[:, start:stop], sin[:, start:stop]),
                    kv=cache.layers[i],
                    mask=mask,
                    buffer=workspace,
                )
                for (start, stop), mask in zip(chunks, masks, strict=True)
            ]
            return outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)

        # A decode step whose layers all stay resident: every layer in one native call.
        stepped = (
            native.step_layers(
                hidden,
                layers=[self.store.resident(layer_unit(i)) for i in range(len(self._layers))],
                inputs=shared,
                kvs=[cache.layers[i] for i in range(len(self._layers))],
            )
            if native is not None
            and shared is not None
            and self._fault_hook is None
            and not any(self.store.is_streamed(layer_unit(i)) for i in range(len(self._layers)))
            else None
        )
        if stepped is not None:
            hidden = stepped
        # A layer kept decoded over the chunks needs RAM the planner gives to layers
        # instead when any streams from the disk (model_spec.kept_layer_bytes).
        keep = len(chunks) > 1 and not self.store.streams_from_disk()
        for i in range(len(self._layers) if stepped is None else 0):
            with workspace.keeping_decoded() if keep else contextlib.nullcontext():
                hidden = self._with_unit(layer_unit(i), lambda t, i=i, h=hidden: run_layer(i, t, h))
        if tail is not None:
            hidden = hidden[:, -tail:, :]
        return self._with_unit(
            HEAD,
            lambda t: decoder.head(hidden, tensors=t, eps=self._shape.eps, buffer=workspace),
        )

    def _embed_rows(self, ids: torch.Tensor, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.store.is_stored_only(EMBED):
            source = next(s for s in self.store.sources_of(EMBED) if s.param == "weight")
            assert source.gguf is not None
            return decoder.embed_rows(
                ids, raw=tensors["weight"], tensor=source.gguf, dtype=self.dtype
            )
        return F.embedding(ids, tensors["weight"])

    def _with_unit(
        self, unit: str, compute: Callable[[dict[str, torch.Tensor]], torch.Tensor]
    ) -> torch.Tensor:
        """`compute(the unit's tensors)`, resident or fetched by the copy thread (and
        released after)."""
        if self._fault_hook is not None:
            self._fault_hook(unit)
        if not self.store.is_streamed(unit):
            return compute(self.store.resident(unit))
        assert self.prefetcher is not None
        tensors = self.prefetcher.get(unit)
        try:
            return compute(tensors)
        finally:
            del tensors  # our reference goes before the slot is handed back
            self.prefetcher.release(unit)

    def close(self) -> None:
        if self.prefetcher is not None:
            self.prefetcher.close()
            self.prefetcher = None
        self._bindings.clear()  # they reference the store's tensors
        if self._native_layers is not None:
            self._native_layers.forget()
        self.store.close()

    def _call(self, unit: str, module: nn.Module, *args: object, **kwargs: object) -> torch.Tensor:
        if self._fault_hook is not None:
            self._fault_hook(unit)
        if not self.store.is_streamed(unit):
            tensors = self.store.resident(unit)
            if self.store.is_packed(unit):  # resident, computed per matrix
                with bound(self._binding(unit, module, tensors)) as small:
                    return hf_modules.apply(module, tensors=small, args=args, kwargs=kwargs)
            return hf_modules.apply(module, tensors=tensors, args=args, kwargs=kwargs)
        assert self.prefetcher is not None
        tensors = self.prefetcher.get(unit)
        try:
            if self.store.decode in PER_MATRIX and self.store.is_packed(unit):
                with matrix_decoding(
                    module,
                    packed=tensors,
                    sources=self.store.sources_of(unit),
                    dtype=self.dtype,
                    buffer=self.store.matrix_buffer,
                    workspace=self.store.workspace,
                ) as small:
                    out = hf_modules.apply(module, tensors=small, args=args, kwargs=kwargs)
            else:
                out = hf_modules.apply(module, tensors=tensors, args=args, kwargs=kwargs)
        finally:
            del tensors  # our reference goes before the slot is handed back
            self.prefetcher.release(unit)
        return out

    def _binding(
        self, unit: str, module: nn.Module, tensors: dict[str, torch.Tensor]
    ) -> MatrixBinding:
        """A resident packed unit's binding, built at its first use and kept while the
        store holds the same tensors (a placement change replaces or drops them)."""
        cached = self._bindings.get(unit)
        if cached is not None and cached[0] is tensors:
            return cached[1]
        binding = bind_matrices(
            module,
            packed=tensors,
            sources=self.store.sources_of(unit),
            dtype=self.dtype,
            buffer=self.store.matrix_buffer,
            workspace=self.store.workspace,
        )
        self._bindings[unit] = (tensors, binding)
        return binding


def _config_dtype(config: PretrainedConfig) -> torch.dtype:
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and isinstance(getattr(torch, dtype, None), torch.dtype):
        return getattr(torch, dtype)
    return torch.float32
