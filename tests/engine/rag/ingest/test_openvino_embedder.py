"""The OpenVINO path of the embedder: a real sentence-transformers architecture with
random weights, written locally, compiled from the ONNX export in the cache folder and
giving the vectors torch gives in float32; chosen only where it applies, with a fallback."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from engine.rag.ingest import bf16_embedder, onnx_embedder, openvino_embedder
from engine.rag.ingest.embedder import Embedder
from tests.support.empty_home import run_with_empty_home
from tests.support.tiny_embedder import write_random_embedder

TEXTS = [
    "owls hunt at night",
    "ferns grow in shade and " * 30,  # truncated at the model's 128 tokens
    "x",
    "canals have locks for boats",
]

needs_openvino = pytest.mark.skipif(
    not openvino_embedder.openvino_installed(), reason="OpenVINO is not installed"
)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_embedder(tmp_path_factory.mktemp("models") / "tiny", hidden=32)


@needs_openvino
@pytest.mark.parametrize("fast_bf16", [True, False])
def test_openvino_gives_float32_torchs_vectors_on_every_path(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast_bf16: bool
) -> None:
    monkeypatch.setattr(bf16_embedder, "bf16_applies", lambda: fast_bf16)
    cache = tmp_path / "cache"
    fast = Embedder(model=str(tiny_model), device="cpu", cache_dir=cache, backend="openvino")
    assert fast.backend == "openvino"
    assert fast._onnx.precision == ("bf16" if fast_bf16 else "f32")
    [exported] = list(cache.glob("*.onnx"))  # the ONNX path's export, shared
    stamp = exported.stat().st_mtime_ns
    want = Embedder(model=str(tiny_model), device="cpu", backend="torch").embed(TEXTS)
    for got in (
        fast.embed(TEXTS, batch_size=3),
        fast.embed(TEXTS, batch_size=3, background=True),  # the sibling compiled for ingestion
        fast._encode_beside(TEXTS, batch_size=3),
    ):
        assert got.shape == want.shape == (len(TEXTS), 32) and got.dtype == np.float32
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
        assert np.min(np.sum(got * want, axis=1)) >= 0.999
    again = Embedder(model=str(tiny_model), device="cpu", cache_dir=cache, backend="openvino")
    assert again.backend == "openvino" and exported.stat().st_mtime_ns == stamp
    # Compiled from an IR written once beside the export: its weights are mapped pages.
    [ir] = list(cache.glob("*.ov.xml"))
    assert ir.with_suffix(".bin").stat().st_size > 0 and not list(cache.glob(".*"))


@needs_openvino
def test_an_ir_that_cannot_be_written_compiles_from_onnx(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ov = openvino_embedder.import_openvino()

    def full_disk(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ov, "save_model", full_disk)
    cache = tmp_path / "cache"
    fast = Embedder(model=str(tiny_model), device="cpu", cache_dir=cache, backend="openvino")
    assert fast.backend == "openvino"
    want = Embedder(model=str(tiny_model), device="cpu", backend="torch").embed(TEXTS)
    assert np.min(np.sum(fast.embed(TEXTS) * want, axis=1)) >= 0.999
    assert not list(cache.glob("*.ov.*")) and not list(cache.glob(".*"))


@needs_openvino
def test_a_questions_texts_grouped_by_length_keep_their_vectors_bit_for_bit(
    tiny_model: Path, tmp_path: Path
) -> None:
    """Embedder.embed encodes a question's texts in groups of like length; the vector
    of each must be exactly the one a single batch of them all gives (the gate's and
    the search's decisions compare these vectors)."""
    fast = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path, backend="openvino")
    texts = [TEXTS[0], TEXTS[1], TEXTS[3], TEXTS[0], TEXTS[2]]
    one_batch = fast._encode(texts, batch_size=32)
    grouped = fast.embed(texts)
    assert np.array_equal(grouped, one_batch)
    assert np.array_equal(grouped[0], grouped[3])


@needs_openvino
def test_openvino_encodes_in_two_threads_at_once(tiny_model: Path, tmp_path: Path) -> None:
    fast = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path, backend="openvino")
    want = fast.embed(TEXTS)
    results: list[np.ndarray] = []

    def work() -> None:
        for _ in range(5):
            results.append(fast._encode_beside(TEXTS, batch_size=2))

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 10
    for got in results:  # an infer request is never shared by two inferences
        assert np.allclose(got, want, atol=1e-5)


@needs_openvino
def test_auto_takes_openvino_only_where_bf16_is_fast(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bf16_embedder, "bf16_applies", lambda: True)
    assert Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path).backend == "openvino"
    assert Embedder(model=str(tiny_model), device="cpu").backend == "torch"  # no cache: tests
    monkeypatch.setattr(bf16_embedder, "bf16_applies", lambda: False)
    assert Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path).backend == "onnx"


def test_without_openvino_auto_holds_bf16_weights_and_asked_falls_back(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(openvino_embedder, "openvino_installed", lambda: False)
    monkeypatch.setattr(bf16_embedder, "bf16_applies", lambda: True)
    assert Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path).backend == "bf16"
    asked = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path, backend="openvino")
    assert asked.backend == "torch"


@needs_openvino
def test_openvino_that_changes_the_vectors_is_not_kept_nor_tried_again(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bf16_embedder, "bf16_applies", lambda: True)
    monkeypatch.setattr(openvino_embedder, "MIN_COSINE", 1.5)  # no compiled model can pass
    compiles: list[Path] = []
    real = openvino_embedder.compile_openvino

    def counted(*, file: Path, precision: str) -> object:
        compiles.append(file)
        return real(file=file, precision=precision)

    monkeypatch.setattr(openvino_embedder, "compile_openvino", counted)
    first = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path)
    assert first.backend == "bf16" and len(compiles) == 1  # the next back-end
    assert list(tmp_path.glob("*.openvino-bf16.failed"))
    again = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path)
    assert again.backend == "bf16" and len(compiles) == 1
    # ONNX Runtime's own marker is another file: its path is still tried where it applies.
    assert not list(tmp_path.glob("*.onnx.failed"))
    assert onnx_embedder.MIN_COSINE == 0.999


@needs_openvino
def test_openvino_is_imported_with_its_telemetry_declined_and_nothing_written_home(
    tmp_path: Path,
) -> None:
    # A plain `import openvino` with a fresh home folder writes a client id there and
    # sends an "import" event (its conversion tools' telemetry, consent assumed).
    code = (
        "import os\n"
        "from engine.rag.ingest.openvino_embedder import openvino_installed\n"
        "assert openvino_installed()\n"
        "from openvino.tools import ovc\n"
        "print(ovc.telemetry.consent, os.environ.get('CI'))\n"
    )
    stdout, home = run_with_empty_home(code=code, tmp_path=tmp_path, unset=("CI", "NNCF_CI"))
    assert stdout.split() == ["False", "None"]
    assert not any(home.rglob("*"))
