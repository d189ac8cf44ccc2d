"""The PlacementOwner: it plans, hands placements to the parts that obey them, hears a
demotion, and reports the placement in force; and the demotion steps it relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import ModelLoadError
from engine.runtime.executor.kv import host_kv_layers
from engine.runtime.hardware.profile import synthetic_profile
from engine.runtime.planner.demotion import demoted, no_higher_than, priced
from engine.runtime.planner.model_spec import ModelSpec, load_model_spec
from engine.runtime.planner.owner import PlacementOwner
from engine.runtime.planner.placement import Placement, StoreSpec

GIB = 2**30
CONFIGS = Path(__file__).resolve().parents[4] / "resources" / "model_configs"
# A 24 GiB GPU: Llama-3.1-8B fits whole with its KV for one sequence.
DESKTOP = synthetic_profile(gpu_bytes=24 * GIB, ram_bytes=64 * GIB, disk_bytes=2000 * GIB)
# A 12 GiB GPU: the 8B model's later layers live in RAM.
SMALL_GPU = synthetic_profile(gpu_bytes=12 * GIB, ram_bytes=64 * GIB, disk_bytes=2000 * GIB)


@pytest.fixture(scope="module")
def llama8b() -> ModelSpec:
    return load_model_spec(source=CONFIGS / "llama-3.1-8b.json")


class FakeExecutor:
    def __init__(self) -> None:
        self.applied: list[Placement] = []

    def apply_placement(self, placement: Placement) -> int:
        self.applied.append(placement)
        return 0


class FakeStore:
    def __init__(self, *, chunks: int) -> None:
        self.chunks = chunks
        self.applied: list[Placement] = []

    def apply_placement(self, *, placement: Placement) -> None:
        self.applied.append(placement)

    def counts(self) -> tuple[int, int]:
        return (1, self.chunks)


def _owner(model: ModelSpec, hardware=DESKTOP) -> PlacementOwner:  # type: ignore[no-untyped-def]
    return PlacementOwner.plan(
        model=model, hardware=lambda: hardware, store=StoreSpec.default, context_tokens=4096
    )


def test_the_owner_hands_its_placement_to_the_store_and_records_what_the_executor_runs(
    llama8b: ModelSpec,
) -> None:
    owner = _owner(llama8b)
    executor, store, empty = FakeExecutor(), FakeStore(chunks=10), FakeStore(chunks=0)
    owner.attach(executor=executor, store=store)
    assert store.applied == [owner.placement]  # the index gets its budget at once

    bigger = owner.plan_for(batch=4)
    assert bigger is not None and bigger.batch == 4
    owner.apply_to_store(bigger)
    owner.apply_to_executor(bigger)
    assert executor.applied == [bigger] and store.applied[-1] is bigger
    assert owner.placement is bigger

    owner.attach(executor=None, store=empty)
    owner.apply_to_store(bigger)
    assert empty.applied == []  # an empty index has no table to reopen


def test_a_model_that_does_not_fit_is_refused(llama8b: ModelSpec) -> None:
    tiny = synthetic_profile(gpu_bytes=0, ram_bytes=2 * GIB, disk_bytes=3 * GIB)
    with pytest.raises(ModelLoadError, match="does not fit"):
        _owner(llama8b, hardware=tiny)


def test_a_demotion_is_reported_and_later_plans_stay_below_it(llama8b: ModelSpec) -> None:
    owner = _owner(llama8b)
    planned = owner.placement
    assert set(planned.layer_tiers) == {"gpu"}
    layers = len(planned.layer_tiers)

    # What the executor does on a GPU: KV first (half of it to the host), then weights.
    kv_step = demoted(planned, kv_host_layers=0, kv_first=True)
    assert kv_step is not None and kv_step.kv_host_layers == layers // 2
    assert host_kv_layers(placement=kv_step.placement, layers=layers) == layers // 2
    assert kv_step.placement.kv.total == planned.kv.total
    assert kv_step.placement.layer_tiers == planned.layer_tiers
    weight_step = demoted(kv_step.placement, kv_host_layers=layers, kv_first=True)
    assert weight_step is not None and weight_step.placement.layer_tiers.count("cpu") == layers // 2

    owner.demoted(weight_step.placement)
    in_force = owner.placement
    assert owner.demotions == 1
    assert in_force.layer_tiers == weight_step.placement.layer_tiers
    # Its weight bytes follow the layers that moved (the plan's sums did not).
    assert in_force.weights.cpu == sum(llama8b.layer_bytes[layers // 2 :])
    assert in_force.weights.total == llama8b.weight_bytes

    replanned = owner.plan_for(batch=1)
    assert replanned is not None
    assert replanned.layer_tiers == in_force.layer_tiers
    assert host_kv_layers(placement=replanned, layers=layers) >= layers // 2


def test_no_higher_than_keeps_each_unit_on_the_lower_of_two_tiers(llama8b: ModelSpec) -> None:
    roomy = _owner(llama8b).placement
    tight = _owner(llama8b, hardware=SMALL_GPU).placement
    assert "cpu" in tight.layer_tiers and "cpu" not in roomy.layer_tiers
    kept = priced(no_higher_than(roomy, floor=tight), model=llama8b)
    assert kept.layer_tiers == tight.layer_tiers
    assert kept.weights == priced(tight, model=llama8b).weights
    assert no_higher_than(tight, floor=roomy).layer_tiers == tight.layer_tiers


def test_a_larger_batch_never_sends_weights_to_the_disk() -> None:
    """A CPU with RAM for the model and a small batch's KV: the owner refuses the plan for
    a larger batch that only fits by streaming layers from the disk (the governor then
    keeps the batch it has) and accepts one that fits in RAM."""
    qwen = load_model_spec(source=CONFIGS / "qwen2.5-1.5b.json")
    budget = qwen.weight_bytes + 2 * GIB
    laptop = synthetic_profile(gpu_bytes=0, ram_bytes=budget, disk_bytes=2000 * GIB)
    owner = _owner(qwen, hardware=laptop)
    assert set(owner.placement.layer_tiers) == {"cpu"}
    assert owner.plan_for(batch=2) is not None  # its KV fits beside the weights
    # Thirty-two 4,096-token rows need gigabytes of KV: only with layers on the disk.
    from engine.runtime.planner.placement import Workload
    from engine.runtime.planner.planner import plan

    squeezed = plan(
        hardware=laptop,
        model=qwen,
        store=StoreSpec.default(),
        workload=Workload(batch=32, context_tokens=4096),
    )
    assert squeezed.fits and "disk" in squeezed.layer_tiers
    assert owner.plan_for(batch=32) is None
