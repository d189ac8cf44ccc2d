"""Layers held compressed (GGML blocks, bf16 for a float32 compute) in every tier and
decoded per use give exactly the values, logits and greedy tokens of the same weights
decoded once at load, while holding the stored bytes only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from gguf import GGMLQuantizationType

import engine.runtime.executor.generate as generate_module
import engine.runtime.executor.packed as packed_module
from engine.runtime.executor.checkpoint import index_checkpoint, layer_unit
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.generate import GenerationRequest, generate_ids
from engine.runtime.executor.packed import decode, packable, stored_bytes
from engine.runtime.models.gguf_file import companion_folder, read_tensor
from engine.runtime.models.gguf_writer import write_gguf
from engine.runtime.models.synthetic import write_random_model
from engine.runtime.planner.stored import load_held_spec
from tests.engine.runtime.executor.conftest import make_placement

PROMPTS = [(1, 40, 41, 42, 43, 44, 45, 46), (1, 50, 51, 52)]
TIERS = {
    "resident": ["cpu"] * 4,
    "half_disk": ["cpu", "disk", "cpu", "disk"],
}


@pytest.fixture(scope="module", params=["q8_0", "q4_0"])
def gguf_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp(request.param)
    hf = write_random_model(
        folder=tmp / "hf",
        architecture="llama",  # its q/k rows are permuted in GGUF: decoded back per use
        hidden_size=256,
        num_layers=4,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=512,
        seed=3,
    )
    qtype = GGMLQuantizationType[request.param.upper()]
    path = write_gguf(model_dir=hf, out=tmp / "model.gguf", qtype=qtype)
    return companion_folder(gguf_path=path, cache=tmp / "cache")


def test_packed_tensor_decodes_to_the_values_read_at_load(gguf_dir: Path) -> None:
    sources = index_checkpoint(gguf_dir)[layer_unit(0)]
    assert packable(sources, dtype=torch.float32)
    for s in sources:
        assert s.gguf is not None
        with s.file.open("rb") as f:
            expected = read_tensor(f, s.gguf, dtype=torch.float32)
            f.seek(s.start)
            raw = torch.frombuffer(bytearray(f.read(s.end - s.start)), dtype=torch.uint8)
        assert torch.equal(decode(raw, source=s, dtype=torch.float32), expected)


def _greedy(model: StreamingModel) -> list[list[int]]:
    requests = [GenerationRequest(prompt_ids=p, max_new_tokens=8) for p in PROMPTS]
    return generate_ids(model=model, requests=requests)


@pytest.mark.parametrize("tiers", list(TIERS))
def test_compressed_layers_give_the_tokens_of_weights_decoded_at_load(
    gguf_dir: Path, tiers: str
) -> None:
    placement = make_placement(model_dir=gguf_dir, layer_tiers=TIERS[tiers])
    f32 = torch.float32
    reference = StreamingModel(model_dir=gguf_dir, placement=placement, dtype=f32, compressed=False)
    # decode="layer": the float32 decoding path (Q4_0 would otherwise choose the int4
    # kernel, whose reference is its own: tests/engine/runtime/executor/test_int4.py).
    packed = StreamingModel(model_dir=gguf_dir, placement=placement, dtype=f32, decode="layer")
    try:
        assert not any(reference.store.is_packed(layer_unit(i)) for i in range(4))
        assert all(packed.store.is_packed(layer_unit(i)) for i in range(4))
        assert _greedy(packed) == _greedy(reference)
        held_ref, held = reference.store.held_bytes(), packed.store.held_bytes()
        resident = [layer_unit(i) for i, t in enumerate(TIERS[tiers]) if t == "cpu"]
        for unit in resident:
            # Q8_0 holds 34 bytes per 32 weights, Q4_0 18 (and the
            # float32 norms): at least 3.5× fewer than float32 (Q4_K and Q6_K are
            # held packed in tests/engine/runtime/models/test_gguf_file.py).
            assert held[unit] * 3.5 < held_ref[unit]
        # Between forwards no decoded layer stays behind the copy thread's queue.
        assert packed.store.stats().streamed_peak <= 1 + max(
            placement.prefetch_depth_prefill, placement.prefetch_depth_decode, 1
        )
    finally:
        reference.close()
        packed.close()


@pytest.mark.parametrize("tiers", list(TIERS))
def test_matrix_decoding_gives_the_tokens_of_layer_decoding_holding_one_matrix(
    gguf_dir: Path, tiers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    unpooled: list[int] = []  # sizes decoded outside the matrix buffer

    def counted(raw: torch.Tensor, **kw: Any) -> torch.Tensor:
        if kw.get("pool") is None:
            unpooled.append(torch.Size(kw["source"].shape).numel())
        return decode(raw, **kw)

    placement = make_placement(model_dir=gguf_dir, layer_tiers=TIERS[tiers])
    f32 = torch.float32
    layer = StreamingModel(model_dir=gguf_dir, placement=placement, dtype=f32, decode="layer")
    matrix = StreamingModel(model_dir=gguf_dir, placement=placement, dtype=f32, decode="matrix")
    try:
        expected = _greedy(layer)
        monkeypatch.setattr(packed_module, "decode", counted)
        assert _greedy(matrix) == expected
        # Only norms and biases are decoded up front, never a layer's matrices.
        assert unpooled and all(n <= 512 for n in unpooled)
        sources = index_checkpoint(gguf_dir)[layer_unit(0)]
        largest = max(s.shape[0] * s.shape[1] for s in sources if len(s.shape) == 2)
        one_layer = sum(4 * torch.Size(s.shape).numel() for s in sources)
        # One float32 matrix and its uint8 decoding scratch, the largest (the MLP's):
        # not a layer, let alone two.
        assert matrix.store.matrix_buffer.held_bytes() == largest * (4 + 1)
        assert matrix.store.matrix_buffer.held_bytes() < one_layer / 2
        # No decoded layer is pooled either: only blocks of a streamed unit's stored
        # bytes (weights.py `_stream_block`), each the largest disk unit's size; how many
        # sit in the pool when this looks depends on where the prefetch thread is.
        block = sum(stored_bytes(s) for s in sources)
        pooled = matrix.store.stats().pooled_bytes
        assert pooled % block == 0, (pooled, block)
        assert pooled <= (placement.prefetch_depth_decode + 1) * block < 2 * one_layer
        # The planner's workspace for this mode covers the buffer and the norms/biases.
        held = load_held_spec(source=gguf_dir, dtype="float32", cpu=False)
        small = sum(4 * s.shape[0] for s in sources if len(s.shape) == 1)
        assert matrix.store.matrix_buffer.held_bytes() + small <= held.decoded_matrix_bytes
        # The layers' own forward is back after each call: no Linear keeps a patch.
        assert all("forward" not in vars(m) for m in matrix._layers[0].modules())
    finally:
        layer.close()
        matrix.close()


def test_bf16_checkpoint_held_in_bf16_when_computed_in_float32(tmp_path: Path) -> None:
    hf = write_random_model(folder=tmp_path / "bf16", num_layers=4, dtype="bfloat16", seed=4)
    placement = make_placement(model_dir=hf, layer_tiers=["cpu", "disk", "cpu", "cpu"])
    reference = StreamingModel(
        model_dir=hf, placement=placement, dtype=torch.float32, compressed=False
    )
    packed = StreamingModel(model_dir=hf, placement=placement, dtype=torch.float32)
    try:
        assert packed.store.is_packed(layer_unit(0))
        assert _greedy(packed) == _greedy(reference)
        held_ref, held = reference.store.held_bytes(), packed.store.held_bytes()
        assert held[layer_unit(0)] * 2 == held_ref[layer_unit(0)]
    finally:
        reference.close()
        packed.close()


def test_packed_layers_move_between_tiers_under_a_new_placement(
    gguf_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One prefill form under both placements (resident rows would be prefilled a forward
    # each, generate.prefills_rows_apart, whose quantized sums differ in the last bits).
    monkeypatch.setattr(generate_module, "prefills_rows_apart", lambda model: False)
    f32 = torch.float32
    resident = make_placement(model_dir=gguf_dir, layer_tiers=TIERS["resident"])
    model = StreamingModel(model_dir=gguf_dir, placement=resident, dtype=f32)
    try:
        expected = _greedy(model)
        half = make_placement(model_dir=gguf_dir, layer_tiers=TIERS["half_disk"])
        assert model.apply_placement(half) == 2
        assert model.store.held_bytes()[layer_unit(1)] == 0  # on disk: nothing held
        assert _greedy(model) == expected
        assert model.apply_placement(resident) == 2
        assert _greedy(model) == expected
        assert model.store.held_bytes()[layer_unit(1)] > 0  # read back, still packed
        assert model.store.is_packed(layer_unit(1))
    finally:
        model.close()


def test_a_streamed_layer_is_read_into_one_allocation(gguf_dir: Path) -> None:
    """One block per layer, not one per tensor: freed tensors of tens of MiB each stayed
    in malloc's heap and a limited Q8_0 run held ~80 MiB more than the planner counted."""
    sources = index_checkpoint(gguf_dir)[layer_unit(0)]
    raw = packed_module.read_stored(sources, pin=False)
    blocks = {t.untyped_storage().data_ptr() for t in raw.values()}
    assert len(blocks) == 1
    assert raw[sources[0].param].untyped_storage().nbytes() == sum(
        packed_module.stored_bytes(s) for s in sources
    )
    for s in sources:
        assert torch.equal(raw[s.param], read_tensor_bytes(s))
    # Made ready for the kernels, the tensors kept decoded are copies: a view would keep
    # the whole block (the bytes the kernel forms replace) alive.
    repacked = packed_module.repack_unit(raw, sources=sources, dtype=torch.float32)
    kept = [t for p, t in repacked.items() if p in raw]
    assert all(t.untyped_storage().data_ptr() not in blocks for t in kept)


def read_tensor_bytes(source: Any) -> torch.Tensor:
    with source.file.open("rb") as f:
        f.seek(source.start)
        return torch.frombuffer(bytearray(f.read(source.end - source.start)), dtype=torch.uint8)
