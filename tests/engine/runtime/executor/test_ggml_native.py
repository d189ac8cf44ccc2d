"""The native kernel library against gguf's dequantize-then-matmul: every block type on
random blocks and on real tensors, several row and thread counts; its build, its cache,
and the torch forms taking over when it cannot be built."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType
from gguf.quants import dequantize as reference

from bench.real_models import fetch_hint, find_real_model
from engine.runtime.executor import ggml_native
from engine.runtime.executor.quant import block_bytes
from engine.runtime.models.gguf_header import read_header

Q = GGMLQuantizationType
# Where each format keeps its float16 scales (byte ranges inside a block): random bytes
# there would make NaNs and infinities.
_HALF_FIELDS = {
    Q.Q4_0: [(0, 2)],
    Q.Q4_1: [(0, 2), (2, 4)],
    Q.Q5_0: [(0, 2)],
    Q.Q5_1: [(0, 2), (2, 4)],
    Q.Q8_0: [(0, 2)],
    Q.Q4_K: [(0, 2), (2, 4)],
    Q.Q5_K: [(0, 2), (2, 4)],
    Q.Q6_K: [(208, 210)],
}


@pytest.fixture(scope="module")
def lib(native_cache: Path) -> ggml_native.Library:
    loaded = ggml_native._loaded(native_cache, ggml_native.find_compiler())
    if loaded is None:
        pytest.skip("no C compiler here: the native kernel cannot be built")
    return loaded


def _random_matrix(qtype: Q, *, rows: int, cols: int, seed: int) -> torch.Tensor:
    per, size = block_bytes(qtype)
    rng = np.random.default_rng(seed)
    n = rows * cols // per
    raw = rng.integers(0, 256, size=(n, size), dtype=np.uint8)
    for start, end in _HALF_FIELDS[qtype]:
        raw[:, start:end] = rng.normal(0.0, 0.05, n).astype(np.float16).view(np.uint8).reshape(n, 2)
    return torch.from_numpy(raw.reshape(rows, -1).copy())


def _weight(raw: torch.Tensor, qtype: Q, cols: int) -> torch.Tensor:
    return torch.from_numpy(reference(raw.numpy().reshape(-1), qtype)).reshape(-1, cols)


def _assert_close(got: torch.Tensor, *, x: torch.Tensor, weight: torch.Tensor) -> None:
    """Within what quantizing x to int8 per block can move a dot product: each value by at
    most half a step, max|x| / 254, times Σ|w| (and float rounding)."""
    want = x.double() @ weight.double().T
    bound = weight.abs().double().sum(1) * x.abs().max(dim=1, keepdim=True).values.double() / 254
    assert torch.all((got.double() - want).abs() <= bound * 1.01 + 1e-4)


@pytest.mark.parametrize("qtype", sorted(_HALF_FIELDS, key=int), ids=lambda q: q.name)
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("threads", [1, 2])
def test_kernel_equals_dequantize_then_matmul(
    lib: ggml_native.Library, qtype: Q, rows: int, threads: int
) -> None:
    cols = 512  # two K-quant super-blocks, sixteen legacy blocks
    raw = _random_matrix(qtype, rows=70, cols=cols, seed=int(qtype) * 7 + rows)
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(rows))
    out = torch.full((rows, 70), float("nan"))
    lib.matmul(qtype=int(qtype), raw=raw, cols=cols, x=x, out=out, threads=threads)
    _assert_close(out, x=x, weight=_weight(raw, qtype, cols))


@pytest.mark.parametrize("qtype", [Q.Q4_K, Q.Q6_K], ids=lambda q: q.name)
def test_a_batchs_rows_equal_each_row_alone(lib: ggml_native.Library, qtype: Q) -> None:
    """A decode step of several rows takes the many-row kernels (a block unpacked once
    for all rows): each row's products are the one-row kernel's, to the bit."""
    cols = 768
    raw = _random_matrix(qtype, rows=40, cols=cols, seed=11)
    x = torch.randn(7, cols, generator=torch.Generator().manual_seed(3))
    together = torch.full((7, 40), float("nan"))
    lib.matmul(qtype=int(qtype), raw=raw, cols=cols, x=x, out=together, threads=2)
    for r in range(7):
        alone = torch.full((1, 40), float("nan"))
        lib.matmul(qtype=int(qtype), raw=raw, cols=cols, x=x[r : r + 1], out=alone, threads=1)
        assert torch.equal(together[r], alone[0])


@pytest.fixture(scope="module")
def avx2_lib(native_cache: Path) -> ggml_native.Library:
    """The library built without AVX-512: the 256-bit kernels a CPU without it runs."""
    loaded = ggml_native._loaded(
        native_cache,
        ggml_native.find_compiler(),
        (*ggml_native.FLAGS, "-mno-avx512f"),
    )
    if loaded is None:
        pytest.skip("no C compiler here: the native kernel cannot be built")
    return loaded


@pytest.mark.parametrize("qtype", sorted(_HALF_FIELDS, key=int), ids=lambda q: q.name)
def test_the_avx2_kernels_equal_dequantize_then_matmul(
    avx2_lib: ggml_native.Library, qtype: Q
) -> None:
    cols = 512
    raw = _random_matrix(qtype, rows=70, cols=cols, seed=int(qtype) * 5)
    x = torch.randn(3, cols, generator=torch.Generator().manual_seed(4))
    out = torch.full((3, 70), float("nan"))
    avx2_lib.matmul(qtype=int(qtype), raw=raw, cols=cols, x=x, out=out, threads=2)
    _assert_close(out, x=x, weight=_weight(raw, qtype, cols))


def test_a_zero_row_of_activations_gives_zeros(lib: ggml_native.Library) -> None:
    raw = _random_matrix(Q.Q4_K, rows=16, cols=256, seed=1)
    out = torch.full((1, 16), float("nan"))
    lib.matmul(qtype=int(Q.Q4_K), raw=raw, cols=256, x=torch.zeros(1, 256), out=out, threads=1)
    assert torch.equal(out, torch.zeros(1, 16))


def test_several_matrices_in_one_call_equal_one_call_each(lib: ggml_native.Library) -> None:
    cols = 256
    parts = [
        (Q.Q4_K, _random_matrix(Q.Q4_K, rows=48, cols=cols, seed=1)),
        (Q.Q6_K, _random_matrix(Q.Q6_K, rows=20, cols=cols, seed=2)),
        (Q.Q8_0, _random_matrix(Q.Q8_0, rows=33, cols=cols, seed=3)),
    ]
    x = torch.randn(2, cols, generator=torch.Generator().manual_seed(0))
    joined = torch.empty(2, sum(r.shape[0] for _, r in parts))
    outs = list(joined.split([r.shape[0] for _, r in parts], dim=1))
    lib.matmul_many(
        qtypes=[int(q) for q, _ in parts],
        raws=[r for _, r in parts],
        cols=cols,
        x=x,
        outs=outs,
        threads=2,
    )
    for (qtype, raw), got in zip(parts, outs, strict=True):
        alone = torch.empty(2, raw.shape[0])
        lib.matmul(qtype=int(qtype), raw=raw, cols=cols, x=x, out=alone, threads=1)
        assert torch.equal(got, alone)


@pytest.mark.parametrize("qtype", sorted(_HALF_FIELDS, key=int), ids=lambda q: q.name)
def test_decoded_rows_equal_the_reference(lib: ggml_native.Library, qtype: Q) -> None:
    raw = _random_matrix(qtype, rows=130, cols=256, seed=int(qtype))
    want = _weight(raw, qtype, 256)
    f32 = torch.empty(130, 256)
    lib.decode(qtype=int(qtype), raw=raw, cols=256, out=f32, threads=2)
    torch.testing.assert_close(f32, want, rtol=1e-6, atol=1e-7)
    bf16 = torch.empty(130, 256, dtype=torch.bfloat16)
    lib.decode(qtype=int(qtype), raw=raw, cols=256, out=bf16, threads=1)
    assert torch.equal(bf16, f32.to(torch.bfloat16))


def test_bad_shapes_are_refused_before_the_library_reads_anything(
    lib: ggml_native.Library,
) -> None:
    raw = _random_matrix(Q.Q4_0, rows=4, cols=64, seed=0)
    with pytest.raises(ValueError, match="out is"):
        lib.matmul(
            qtype=int(Q.Q4_0),
            raw=raw,
            cols=64,
            x=torch.ones(1, 64),
            out=torch.empty(1, 5),
            threads=1,
        )
    with pytest.raises(ValueError, match="refused"):
        lib.matmul(
            qtype=int(Q.Q2_K),
            raw=raw,
            cols=64,
            x=torch.ones(1, 64),
            out=torch.empty(1, 4),
            threads=1,
        )


_REAL = {
    "qwen2.5-coder-1.5b-instruct-q4_k_m": ("blk.0.attn_q.weight", "blk.0.ffn_down.weight"),
    "qwen2.5-coder-0.5b-instruct-q4_k_m": (
        "blk.0.attn_q.weight",
        "blk.0.attn_v.weight",
        "output.weight",
    ),
    "smollm2-135m-instruct-q4_1": ("blk.0.ffn_up.weight", "token_embd.weight"),
}


def real_rows(
    name: str, tensors: tuple[str, ...], *, rows: int
) -> Iterator[tuple[Q, torch.Tensor, int]]:
    """(type, the first `rows` rows of stored bytes, columns) of each named tensor of
    the real model `name`; skips the test when the model is not fetched. The tensor
    table comes from the header reader the engine loads GGUF files with
    (engine/runtime/models/gguf_header.py): `GGUFReader` spent 2-7 CPU-seconds a model
    on the tokenizer's metadata before a tensor was touched (issue #41)."""
    path = find_real_model(name)
    if path is None:
        pytest.skip(fetch_hint(name))
    header = read_header(path)
    found = [t for t in header.tensors if t.name in tensors]
    assert sorted(t.name for t in found) == sorted(tensors)
    with path.open("rb") as f:
        for tensor in found:
            qtype, cols = Q(tensor.qtype), tensor.dims[0]
            per, size = block_bytes(qtype)
            row_bytes = cols // per * size
            f.seek(tensor.start)
            data = f.read(row_bytes * min(rows, tensor.dims[1]))
            raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
            yield qtype, raw.view(-1, row_bytes), cols


@pytest.mark.parametrize("name", sorted(_REAL))
def test_real_tensors_equal_dequantize_then_matmul(lib: ggml_native.Library, name: str) -> None:
    for qtype, raw, cols in real_rows(name, _REAL[name], rows=300):
        x = torch.randn(3, cols, generator=torch.Generator().manual_seed(5))
        for threads in (1, 2):
            out = torch.empty(3, raw.shape[0])
            lib.matmul(qtype=int(qtype), raw=raw, cols=cols, x=x, out=out, threads=threads)
            _assert_close(out, x=x, weight=_weight(raw, qtype, cols))


def test_the_build_is_cached_by_source_flags_and_compiler(tmp_path: Path) -> None:
    compiler = ggml_native.find_compiler()
    if compiler is None:
        pytest.skip("no C compiler here")
    first = ggml_native.build(cache=tmp_path, compiler=compiler)
    assert first.path is not None and first.path.parent == tmp_path
    stamp = first.path.stat().st_mtime_ns
    again = ggml_native.build(cache=tmp_path, compiler=compiler)
    assert again.path == first.path and again.path.stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [first.path.name]  # no partial build left


def test_without_a_compiler_the_torch_forms_compute_and_the_log_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    built = ggml_native.build(cache=tmp_path, compiler=None)
    assert built.path is None and "no C compiler" in built.reason
    with caplog.at_level(logging.WARNING, logger=ggml_native.__name__):
        assert ggml_native._loaded(tmp_path, None) is None
        assert ggml_native._loaded(tmp_path, None) is None
    said = [r.getMessage() for r in caplog.records if "torch kernel forms used" in r.getMessage()]
    assert len(said) == 1 and "no C compiler" in said[0]


def test_a_failing_compiler_leaves_nothing_behind(tmp_path: Path) -> None:
    fake = tmp_path / "cc"
    fake.write_text("#!/bin/sh\necho 'error: this compiler is broken' >&2\nexit 1\n")
    fake.chmod(0o755)
    built = ggml_native.build(cache=tmp_path / "cache", compiler=str(fake))
    assert built.path is None and "this compiler is broken" in built.reason
    assert list((tmp_path / "cache").iterdir()) == []


def test_the_environment_variable_forces_the_torch_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ggml_native.FORCE_TORCH_ENV, "1")
    assert ggml_native.library() is None


# A step whose top two logits are closer than this is a near tie: two roundings of the
# same model may order them either way (int8 activations against bf16 ones and
# int8-requantized weights move a logit by about 0.1–0.3 on these models).
_CLEAR_MARGIN = 0.5


@pytest.mark.parametrize(
    "name",
    [
        "smollm2-135m-instruct-q4_1",
        # Loading the 0.5B twice costs the quick suite about 20 CPU-seconds; its K-quant
        # blocks are checked against dequantize-then-matmul in the quick form above.
        pytest.param("qwen2.5-coder-0.5b-instruct-q4_k_m", marks=pytest.mark.slow),
    ],
)
def test_a_real_model_generates_the_torch_forms_greedy_tokens(
    lib: ggml_native.Library, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the product's loading path, decoding step by step (the native decode layer
    runs): along the torch forms' greedy tokens of a short chat prompt, the native form
    picks the same token at every step the torch forms do not call a near tie, and the
    first token always (the two differ in rounding only: int8 activations here, bf16
    activations and int8-requantized weights there)."""
    from engine.paths import resolve_paths
    from engine.rag.answer.in_use import open_model
    from engine.runtime.executor.generate import GenerationRequest, generate_ids
    from engine.runtime.models.resolve import resolve_model_path

    path = find_real_model(name)
    if path is None:
        pytest.skip(fetch_hint(name))
    monkeypatch.setenv("RAGDOLL_HOME", str(tmp_path / "home"))
    folder = resolve_model_path(model=str(path))
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    chat = [{"role": "user", "content": "What does apt-get update do? One sentence."}]
    ids = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    steps: dict[bool, list[torch.Tensor]] = {}
    greedy: list[int] = []
    for forced in (True, False):
        if forced:
            monkeypatch.setenv(ggml_native.FORCE_TORCH_ENV, "1")
        else:
            monkeypatch.delenv(ggml_native.FORCE_TORCH_ENV)
        in_use = open_model(
            model_path=folder, device="cpu", paths=resolve_paths(), stop_at_eos=False
        )
        try:
            executor = in_use.answerer.executor
            forms = {
                k.rpartition(":")[2] for t in executor.store._held.values() for k in t if ":" in k
            }
            assert ("ggml" in forms) != forced, forms
            if forced:
                request = GenerationRequest(
                    prompt_ids=tuple(ids), max_new_tokens=8, stop_token_ids=()
                )
                greedy = generate_ids(model=executor, requests=[request])[0]
            steps[forced] = _step_logits(executor, prompt=ids, forced_tokens=greedy)
        finally:
            in_use.close()
    assert int(steps[False][0].argmax()) == greedy[0]
    for torch_step, native in zip(steps[True], steps[False], strict=True):
        top = torch_step.topk(2).values
        if float(top[0] - top[1]) >= _CLEAR_MARGIN:
            assert int(native.argmax()) == int(torch_step.argmax())


def _step_logits(executor: object, *, prompt: list[int], forced_tokens: list[int]) -> list:
    """The logits before each of `forced_tokens`, fed one decode step at a time."""
    t = len(prompt)
    cache = executor.new_cache()  # type: ignore[attr-defined]
    logits = executor.forward(  # type: ignore[attr-defined]
        input_ids=torch.tensor([prompt]),
        attention_mask=torch.ones(1, t, dtype=torch.long),
        position_ids=torch.arange(t)[None],
        cache=cache,
        phase="prefill",
    )
    out = [logits[0, -1].clone()]
    for i, token in enumerate(forced_tokens[:-1]):
        logits = executor.forward(  # type: ignore[attr-defined]
            input_ids=torch.tensor([[token]]),
            attention_mask=torch.ones(1, t + i + 1, dtype=torch.long),
            position_ids=torch.tensor([[t + i]]),
            cache=cache,
            phase="decode",
        )
        out.append(logits[0, -1].clone())
    return out
