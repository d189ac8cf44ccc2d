"""The embedder's bf16 weights on the CPU: a real sentence-transformers architecture
with random weights, written locally; kept only where they give the float32 vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from engine.rag.ingest import bf16_embedder, openvino_embedder
from engine.rag.ingest.embedder import Embedder
from tests.support.tiny_embedder import write_random_embedder

TEXTS = ["owls hunt at night", "ferns grow in shade and " * 30, "x", "canals have locks"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_embedder(tmp_path_factory.mktemp("models") / "tiny", hidden=32)


def _weights_dtype(embedder: Embedder) -> torch.dtype:
    return next(embedder._model.parameters()).dtype


def test_bf16_gives_float32s_vectors_on_every_path(tiny_model: Path) -> None:
    fast = Embedder(model=str(tiny_model), device="cpu", backend="bf16")
    plain = Embedder(model=str(tiny_model), device="cpu", backend="torch")
    assert fast.backend == "bf16" and _weights_dtype(fast) == torch.bfloat16
    assert plain.backend == "torch" and _weights_dtype(plain) == torch.float32
    want = plain.embed(TEXTS, batch_size=3)
    for got in (
        fast.embed(TEXTS, batch_size=3),
        fast.embed(TEXTS, batch_size=3, background=True),
        fast._encode_beside(TEXTS, batch_size=3),
    ):
        assert got.dtype == np.float32 and got.shape == want.shape
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
        assert np.min(np.sum(got * want, axis=1)) >= 0.999


def test_auto_takes_bf16_only_where_it_is_fast_and_with_the_engines_cache(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # OpenVINO goes first where bf16 is fast (tests/engine/rag/ingest/test_openvino_embedder.py).
    monkeypatch.setattr(openvino_embedder, "openvino_installed", lambda: False)
    monkeypatch.setattr(bf16_embedder, "bf16_applies", lambda: True)
    assert Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path).backend == "bf16"
    assert Embedder(model=str(tiny_model), device="cpu").backend == "torch"  # no cache: tests
    monkeypatch.setattr(bf16_embedder, "bf16_applies", lambda: False)
    assert Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path).backend == "onnx"


def test_a_bf16_copy_that_changes_the_vectors_is_not_kept(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(openvino_embedder, "openvino_installed", lambda: False)
    monkeypatch.setattr(bf16_embedder, "bf16_applies", lambda: True)
    monkeypatch.setattr(bf16_embedder, "MIN_COSINE", 1.5)  # no copy can pass
    auto = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path)
    # The ONNX path it fell back to holds no library model, bf16 or other.
    assert auto.backend == "onnx" and auto._model is None
    asked = Embedder(model=str(tiny_model), device="cpu", backend="bf16")
    assert asked.backend == "torch" and _weights_dtype(asked) == torch.float32


def test_a_cpu_that_lists_bf16_is_taken_at_its_word_not_by_a_timing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The timing is a few milliseconds: on a busy machine it said "no" on a CPU with
    # AVX-512 BF16, and the embedder fell back to float32 at half the speed.
    from engine.runtime.models import loading

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f avx512_bf16 avx512_vnni\n")
    assert "avx512_bf16" in bf16_embedder.cpu_flags(cpuinfo=cpuinfo)
    assert bf16_embedder.cpu_flags(cpuinfo=tmp_path / "absent") == frozenset()
    monkeypatch.setattr(bf16_embedder, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    monkeypatch.setattr(loading, "cpu_bf16_is_fast", lambda: False)
    assert bf16_embedder.bf16_applies()
    monkeypatch.setattr(bf16_embedder, "cpu_flags", lambda: frozenset({"avx2"}))
    assert not bf16_embedder.bf16_applies()  # no flag: the timing decides
