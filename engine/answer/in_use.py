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

from engine.answer.generative import GenerativeAnswerer
from engine.hardware.profile import HardwareProfile, load_profile
from engine.models.loading import load_model, read_model_files
from engine.paths import Paths, resolve_paths
from engine.planner.owner import PlacedStore, PlacementOwner
from engine.planner.placement import Placement, StoreSpec
from engine.planner.stored import load_held_spec

# The context the placement is sized for: prompts of a few sources and an answer. A
# model's full window (32k for Qwen2) would reserve KV that a RAG answer never fills
# and push weights off the compute tier for nothing.
PLANNED_CONTEXT = 4096


@dataclass(frozen=True, kw_only=True)
class ModelInUse:
    """The owner of the model's placement and the answerer that runs the model."""

    owner: PlacementOwner
    answerer: GenerativeAnswerer

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
) -> ModelInUse:
    """Load the model in `model_path` under a placement for this machine (the cached
    hardware profile, never a slow measurement), or under `placement` when given.

    `device="cpu"` plans without the GPU; `store()` is the index as the planner sees it
    (StoreSpec.default() without one) and `index` the store that keeps the placement's
    partitions resident. `fault_hook`, `evict_after_read` and `stop_at_eos=False` are
    test and benchmark seams (see StreamingModel and GenerativeAnswerer). Raises
    ModelLoadError."""
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
    if placement is None:
        owner = PlacementOwner.plan(
            model=spec,
            hardware=machine,
            store=store_spec,
            context_tokens=min(files.context_length, PLANNED_CONTEXT),
        )
    else:
        owner = PlacementOwner(model=spec, placement=placement, hardware=machine, store=store_spec)
    in_force = owner.placement
    loaded = load_model(
        files=files,
        placement=in_force,
        dtype=files.compute_dtype(dtype=dtype, cpu=in_force.compute_tier == "cpu"),
        fault_hook=fault_hook,
        evict_after_read=evict_after_read,
        # Streamed Q4_0 layers are repacked for the int4 kernel once, kept here.
        repack_cache=paths.cache / "int4" if paths is not None else None,
    )
    owner.attach(executor=loaded.executor, store=index)
    answerer = GenerativeAnswerer(
        model=loaded, placement=in_force, on_degrade=owner.demoted, stop_at_eos=stop_at_eos
    )
    return ModelInUse(owner=owner, answerer=answerer)


def _this_machine(*, device: str | None, paths: Paths | None) -> HardwareProfile:
    """The cached hardware profile (never a slow measurement here); without a cache,
    the counts alone."""
    hardware = load_profile(paths=paths or resolve_paths(), measure=False)
    if device == "cpu" and hardware.gpus:
        hardware = dataclasses.replace(hardware, gpus=())
    return hardware
