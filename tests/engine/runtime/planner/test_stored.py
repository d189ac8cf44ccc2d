"""The planner counts the bytes the executor holds: a compressed model's layers at their
stored size (GGML blocks, bf16 computed in float32), and decoded what its decode mode
holds (whole layers, or one matrix and its scratch)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from gguf import GGMLQuantizationType

from engine.runtime.executor import int4
from engine.runtime.executor.checkpoint import EMBED, index_checkpoint, layer_unit
from engine.runtime.executor.kernel_forms import form_of
from engine.runtime.executor.packed import kernel_bytes, stored_bytes
from engine.runtime.hardware.profile import synthetic_profile
from engine.runtime.models.gguf_file import companion_folder
from engine.runtime.models.gguf_writer import write_gguf
from engine.runtime.models.synthetic import write_random_model
from engine.runtime.planner import StoreSpec, Workload, plan
from engine.runtime.planner.stored import load_held_spec

MIB = 2**20


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_model(
        folder=tmp_path_factory.mktemp("hf"),
        hidden_size=256,
        num_layers=4,
        intermediate_size=512,
        seed=5,
    )


@pytest.mark.parametrize(("qtype", "ratio"), [("Q8_0", 3.5), ("Q4_0", 6.0)])
def test_gguf_layers_count_their_stored_bytes(
    hf_dir: Path, tmp_path: Path, qtype: str, ratio: float
) -> None:
    path = write_gguf(model_dir=hf_dir, out=tmp_path / "m.gguf", qtype=GGMLQuantizationType[qtype])
    folder = companion_folder(gguf_path=path, cache=tmp_path / "cache")
    plain = load_held_spec(source=hf_dir, dtype="float32")
    spec = load_held_spec(source=folder, dtype="float32")
    sources = index_checkpoint(folder)[layer_unit(0)]
    # Off a CPU (a GPU decodes each layer per use) the stored blocks are what is held.
    stored = sum(stored_bytes(s) for s in sources)
    assert spec.layer_bytes == (stored,) * 4
    assert spec.layer_bytes[0] * ratio < plain.layer_bytes[0]
    assert spec.decoded_layer_bytes == plain.layer_bytes[0]
    assert spec.weight_format == qtype
    assert spec.parameter_count == plain.parameter_count
    # The embedding is decoded at load (a lookup would otherwise decode it whole).
    assert spec.embed_bytes == plain.embed_bytes
    # Two decoded layers (computing, decoding) are workspace.
    ws = spec.decode_workspace_bytes(batch=1, context_tokens=16)
    assert (
        ws == plain.decode_workspace_bytes(batch=1, context_tokens=16) + 2 * (plain.layer_bytes[0])
    )


def test_bf16_checkpoint_computed_in_float32_counts_bf16(tmp_path: Path) -> None:
    hf = write_random_model(folder=tmp_path / "bf16", num_layers=2, dtype="bfloat16")
    as_f32 = load_held_spec(source=hf, dtype="float32")
    as_bf16 = load_held_spec(source=hf)
    assert as_bf16.dtype == "bfloat16" and as_bf16.decoded_layer_bytes == 0
    assert as_f32.layer_bytes == as_bf16.layer_bytes  # held as bf16, never doubled
    assert as_f32.weight_format == "BF16"


def test_a_compressed_model_stays_in_ram_where_the_float_one_streams(
    hf_dir: Path, tmp_path: Path
) -> None:
    path = write_gguf(model_dir=hf_dir, out=tmp_path / "m.gguf", qtype=GGMLQuantizationType.Q4_0)
    folder = companion_folder(gguf_path=path, cache=tmp_path / "cache")
    plain = load_held_spec(source=hf_dir, dtype="float32")
    spec = load_held_spec(source=folder, dtype="float32")
    hw = synthetic_profile(gpu_bytes=0, ram_bytes=2048 * MIB, disk_bytes=100 * 2**30)
    # RAM left after the margins and the store, scaled so that the float32 layers do not
    # all fit but the Q4_0 ones do.
    store = StoreSpec.default()
    workload = Workload(batch=1, context_tokens=64)
    base = plan(hardware=hw, model=plain, store=store, workload=workload)
    # 16 layers whose float32 total is 1.5× the RAM budget; stored in Q4_0 they take
    # under a sixth of it (plus two decoded layers of workspace).
    layer = int(base.budgets.cpu * 1.5 / 16)
    stored = int(layer * spec.layer_bytes[0] / plain.layer_bytes[0])
    big = dataclasses.replace(plain, num_layers=16, layer_bytes=(layer,) * 16)
    small = dataclasses.replace(
        spec, num_layers=16, layer_bytes=(stored,) * 16, decoded_layer_bytes=layer
    )
    p_big = plan(hardware=hw, model=big, store=store, workload=workload)
    p_small = plan(hardware=hw, model=small, store=store, workload=workload)
    assert p_big.fits and p_small.fits
    assert "disk" in p_big.layer_tiers
    assert "disk" not in p_small.layer_tiers


@pytest.mark.skipif(not int4.available(), reason="this torch has no CPU int4 kernel")
@pytest.mark.parametrize("qtype", ["Q4_0", "Q8_0"])
def test_on_a_cpu_gguf_models_count_their_kernel_forms(
    hf_dir: Path, tmp_path: Path, qtype: str
) -> None:
    path = write_gguf(model_dir=hf_dir, out=tmp_path / "m.gguf", qtype=GGMLQuantizationType[qtype])
    folder = companion_folder(gguf_path=path, cache=tmp_path / "cache")
    units = index_checkpoint(folder)
    plain = load_held_spec(source=hf_dir, dtype="float32")
    on_cpu = load_held_spec(source=folder, dtype="float32", cpu=True)
    assert on_cpu.computed_compressed
    # The kernel forms (int4 for Q4_0, int8 for Q8_0) and the norms decoded; nothing is
    # decoded per use, so no decoded layer or matrix in the workspace.
    layer = sum(kernel_bytes(s) for s in units[layer_unit(0)])
    assert on_cpu.layer_bytes == (layer,) * 4
    assert on_cpu.decoded_layer_bytes == on_cpu.decoded_matrix_bytes == 0
    # The embedding is held as stored (a lookup decodes its rows), the head in its form.
    assert on_cpu.embed_bytes == sum(stored_bytes(s) for s in units[EMBED])
    assert on_cpu.embed_bytes < plain.embed_bytes // 3

    # A prefill decodes the largest matrix (the head here) into a buffer in bfloat16
    # (and its integers too in the int4 form); a chunked one keeps one layer's matrices
    # decoded to bfloat16 besides, unless layers stream from the disk.
    def matrices(sources: list) -> list[int]:
        return [math.prod(s.shape) for s in sources if len(s.shape) == 2]

    layer = sum(matrices(units[layer_unit(0)]))
    largest = max(n for sources in units.values() for n in matrices(sources))
    forms = {form_of(s.gguf) for s in units[layer_unit(0)]} - {None}
    per_element = 3 if forms == {"int4"} else 2
    assert on_cpu.kernel_buffer_bytes == largest * per_element
    assert on_cpu.kept_layer_bytes == layer * 2
    plain_ws = plain.decode_workspace_bytes(batch=1, context_tokens=16)
    ws = on_cpu.decode_workspace_bytes(batch=1, context_tokens=16)
    assert ws == plain_ws + layer * 2 + largest * per_element
    streaming = on_cpu.decode_workspace_bytes(batch=1, context_tokens=16, per_matrix=True)
    assert streaming == plain_ws + largest * per_element
    assert on_cpu.weight_bytes < plain.weight_bytes // 3


def test_matrix_decoding_counts_the_largest_matrix_and_its_scratch(
    hf_dir: Path, tmp_path: Path
) -> None:
    q8 = write_gguf(model_dir=hf_dir, out=tmp_path / "q8.gguf", qtype=GGMLQuantizationType.Q8_0)
    folder = companion_folder(gguf_path=q8, cache=tmp_path / "cache")
    spec = load_held_spec(source=folder, dtype="float32")  # decoded per use (a GPU)
    sources = index_checkpoint(folder)[layer_unit(0)]
    # The MLP's 512 × 256 matrices are the largest: float32 plus a uint8 scratch of as
    # many elements (packed.MatrixBuffer), beside the layer's norms and biases decoded.
    small = sum(4 * s.shape[0] for s in sources if len(s.shape) == 1)
    assert small > 0
    assert spec.decoded_matrix_bytes == 512 * 256 * (4 + 1) + small
    assert spec.decoded_matrix_bytes < spec.decoded_layer_bytes // 2
    per_matrix = spec.decode_workspace_bytes(batch=1, context_tokens=16, per_matrix=True)
    whole = spec.decode_workspace_bytes(batch=1, context_tokens=16)
    assert whole - per_matrix == 2 * spec.decoded_layer_bytes - spec.decoded_matrix_bytes
    # A model held in its compute dtype decodes nothing either way.
    plain = load_held_spec(source=hf_dir, dtype="float32")
    assert plain.decoded_matrix_bytes == 0
