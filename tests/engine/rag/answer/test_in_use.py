"""A model put to use (engine/rag/answer/in_use.py): a GGUF file held compressed is decoded
once at load when, decoded, every layer still fits in the compute tier."""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf import GGMLQuantizationType

from engine.rag.answer.in_use import _decoded_whole, open_model
from engine.runtime.models.gguf_writer import write_gguf
from engine.runtime.models.resolve import resolve_model_path
from engine.runtime.models.synthetic import write_random_model
from engine.runtime.planner.model_spec import load_model_spec
from engine.runtime.planner.placement import Placement
from engine.runtime.planner.stored import load_held_spec


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGDOLL_HOME", str(tmp_path / "home"))


def _gguf(tmp_path: Path, qtype: GGMLQuantizationType) -> Path:
    hf = write_random_model(folder=tmp_path / "llama", architecture="llama")
    path = write_gguf(model_dir=hf, out=tmp_path / f"llama.{qtype.name}.gguf", qtype=qtype)
    return resolve_model_path(model=str(path))


@pytest.mark.parametrize("qtype", ["Q4_0", "Q4_1", "Q8_0"])
def test_a_gguf_model_on_a_cpu_is_computed_in_its_kernel_forms_never_decoded(
    tmp_path: Path, qtype: str
) -> None:
    """Even asked to decode at load (the engine asks when the user left the weights as
    stored), a GGUF model on a CPU keeps its kernel forms: decoding would make every step
    read 4 bytes a weight instead of 0.6–1."""
    folder = _gguf(tmp_path, GGMLQuantizationType[qtype])
    in_use = open_model(model_path=folder, device="cpu", decode_at_load=True)
    try:
        store = in_use.answerer.model.executor.store
        assert store.is_packed("layer.0") and store.decode == "kernel"
    finally:
        in_use.close()


def test_only_a_plan_with_every_decoded_layer_resident_decodes_at_load(tmp_path: Path) -> None:
    folder = _gguf(tmp_path, GGMLQuantizationType.Q8_0)
    # Held compressed and decoded per use (off a CPU): decoding once at load may pay.
    held = load_held_spec(source=folder, dtype="float32", cpu=False)
    decoded = load_model_spec(source=folder, dtype="float32")
    assert held.layer_bytes != decoded.layer_bytes

    def planned(*tiers: str, fits: bool = True):  # type: ignore[no-untyped-def]
        def plan(model):  # type: ignore[no-untyped-def]
            assert model is decoded  # the decoded sizes are what is planned
            return _Plan(compute_tier="cpu", layer_tiers=tiers, fits=fits)

        return plan

    resident = _decoded_whole(held=held, decoded=decoded, cpu=False, plan=planned("cpu", "cpu"))
    assert resident is not None and resident.model is decoded
    one_on_disk = planned("cpu", "disk")
    assert _decoded_whole(held=held, decoded=decoded, cpu=False, plan=one_on_disk) is None
    no_fit = planned("cpu", "cpu", fits=False)
    assert _decoded_whole(held=held, decoded=decoded, cpu=False, plan=no_fit) is None
    # Nothing held compressed: nothing to decode.
    same = _decoded_whole(held=decoded, decoded=decoded, cpu=False, plan=planned("cpu", "cpu"))
    assert same is None
    # Computed in its kernel forms (a CPU): never decoded.
    on_cpu = load_held_spec(source=folder, dtype="float32", cpu=True)
    assert _decoded_whole(held=on_cpu, decoded=decoded, cpu=True, plan=planned("cpu")) is None


class _Plan:
    """The two things `_decoded_whole` reads of a Placement, and whether it fits."""

    def __init__(self, *, compute_tier: str, layer_tiers: tuple[str, ...], fits: bool) -> None:
        self.compute_tier = compute_tier
        self.layer_tiers = layer_tiers
        self.fits = fits


_ = Placement  # the real type the stand-in mirrors
