"""The ONNX Runtime path of the embedder: a real sentence-transformers architecture with
random weights, written locally, exported once into the cache folder and giving the
vectors torch gives."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from engine.environ import EMBEDDER_BACKEND_ENV, EngineEnviron
from engine.rag.ingest import onnx_embedder
from engine.rag.ingest.embedder import Embedder
from engine.rag.ingest.onnx_embedder import OnnxEncoder
from engine.rag.ingest.plain_model import onnx_plan
from tests.support.tiny_embedder import write_random_embedder

TEXTS = [
    "owls hunt at night",
    "ferns grow in shade and " * 30,  # truncated at the model's 128 tokens
    "x",
    "canals have locks for boats",
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_embedder(tmp_path_factory.mktemp("models") / "tiny", hidden=32)


def test_onnx_gives_torchs_vectors_and_exports_once(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    fast = Embedder(model=str(tiny_model), device="cpu", cache_dir=cache, backend="onnx")
    assert fast.backend == "onnx"
    [exported] = list(cache.glob("*.onnx"))
    stamp = exported.stat().st_mtime_ns
    plain = Embedder(model=str(tiny_model), device="cpu", backend="torch")
    assert plain.backend == "torch"
    got = fast.embed(TEXTS, batch_size=3)
    want = plain.embed(TEXTS, batch_size=3)
    assert got.shape == want.shape == (len(TEXTS), 32) and got.dtype == np.float32
    assert np.min(np.sum(got * want, axis=1)) >= 0.999
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    again = Embedder(model=str(tiny_model), device="cpu", cache_dir=cache, backend="onnx")
    assert again.backend == "onnx" and exported.stat().st_mtime_ns == stamp  # not re-exported


def test_onnx_groups_a_questions_texts_by_length_without_changing_a_vector(
    tiny_model: Path, tmp_path: Path
) -> None:
    """ONNX Runtime too gives a text the same vector whatever else is in its batch:
    Embedder.embed's groups of like length (like_lengths) rest on that."""
    fast = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path, backend="onnx")
    texts = [TEXTS[0], TEXTS[1], TEXTS[3], TEXTS[0], TEXTS[2]]
    assert np.array_equal(fast.embed(texts), fast._encode(texts, batch_size=32))


def test_onnx_encodes_in_two_threads_at_once(tiny_model: Path, tmp_path: Path) -> None:
    fast = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path, backend="onnx")
    want = fast.embed(TEXTS)
    results: list[np.ndarray] = []

    def work() -> None:
        for _ in range(5):
            results.append(fast.embed(TEXTS))

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 10 and all(np.allclose(r, want, atol=1e-5) for r in results)


def test_two_models_exported_at_once_both_take_the_onnx_path(tmp_path: Path) -> None:
    # torch's exporter is one per process: two exports at once failed each other, and
    # the loser was marked never to be tried again.
    models = [
        write_random_embedder(tmp_path / "first", hidden=32),
        write_random_embedder(tmp_path / "second", hidden=48),
    ]
    cache = tmp_path / "cache"
    backends: dict[str, str] = {}

    def load(model: Path) -> None:
        embedder = Embedder(model=str(model), device="cpu", cache_dir=cache, backend="onnx")
        backends[model.name] = embedder.backend

    threads = [threading.Thread(target=load, args=(m,)) for m in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert backends == {"first": "onnx", "second": "onnx"}
    assert not list(cache.glob("*.failed"))


def test_torch_is_kept_when_asked_or_without_a_cache(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Embedder(model=str(tiny_model), device="cpu").backend == "torch"
    monkeypatch.setenv(EMBEDDER_BACKEND_ENV, "torch")  # the environment wins over "auto"
    asked = EngineEnviron.from_environ()
    got = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path, environ=asked)
    assert got.backend == "torch"


def test_only_plain_transformer_and_pooling_models_are_exported() -> None:
    class Transformer:
        pass

    class Pooling:
        def __init__(self, mode: str) -> None:
            self.pooling_mode = mode

    class Dense:
        pass

    assert onnx_plan([Transformer(), Pooling("mean")]) == "mean"
    assert onnx_plan([Transformer(), Pooling("cls")]) == "cls"
    assert onnx_plan([Transformer(), Pooling("max")]) is None
    assert onnx_plan([Transformer(), Pooling("mean"), Dense()]) is None


def test_a_failed_export_stays_on_torch_and_is_not_tried_at_every_start(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries: list[Path] = []

    def broken(*, model: object, file: Path) -> None:
        tries.append(file)
        raise RuntimeError("the exporter does not know this operator")

    monkeypatch.setattr(onnx_embedder, "export_onnx", broken)
    first = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path, backend="onnx")
    assert first.backend == "torch" and len(tries) == 1
    assert first.embed(["owls"]).shape == (1, 32)
    again = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path, backend="onnx")
    assert again.backend == "torch" and len(tries) == 1


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads thread priorities in /proc")
def test_ingestion_encodes_on_a_session_whose_threads_have_its_priority(
    tiny_model: Path, tmp_path: Path
) -> None:
    import os

    fast = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path, backend="onnx")
    want = fast.embed(TEXTS)

    def niced() -> set[int]:
        out = set()
        for task in Path("/proc/self/task").iterdir():
            try:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[16]) >= 10:  # field 19 of stat: the nice value
                out.add(int(task.name))
        return out

    before = niced()
    got: list[np.ndarray] = []

    def ingest() -> None:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        got.append(fast.embed(TEXTS * 20, batch_size=8, background=True))

    worker = threading.Thread(target=ingest)
    worker.start()
    worker.join()
    assert np.allclose(got[0][: len(TEXTS)], want, atol=1e-5)
    # The ingestion session's worker threads outlive the thread that made them,
    # at its priority; the question's session is another one.
    if (os.cpu_count() or 1) > 1:
        assert niced() - before
    assert fast._onnx_background is not None and fast._onnx_background is not fast._onnx


def test_the_question_s_encoder_and_ingestion_s_share_one_tokenizer(
    tiny_model: Path, tmp_path: Path
) -> None:
    # A tokenizer copy per thread cost multilingual-e5's vocabulary about 270 MB each:
    # the encoders take turns to tokenise instead, and encode at once.
    fast = Embedder(model=str(tiny_model), device="cpu", cache_dir=tmp_path, backend="onnx")
    encoder = fast._onnx
    assert encoder is not None
    ingestion = encoder.sibling()
    assert ingestion._tokenizer is encoder._tokenizer
    want = encoder.encode(TEXTS, batch_size=2)
    results: list[np.ndarray] = []

    def work(which: OnnxEncoder) -> None:
        for _ in range(5):
            results.append(which.encode(TEXTS, batch_size=2))

    threads = [threading.Thread(target=work, args=(e,)) for e in (encoder, ingestion, encoder)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 15 and all(np.allclose(r, want, atol=1e-5) for r in results)
