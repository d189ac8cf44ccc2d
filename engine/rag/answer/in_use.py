"""A language model put to use: its files read, its placement planned by a
PlacementOwner, its executor built under that placement, and the answerer given both.

This is the one place that assembles them (the engine, the active profiler, the
benchmarks and the tests all come here); the answerer itself never plans.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.paths import Paths, resolve_paths
from engine.rag.answer.generative import GenerativeAnswerer
from engine.rag.answer.remote import RemoteAnswerer
from engine.runtime.hardware.profile import HardwareProfile, load_profile
from engine.runtime.heap import give_back_freed_memory
from engine.runtime.models.loading import load_model, read_model_files
from engine.runtime.planner.model_spec import ModelSpec, load_model_spec
from engine.runtime.planner.owner import PlacedStore, PlacementOwner, PlacementRequest, plan_model
from engine.runtime.planner.placement import Placement, StoreSpec
from engine.runtime.planner.stored import load_held_spec

# The context the placement is sized for: prompts of a few sources and an answer. A
# model's full window (32k for Qwen2) would reserve KV that a RAG answer never fills
# and push weights off the compute tier for nothing.
PLANNED_CONTEXT = 4096


@dataclass(frozen=True, kw_only=True)
class ModelInUse:
    """The owner of the model's placement and the answerer that runs the model. A
    model on a server (engine/rag/answer/server_model.py) has no owner: nothing of it is
    placed here, and the planner plans the index alone."""

    owner: PlacementOwner | None
    answerer: GenerativeAnswerer | RemoteAnswerer

    @property
    def remote(self) -> bool:
        return self.owner is None

    def close(self) -> None:
        self.answerer.close()


def open_model(
    *,
    model_path: Path,
    device: str | None = None,
    dtype: str | None = None,
    hardware: HardwareProfile | None = None,
    placement: Placement | None = None,
    store: Callable[[], StoreSpec] | None = None,
    index: PlacedStore | None = None,
    paths: Paths | None = None,
    fault_hook: Callable[[str], None] | None = None,
    evict_after_read: bool = False,
    stop_at_eos: bool = True,
    decode_at_load: bool = False,
    context_tokens: int | None = None,
) -> ModelInUse:
    """Load the model in `model_path` under a placement for this machine (the cached
    hardware profile, never a slow measurement), or under `placement` when given.

    `device="cpu"` plans without the GPU; `store()` is the index as the planner sees it
    (StoreSpec.default() without one) and `index` the store that keeps the placement's
    partitions resident. `fault_hook`, `evict_after_read` and `stop_at_eos=False` are
    test and benchmark seams (see StreamingModel and GenerativeAnswerer).
    `context_tokens`: the context the placement is sized for (PLANNED_CONTEXT by
    default; a benchmark gives its own, as it gives llama.cpp's).
    `decode_at_load`: layers stored compressed are decoded once at load when, decoded,
    every layer still fits in the compute tier (`_decoded_whole`); the engine asks for
    it when the user left the weights as stored. Raises ModelLoadError."""
    files = read_model_files(model_path=model_path)

    def machine() -> HardwareProfile:
        # Read at each re-plan: free GPU memory changes while the engine runs.
        return hardware if hardware is not None else _this_machine(device=device, paths=paths)

    store_spec = store or StoreSpec.default
    cpu = placement.compute_tier == "cpu" if placement is not None else machine().gpu is None
    planned_dtype = files.compute_dtype(dtype=dtype, cpu=cpu)
    spec = load_held_spec(
        source=model_path, dtype=str(planned_dtype).removeprefix("torch."), cpu=cpu
    )
    compressed = True
    if placement is not None:
        owner = PlacementOwner(model=spec, placement=placement, hardware=machine, store=store_spec)
    else:
        context = min(files.context_length, context_tokens or PLANNED_CONTEXT)
        owner = PlacementOwner.plan(
            model=spec, hardware=machine, store=store_spec, context_tokens=context
        )
        whole = None
        if decode_at_load:
            whole = _decoded_whole(
                held=spec,
                decoded=load_model_spec(source=model_path, dtype=spec.dtype),
                cpu=cpu,
                plan=lambda model: plan_model(
                    PlacementRequest(
                        model=model, hardware=machine(), store=store_spec(), context_tokens=context
                    )
                ),
            )
        if whole is not None:
            owner = PlacementOwner(
                model=whole.model, placement=whole.placement, hardware=machine, store=store_spec
            )
            compressed = False
    in_force = owner.placement
    loaded = load_model(
        files=files,
        placement=in_force,
        dtype=files.compute_dtype(dtype=dtype, cpu=in_force.compute_tier == "cpu"),
        fault_hook=fault_hook,
        evict_after_read=evict_after_read,
        compressed=compressed,
        # Streamed Q4_0 layers are repacked for the int4 kernel once, kept here.
        repack_cache=paths.cache / "int4" if paths is not None else None,
    )
    owner.attach(executor=loaded.executor, store=index)
    answerer = GenerativeAnswerer(
        model=loaded, placement=in_force, on_degrade=owner.demoted, stop_at_eos=stop_at_eos
    )
    give_back_freed_memory()  # what reading and repacking the layers freed
    return ModelInUse(owner=owner, answerer=answerer)


@dataclass(frozen=True, kw_only=True)
class DecodedPlan:
    """A placement planned for the model's decoded sizes, and those sizes."""

    model: ModelSpec
    placement: Placement


def _decoded_whole(
    *,
    held: ModelSpec,
    decoded: ModelSpec,
    cpu: bool,
    plan: Callable[[ModelSpec], Placement],
) -> DecodedPlan | None:
    """The plan with every layer decoded once at load, when the model is held
    compressed and even decoded every layer fits in the compute tier; else None (held
    compressed, decoded per use). Decoding a layer at every step costs more than its
    matmuls: SmolLM2-135M in Q4_1 wrote 3-4 tokens a second decoded per use, 15
    decoded once (docs/benchmarks-history.md, "A real trained model"). A model computed
    in its kernel forms (a GGUF model on a CPU) is never decoded: its kernels read 0.6–1
    byte a weight where float32 reads 4 (docs/executor.md)."""
    if held.layer_bytes == decoded.layer_bytes:
        return None  # nothing held compressed
    if cpu and held.computed_compressed:
        return None
    placement = plan(decoded)
    resident = all(t == placement.compute_tier for t in placement.layer_tiers)
    if not placement.fits or not resident:
        return None
    return DecodedPlan(model=decoded, placement=placement)


def _this_machine(*, device: str | None, paths: Paths | None) -> HardwareProfile:
    """The cached hardware profile (never a slow measurement here); without a cache,
    the counts alone."""
    hardware = load_profile(paths=paths or resolve_paths(), measure=False)
    if device == "cpu" and hardware.gpus:
        hardware = dataclasses.replace(hardware, gpus=())
    return hardware
