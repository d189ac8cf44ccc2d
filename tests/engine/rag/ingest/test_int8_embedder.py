"""Ingestion's int8 copy of the embedder: quantized once into the cache folder from
the ONNX export of a real (random-weight) sentence-transformers model, used for
ingestion's batches only, and left aside (ingestion stays in float) when it cannot
be made or its vectors are off."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.environ import EMBEDDER_INT8_ENV, EngineEnviron
from engine.rag.ingest import bf16_embedder, int8_embedder, int8_quantizer, openvino_embedder
from engine.rag.ingest.embedder import Embedder
from tests.support.empty_home import run_with_empty_home
from tests.support.tiny_embedder import write_random_embedder

TEXTS = [
    "owls hunt at night",
    "ferns grow in shade and " * 30,
    "x",
    "canals have locks for boats",
]

needs_int8 = pytest.mark.skipif(
    not (openvino_embedder.openvino_installed() and int8_embedder.nncf_installed()),
    reason="OpenVINO or NNCF is not installed",
)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_embedder(tmp_path_factory.mktemp("models") / "tiny", hidden=32)


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bf16_embedder, "bf16_applies", lambda: True)
    # A random-weight model is not MiniLM: its int8 vectors are checked with
    # looser bounds here; the tests that need a failing check set their own.
    monkeypatch.setattr(int8_embedder, "MIN_COSINE", 0.5)
    monkeypatch.setattr(int8_embedder, "MIN_MEDIAN_COSINE", 0.8)


def _torch(model: Path) -> np.ndarray:
    return Embedder(model=str(model), device="cpu", backend="torch").embed(TEXTS)


@needs_int8
def test_ingestion_embeds_in_int8_and_questions_keep_the_float_vectors(
    tiny_model: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    fast = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path)
    assert fast.backend == "openvino"
    assert fast.ingest_backend == "openvino"  # made at ingestion's first batch, not at load
    assert not list(tmp_path.glob("*.int8.xml"))
    want = _torch(tiny_model)
    fast.embed(TEXTS, batch_size=3, background=True)  # in float while int8 is made
    assert fast.int8_making is not None and fast.int8_making.wait(timeout_s=600)
    ingested = fast.embed(TEXTS, batch_size=3, background=True)
    assert fast.ingest_backend == "openvino-int8"
    # NNCF's progress bars stay off stdout: a `--json` bench prints only its JSON.
    assert capfd.readouterr().out == ""
    [made] = list(tmp_path.glob("*.int8.xml"))
    assert made.with_suffix(".bin").is_file() and not list(tmp_path.glob("*.tmp.*"))
    assert not list(tmp_path.glob("*.feeds.npz"))  # the calibration inputs handed to the child
    assert "nncf" not in sys.modules  # NNCF ran in its own process, not in this one
    assert ingested.shape == want.shape and ingested.dtype == np.float32
    assert np.allclose(np.linalg.norm(ingested, axis=1), 1.0, atol=1e-5)
    assert np.min(np.sum(ingested * want, axis=1)) >= 0.5  # near, not the same
    asked = fast.embed(TEXTS)  # a question: the float path
    assert np.min(np.sum(asked * want, axis=1)) >= 0.999
    stamp = made.stat().st_mtime_ns
    again = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path)
    again.embed(TEXTS, background=True)
    assert again.ingest_backend == "openvino-int8" and made.stat().st_mtime_ns == stamp


@needs_int8
@pytest.mark.parametrize(
    ("backend", "env"), [("openvino", None), ("auto", "0")], ids=["asked-openvino", "int8-off"]
)
def test_int8_is_not_used_when_switched_off_or_openvino_is_asked_for(
    tiny_model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    env: str | None,
) -> None:
    if env is not None:
        monkeypatch.setenv(EMBEDDER_INT8_ENV, env)
    asked = EngineEnviron.from_environ()
    fast = Embedder(
        model=str(tiny_model), device="cpu", cache_dir=tmp_path, backend=backend, environ=asked
    )
    got = fast.embed(TEXTS, background=True)
    assert fast.ingest_backend == "openvino" and not list(tmp_path.glob("*.int8.*"))
    assert np.min(np.sum(got * _torch(tiny_model), axis=1)) >= 0.999


@needs_int8
def test_a_quantization_that_fails_leaves_ingestion_in_float_and_is_not_tried_again(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries: list[Path] = []

    def broken(*, onnx: Path, out: Path, **_: object) -> None:
        tries.append(out)
        raise RuntimeError("no quantizer here")

    monkeypatch.setattr(int8_quantizer, "quantize_in_child", broken)
    fast = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path, backend="int8")
    fast.embed(TEXTS, background=True)
    assert fast.int8_making is not None and fast.int8_making.wait(timeout_s=60)
    got = fast.embed(TEXTS, background=True)
    assert fast.ingest_backend == "openvino" and len(tries) == 1
    assert np.min(np.sum(got * _torch(tiny_model), axis=1)) >= 0.999
    [failed] = list(tmp_path.glob("*.int8.xml.failed"))
    assert "no quantizer here" in failed.read_text()
    again = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path, backend="int8")
    again.embed(TEXTS, background=True)
    assert again.ingest_backend == "openvino" and len(tries) == 1


@needs_int8
def test_an_int8_model_whose_vectors_are_off_is_not_used(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(int8_embedder, "MIN_MEDIAN_COSINE", 1.5)  # no int8 model can pass
    fast = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path)
    fast.embed(TEXTS, background=True)
    assert fast.int8_making is not None and fast.int8_making.wait(timeout_s=600)
    fast.embed(TEXTS, background=True)
    assert fast.ingest_backend == "openvino"
    [failed] = list(tmp_path.glob("*.int8.xml.failed"))
    assert "median" in failed.read_text()


@needs_int8
def test_ingestion_embeds_in_float_while_the_int8_model_is_made(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #44: the first ingestion stood at "0 of 834 chunks embedded" for the
    minutes NNCF took; now its batches go in, in float, and the int8 model takes
    over at the first batch after it is made."""
    release = threading.Event()
    real = int8_quantizer.quantize_in_child

    def slow(**kw: Any) -> None:
        assert release.wait(60), "the test never released the quantizer"
        real(**kw)

    monkeypatch.setattr(int8_quantizer, "quantize_in_child", slow)
    fast = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path)
    want = _torch(tiny_model)
    embedded: list[np.ndarray] = []
    worker = threading.Thread(
        target=lambda: embedded.extend(fast.embed(TEXTS, background=True) for _ in range(3))
    )
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "ingestion waited for the quantization"
    release.set()
    assert fast.ingest_backend == "openvino"  # float until the int8 model is made
    assert all(np.min(np.sum(got * want, axis=1)) >= 0.999 for got in embedded)
    assert fast.int8_making is not None and fast.int8_making.wait(timeout_s=600)
    fast.embed(TEXTS, background=True)
    assert fast.ingest_backend == "openvino-int8" and fast.int8_making is None


def test_without_nncf_ingestion_stays_in_float(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not openvino_embedder.openvino_installed():
        pytest.skip("OpenVINO is not installed")
    monkeypatch.setattr(int8_embedder, "nncf_installed", lambda: False)
    fast = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path)
    fast.embed(TEXTS, background=True)
    assert fast.ingest_backend == "openvino"
    assert not list(tmp_path.glob("*.int8.*"))  # nothing marked: installing NNCF retries


def test_calibration_texts_are_the_shipped_guide_at_chunk_and_question_lengths(
    tiny_model: Path,
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    texts = int8_embedder.calibration_texts(tokenizer=tokenizer)
    assert 30 <= len(texts) <= int8_embedder.CALIBRATION_CHUNKS
    pieces = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    assert max(pieces) >= 150 and min(pieces) <= 30  # both lengths are calibrated


@needs_int8
def test_nncf_is_imported_with_its_telemetry_off_and_nothing_written_home(
    tmp_path: Path,
) -> None:
    # Run outside pytest: NNCF switches its telemetry off by itself under pytest.
    code = (
        "import os, sys\n"
        "from engine.rag.ingest.int8_quantizer import import_nncf\n"
        "import_nncf()\n"
        "from nncf.telemetry import decorator, wrapper\n"
        "print(isinstance(decorator.telemetry, wrapper.NNCFTelemetry), 'pytest' in sys.modules,"
        " os.environ.get('CI'), os.environ.get('NNCF_CI'))\n"
    )
    stdout, home = run_with_empty_home(
        code=code, tmp_path=tmp_path, unset=("NNCF_CI", "NNCF_DEV", "CI")
    )
    assert stdout.split() == ["False", "False", "None", "None"]
    assert not any(home.rglob("*"))  # no client id, no consent file
