"""Which kernel form each GGUF matrix takes, what it holds, fusion, and the matmul that
picks the kernel or a bfloat16 matmul by the number of rows."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize
from gguf.quants import quantize as reference_quantize

from engine.runtime.executor import ggml_native, int4, int8
from engine.runtime.executor import kernel_forms as kf
from engine.runtime.models.gguf_file import GGUFTensor, permute_rows
from engine.runtime.models.gguf_kquants import quantize_q4_k, quantize_q6_k

pytestmark = pytest.mark.skipif(
    not (int4.available() and int8.available()), reason="torch lacks the CPU kernels"
)


@pytest.fixture(autouse=True)
def torch_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    """The torch forms, unless a test asks for the native one (`native`)."""
    monkeypatch.setenv(ggml_native.FORCE_TORCH_ENV, "1")


@pytest.fixture
def native(monkeypatch: pytest.MonkeyPatch) -> ggml_native.Library:
    monkeypatch.delenv(ggml_native.FORCE_TORCH_ENV)
    lib = ggml_native.library()
    if lib is None:
        pytest.skip("the native kernel cannot be built here (no C compiler)")
    return lib


def tensor(name: str, qtype: T, shape: tuple[int, int]) -> tuple[GGUFTensor, torch.Tensor]:
    g = np.random.default_rng(hash((name, int(qtype))) % 2**32)
    data = g.normal(size=shape).astype(np.float32)
    if qtype == T.Q4_K:
        raw = quantize_q4_k(data)
    elif qtype == T.Q6_K:
        raw = quantize_q6_k(data)
    else:
        raw = reference_quantize(data, qtype)
    flat = torch.from_numpy(np.ascontiguousarray(raw)).reshape(-1)
    info = GGUFTensor(
        name=name,
        gguf_name=name,
        qtype=qtype,
        shape=shape,
        start=0,
        end=flat.numel(),
        permute_heads=0,
    )
    return info, flat


def values_of(info: GGUFTensor, raw: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(dequantize(raw.numpy(), info.qtype).reshape(info.shape).copy())


@pytest.mark.parametrize(
    ("qtype", "shape", "form"),
    [
        (T.Q4_0, (128, 64), "int4"),
        (T.Q4_1, (64, 64), "int4"),
        (T.Q4_K, (128, 256), "int4"),
        (T.Q4_0, (800, 64), "int8"),  # rows not in tiles of 64
        (T.Q6_K, (128, 256), "int8"),
        (T.Q5_0, (64, 64), "int8"),
        (T.Q8_0, (64, 64), "int8"),
        (T.F16, (64, 64), None),
        (T.F32, (64, 64), None),
    ],
)
def test_each_format_takes_its_form(qtype: T, shape: tuple[int, int], form: str | None) -> None:
    info = GGUFTensor(
        name="w", gguf_name="w", qtype=qtype, shape=shape, start=0, end=1, permute_heads=0
    )
    assert kf.form_of(info) == form
    n = math.prod(shape)
    if form == "int4":
        assert kf.form_bytes(info) == n // 2 + n // 32 * 4
    elif form == "int8":
        assert kf.form_bytes(info) == n + shape[0] * 2


@pytest.mark.parametrize("qtype", [T.Q6_K, T.Q5_0, T.Q8_0, T.Q5_1])
def test_int8_form_is_the_files_values_within_half_a_row_step(qtype: T) -> None:
    info, raw = tensor("w", qtype, (128, 256))
    parts = kf.to_parts(raw, tensor=info)
    assert parts.form == "int8"
    want = values_of(info, raw)
    got = kf.reference_weight(parts)
    step = parts.scales.float().unsqueeze(1)
    assert ((got - want).abs() <= step / 2 + 1e-7).all()


def _layer(qtype_v: T) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for name, qtype, shape in [
        ("self_attn.q_proj.weight", T.Q4_K, (256, 256)),
        ("self_attn.k_proj.weight", T.Q4_K, (128, 256)),
        ("self_attn.v_proj.weight", qtype_v, (128, 256)),
        ("mlp.gate_proj.weight", T.Q4_K, (512, 256)),
        ("mlp.up_proj.weight", T.Q4_K, (512, 256)),
    ]:
        info, raw = tensor(name, qtype, shape)
        out.update(kf.named(name, kf.to_parts(raw, tensor=info)))
    for bias, size in [("q", 256), ("k", 128), ("v", 128)]:
        out[f"self_attn.{bias}_proj.bias"] = torch.randn(size)
    return out


def test_fused_matrices_compute_what_their_members_did() -> None:
    layer = _layer(T.Q4_K)
    fused = kf.fuse_layer(layer)
    assert "self_attn.qkv_proj.weight:int4" in fused
    assert "mlp.gate_up_proj.weight:int4" in fused
    assert "self_attn.q_proj.weight:int4" not in fused
    assert "self_attn.q_proj.bias" not in fused
    ws = kf.Workspace()
    x = torch.randn(1, 2, 256)

    def run(tensors: dict[str, torch.Tensor], name: str) -> torch.Tensor:
        parts = kf.parts_of(tensors, f"{name}.weight")
        assert parts is not None
        return kf.linear(x, parts=parts, bias=tensors.get(f"{name}.bias"), buffer=ws)

    apart = torch.cat([run(layer, f"self_attn.{m}_proj") for m in "qkv"], dim=-1)
    # Each output row is its own sum: fusing rows changes nothing, bit for bit.
    assert torch.equal(run(fused, "self_attn.qkv_proj"), apart)
    gate_up = torch.cat([run(layer, "mlp.gate_proj"), run(layer, "mlp.up_proj")], dim=-1)
    assert torch.equal(run(fused, "mlp.gate_up_proj"), gate_up)


def test_members_of_other_forms_stay_apart() -> None:
    fused = kf.fuse_layer(_layer(T.Q6_K))  # v is int8, q and k int4
    assert "self_attn.qkv_proj.weight:int4" not in fused
    assert "self_attn.v_proj.weight:int8" in fused
    assert "mlp.gate_up_proj.weight:int4" in fused


@pytest.mark.parametrize("qtype", [T.Q4_K, T.Q6_K])
def test_many_rows_go_through_a_bf16_matmul_of_the_same_weights(qtype: T) -> None:
    info, raw = tensor("w", qtype, (256, 512))
    parts = kf.to_parts(raw, tensor=info)
    ws = kf.Workspace()
    x = torch.randn(300, 512)
    bias = torch.randn(256)
    many = kf.linear(x, parts=parts, bias=bias, buffer=ws)  # decoded, bfloat16 matmul
    few = torch.cat(
        [kf.linear(x[i : i + 4], parts=parts, bias=bias, buffer=ws) for i in range(0, 300, 4)]
    )  # the kernel, four rows at a time
    assert ws.held_bytes() >= 256 * 512 * 2  # the matrix decoded to bfloat16
    # bfloat16 rounding of the products apart (the weights are the same values).
    assert torch.allclose(many, few, rtol=2e-2, atol=2e-2 * few.abs().max().item())


def test_reference_workspace_computes_by_dequantize_then_matmul() -> None:
    info, raw = tensor("w", T.Q4_K, (64, 256))
    parts = kf.to_parts(raw, tensor=info)
    x = torch.randn(2, 256)
    got = kf.linear(x, parts=parts, bias=None, buffer=kf.Workspace(reference=True))
    want = kf.reference_linear(x, weight=kf.reference_weight(parts), bias=None)
    assert torch.equal(got, want)


def _permuted(info: GGUFTensor, heads: int) -> GGUFTensor:
    return GGUFTensor(
        name=info.name,
        gguf_name=info.gguf_name,
        qtype=info.qtype,
        shape=info.shape,
        start=info.start,
        end=info.end,
        permute_heads=heads,
    )


@pytest.mark.parametrize("qtype", [T.Q4_K, T.Q6_K, T.Q8_0, T.Q5_0, T.Q4_1, T.Q4_0])
def test_with_the_native_kernel_each_block_type_stays_as_stored(
    native: ggml_native.Library, qtype: T
) -> None:
    info, raw = tensor("w", qtype, (96, 256))
    assert kf.form_of(info) == "ggml"
    parts = kf.to_parts(raw, tensor=info)
    # The file's bytes and the few bytes of meta beside them, nothing more: as held.
    meta = parts.scales.numel() * parts.scales.element_size()
    assert kf.form_bytes(info) == raw.numel() + meta and meta <= 16
    assert parts.values.data_ptr() == raw.data_ptr()  # a view: nothing copied
    x = torch.randn(1, 3, 256, generator=torch.Generator().manual_seed(2))
    weight = values_of(info, raw)
    got = kf.linear(x, parts=parts, bias=None, buffer=kf.Workspace())
    want = x @ weight.T
    # Activations quantized to int8 per block: each value moves by at most max|x| / 254.
    bound = weight.abs().sum(1) * x.abs().max() / 254 * 1.01 + 1e-4
    assert torch.all((got - want).abs() <= bound)


def test_without_the_native_library_the_torch_forms_are_used(
    native: ggml_native.Library, monkeypatch: pytest.MonkeyPatch
) -> None:
    info, _ = tensor("w", T.Q4_K, (128, 256))
    assert kf.form_of(info) == "ggml"
    monkeypatch.setattr(ggml_native, "library", lambda: None)
    assert kf.form_of(info) == "int4"


def test_stored_q_rows_come_out_in_hugging_face_order(native: ggml_native.Library) -> None:
    info, raw = tensor("q", T.Q4_K, (64, 256))
    permuted = _permuted(info, heads=4)
    parts = kf.to_parts(raw, tensor=permuted)
    reference = kf.reference_weight(parts)
    hf = permute_rows(values_of(info, raw), heads=4, inverse=True)
    assert torch.equal(reference, hf)
    stored = kf.to_parts(raw, tensor=info)
    order = permute_rows(torch.arange(64), heads=4, inverse=True)
    for rows in (2, 40):  # the kernel, then the bfloat16 matmul
        x = torch.randn(rows, 256, generator=torch.Generator().manual_seed(rows))
        got = kf.linear(x, parts=parts, bias=None, buffer=kf.Workspace())
        in_file_order = kf.linear(x, parts=stored, bias=None, buffer=kf.Workspace())
        assert torch.equal(got, in_file_order[:, order])


def test_many_rows_decode_the_blocks_for_a_bf16_matmul(native: ggml_native.Library) -> None:
    # Q8_0: a type the integer GEMM does not take (Q4_K and Q6_K go to it where the CPU
    # has AVX-512 VNNI: tests/engine/runtime/executor/test_vnni_gemm.py).
    info, raw = tensor("w", T.Q8_0, (128, 512))
    parts = kf.to_parts(raw, tensor=info)
    x = torch.randn(64, 512, generator=torch.Generator().manual_seed(0))
    bias = torch.randn(128)
    got = kf.linear(x, parts=parts, bias=bias, buffer=kf.Workspace())
    weight = values_of(info, raw).to(torch.bfloat16)
    want = torch.nn.functional.linear(x.to(torch.bfloat16), weight).float() + bias
    torch.testing.assert_close(got, want, rtol=0.02, atol=0.05)


def test_matrices_over_the_same_rows_in_one_call_equal_one_call_each(
    native: ggml_native.Library,
) -> None:
    members = [tensor(n, q, (64, 256)) for n, q in (("q", T.Q4_K), ("k", T.Q4_K), ("v", T.Q6_K))]
    parts = [kf.to_parts(raw, tensor=info) for info, raw in members]
    assert kf.fused(parts) is None  # the blocks stay where the file has them
    biases = [torch.randn(64), None, torch.randn(64)]
    x = torch.randn(1, 1, 256, generator=torch.Generator().manual_seed(1))
    buffer = kf.Workspace()
    together = kf.linear_many(x, parts=parts, biases=biases, buffer=buffer)
    for p, b, got in zip(parts, biases, together, strict=True):
        assert torch.equal(got, kf.linear(x, parts=p, bias=b, buffer=buffer))


def test_the_prefill_buffers_count_the_integer_gemms_beside_the_bfloat16_one(
    native: ggml_native.Library,
) -> None:
    k4, _ = tensor("a", T.Q4_K, (64, 512))
    q8, _ = tensor("b", T.Q8_0, (32, 512))
    # Q4_K unpacked for the integer GEMM (1.5 bytes a value at most) while Q8_0 is
    # decoded to bfloat16 in a buffer of its own.
    assert kf.decode_buffer_bytes([[k4, q8]], head=[]) == 64 * 512 * 3 // 2 + 32 * 512 * 2
    # One type alone: the larger of the two ways it may be computed.
    assert kf.decode_buffer_bytes([[k4]], head=[]) == 64 * 512 * 2
