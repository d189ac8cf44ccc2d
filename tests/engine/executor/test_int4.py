"""Q4_0 layers computed by torch's CPU int4 kernel (decode="kernel") against the same
arithmetic done by dequantize-then-matmul: matrices, logits and greedy tokens."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gguf import GGMLQuantizationType
from gguf.quants import quantize as reference_quantize

from engine.executor import int4
from engine.executor.forward import StreamingModel
from engine.executor.generate import GenerationRequest, generate_ids
from engine.executor.packed import choose_decode, kernel_bytes
from engine.executor.weights import EMBED, HEAD, index_checkpoint, layer_unit
from engine.models.gguf_file import companion_folder
from engine.models.gguf_writer import write_gguf
from engine.models.synthetic import write_random_model
from tests.engine.executor.conftest import make_placement

pytestmark = pytest.mark.skipif(not int4.available(), reason="torch has no CPU int4 kernel")

PROMPTS = [(1, 40, 41, 42, 43, 44, 45, 46), (1, 50, 51, 52)]


def _q4_0(weight: torch.Tensor) -> torch.Tensor:
    raw = reference_quantize(weight.numpy(), GGMLQuantizationType.Q4_0)
    return torch.from_numpy(raw.copy()).reshape(-1)


@pytest.mark.parametrize("rows", [64, 256, 1536])
@pytest.mark.parametrize("batch", [1, 8])
def test_kernel_linear_equals_its_dequantized_reference(rows: int, batch: int) -> None:
    g = torch.Generator().manual_seed(rows + batch)
    cols = 512
    raw = _q4_0(torch.randn(rows, cols, generator=g))
    x = torch.randn(batch, 3, cols, generator=g)
    bias = torch.randn(rows, generator=g)
    nibbles, scales = int4.repack(raw, shape=(rows, cols))
    got = int4.linear(x, nibbles=nibbles, scales=scales, bias=bias)
    weight = int4.reference_weight(raw, shape=(rows, cols))
    want = int4.reference_linear(x, weight=weight, bias=bias)
    assert got.shape == want.shape == (batch, 3, rows)
    # The same products summed in another order, each result rounded to bfloat16: at
    # most one bfloat16 step apart (2^-8 relative), almost all identical.
    step = want.abs().clamp_min(1e-3) * 2.0**-7
    assert ((got - want).abs() <= step).all()
    assert (got == want).float().mean() > 0.9


def test_reference_weight_is_q4_0_with_bf16_rounded_scales() -> None:
    from gguf.quants import dequantize

    g = torch.Generator().manual_seed(1)
    raw = _q4_0(torch.randn(32, 64, generator=g))
    exact = torch.from_numpy(dequantize(raw.numpy(), GGMLQuantizationType.Q4_0)).reshape(32, 64)
    ours = int4.reference_weight(raw, shape=(32, 64))
    q, d = int4.unpack_q4_0(raw, shape=(32, 64))
    assert torch.equal(
        ((q.float() - 8).reshape(32, 2, 32) * d.unsqueeze(-1)).reshape(32, 64), exact
    )
    # The bfloat16 scales are what the kernel can take: close to, not equal to, Q4_0's.
    assert torch.allclose(ours, exact, rtol=2.0**-8, atol=0)


@pytest.fixture(scope="module")
def q4_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("int4")
    hf = write_random_model(
        folder=tmp / "hf",
        architecture="llama",  # q/k rows permuted in the GGUF: put back before repacking
        hidden_size=256,
        num_layers=4,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=512,
        vocab_size=800,  # rows in sixteens: the head is computed by the kernel too
        seed=5,
    )
    path = write_gguf(model_dir=hf, out=tmp / "model.gguf", qtype=GGMLQuantizationType.Q4_0)
    return companion_folder(gguf_path=path, cache=tmp / "cache")


def _greedy(model: StreamingModel) -> list[list[int]]:
    requests = [GenerationRequest(prompt_ids=p, max_new_tokens=8) for p in PROMPTS]
    return generate_ids(model=model, requests=requests)


@pytest.mark.parametrize(
    "tiers", [["cpu"] * 4, ["cpu", "disk", "cpu", "disk"]], ids=["resident", "half_disk"]
)
def test_kernel_model_gives_the_tokens_of_its_reference(q4_dir: Path, tiers: list[str]) -> None:
    placement = make_placement(model_dir=q4_dir, layer_tiers=tiers)
    f32 = torch.float32
    kernel = StreamingModel(model_dir=q4_dir, placement=placement, dtype=f32, decode="kernel")
    reference = StreamingModel(
        model_dir=q4_dir, placement=placement, dtype=f32, decode="kernel_reference"
    )
    try:
        assert _greedy(kernel) == _greedy(reference)
        # The Q4_0 LM head is computed by the kernel as well, the embedding decoded.
        assert kernel.store.is_packed(HEAD) and not kernel.store.is_packed(EMBED)
        # Resident layers hold the repacked matrices, never a decoded float32 one.
        held = kernel.store.held_bytes()
        for i, tier in enumerate(tiers):
            unit = layer_unit(i)
            if tier == "cpu":
                sources = kernel.store.sources_of(unit)
                assert held[unit] == sum(kernel_bytes(s) for s in sources)
            else:
                assert held[unit] == 0
        assert kernel.store.matrix_buffer.held_bytes() <= 512 * 256 * 4  # norms only
    finally:
        kernel.close()
        reference.close()


def test_resident_kernel_layers_skip_the_copy_thread_and_are_bound_once(
    q4_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resident Q4_0 layers leave the copy thread nothing to do: they are computed where
    they are held, each bound to its module once (not per step), and a placement change
    rebinds them, with the reference's tokens throughout."""
    from engine.executor import forward as forward_module

    placement = make_placement(model_dir=q4_dir, layer_tiers=["cpu"] * 4)
    f32 = torch.float32
    reference = StreamingModel(
        model_dir=q4_dir, placement=placement, dtype=f32, decode="kernel_reference"
    )
    try:
        want = _greedy(reference)
    finally:
        reference.close()
    kernel = StreamingModel(model_dir=q4_dir, placement=placement, dtype=f32, decode="kernel")
    built: list[str] = []
    real = forward_module.bind_matrices

    def counting(module: torch.nn.Module, **kwargs: object) -> object:
        built.append(type(module).__name__)
        return real(module, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(forward_module, "bind_matrices", counting)
    try:
        assert kernel.prefetcher is None  # no hand-off between threads per layer
        assert _greedy(kernel) == want
        assert len(built) == 5  # four layers and the head, at their first use
        assert _greedy(kernel) == want
        assert len(built) == 5
        # Layer 1 now streams from the disk (through the copy thread); the others'
        # bindings held the old tensors and are built again.
        kernel.apply_placement(
            make_placement(model_dir=q4_dir, layer_tiers=["cpu", "disk", "cpu", "cpu"])
        )
        assert kernel.prefetcher is not None
        assert _greedy(kernel) == want
        assert len(built) == 5 + 4
    finally:
        kernel.close()


def test_kernel_logits_close_to_the_float16_scale_reference(q4_dir: Path) -> None:
    """Against Q4_0's own float16 scales and float32 activations (decode="layer") the
    kernel is close but not equal: bfloat16 scales and activations."""
    placement = make_placement(model_dir=q4_dir, layer_tiers=["cpu"] * 4)
    ids = torch.tensor([PROMPTS[0]])
    out = {}
    for mode in ("kernel", "layer"):
        model = StreamingModel(
            model_dir=q4_dir, placement=placement, dtype=torch.float32, decode=mode
        )
        try:
            out[mode] = model.forward(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                position_ids=torch.arange(ids.shape[1])[None],
                cache=model.new_cache(),
                phase="prefill",
                last_only=False,
            )
        finally:
            model.close()
    diff = (out["kernel"] - out["layer"]).abs().max().item()
    assert 0 < diff < 0.05 * out["layer"].abs().max().item()


def test_repacked_sizes_count_nibbles_and_scales(q4_dir: Path) -> None:
    sources = index_checkpoint(q4_dir)[layer_unit(0)]
    for s in sources:
        if len(s.shape) == 2:
            n = s.shape[0] * s.shape[1]
            assert kernel_bytes(s) == n // 2 + n // 32 * 4
        else:
            assert kernel_bytes(s) == s.end - s.start


@pytest.mark.parametrize("rows", [64, 96, 1536])
def test_repack_gives_the_converters_layout(rows: int) -> None:
    g = torch.Generator().manual_seed(rows)
    raw = _q4_0(torch.randn(rows, 256, generator=g))
    q, _ = int4.unpack_q4_0(raw, shape=(rows, 256))
    want = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.to(torch.int32), 1)
    nibbles, _ = int4.repack(raw, shape=(rows, 256))
    assert torch.equal(nibbles, want)


def test_the_executor_chooses_the_kernel_for_q4_0_on_a_cpu(q4_dir: Path) -> None:
    sources = [index_checkpoint(q4_dir)[layer_unit(0)]]
    cpu = torch.device("cpu")
    assert choose_decode(device=cpu, packed=sources, streamed_from_disk=True) == "kernel"
    assert choose_decode(device=cpu, packed=[], streamed_from_disk=True) == "matrix"
    assert choose_decode(device=cpu, packed=[], streamed_from_disk=False) == "layer"
    cuda = torch.device("cuda")
    assert choose_decode(device=cuda, packed=sources, streamed_from_disk=True) == "layer"
    placement = make_placement(model_dir=q4_dir, layer_tiers=["cpu"] * 4)
    model = StreamingModel(model_dir=q4_dir, placement=placement, dtype=torch.float32)
    try:
        assert model.store.decode == "kernel"
    finally:
        model.close()
