"""A placement change mid-generation moves only the units whose home changed, lazily,
and the answer does not change."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from engine.runtime.executor.checkpoint import layer_unit
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.generate import GenerationRequest, generate, generate_ids
from engine.runtime.planner.demotion import demoted_placement
from tests.engine.runtime.executor.conftest import make_placement

PROMPT = (1, 40, 41, 42, 43, 44, 45, 46)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_changing_placement_between_steps_moves_only_changed_units(
    arch: str, request: pytest.FixtureRequest
) -> None:
    model_dir: Path = request.getfixturevalue(f"{arch}_dir")
    before = make_placement(model_dir=model_dir, layer_tiers=["cpu", "cpu", "disk", "disk"])
    after = dataclasses.replace(before, layer_tiers=("cpu", "disk", "cpu", "disk"))
    requests = [GenerationRequest(prompt_ids=PROMPT, max_new_tokens=10)]
    model = StreamingModel(model_dir=model_dir, placement=before)
    try:
        expected = generate_ids(model=model, requests=requests)[0]
        held_before = model.store.held_bytes()
        got: list[int] = []
        for event in generate(model=model, requests=requests):
            got.append(event.token_id)
            if len(got) == 4:
                assert model.apply_placement(after) == 2  # layer 1 down, layer 2 up
                stats = model.store.stats()
                assert stats.moves == 2
                assert stats.lazy_loads == 0  # layer 2 is read when first needed
                # Layer 1's memory is freed at once.
                assert model.store.held_bytes()[layer_unit(1)] == 0
        assert got == expected
        stats = model.store.stats()
        assert stats.moves == 2 and stats.lazy_loads == 1
        held = model.store.held_bytes()
        assert held[layer_unit(2)] == held_before[layer_unit(1)]
        assert held[layer_unit(0)] == held_before[layer_unit(0)]  # untouched
        assert model.apply_placement(after) == 0  # nothing to move
        assert model.store.is_streamed(layer_unit(1)) and not model.store.is_streamed(layer_unit(2))
    finally:
        model.close()


def test_demoted_placement_moves_the_later_half_of_resident_layers(llama_dir: Path) -> None:
    p = make_placement(model_dir=llama_dir, layer_tiers=["cpu"] * 4)
    once = demoted_placement(p)
    assert once is not None and once.layer_tiers == ("cpu", "cpu", "disk", "disk")
    twice = demoted_placement(once)
    assert twice is not None and twice.layer_tiers == ("cpu", "disk", "disk", "disk")
    all_disk = dataclasses.replace(p, layer_tiers=("disk",) * 4)
    assert demoted_placement(all_disk) is None
