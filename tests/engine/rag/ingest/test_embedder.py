"""Where the embedder runs: the device decision, on made-up hardware."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from engine.errors import EmbedderError
from engine.rag.ingest.embedder import (
    DEFAULT_EMBEDDER,
    Embedder,
    EmbedderInfo,
    choose_device,
    embedder_need_bytes,
    like_lengths,
    locate_embedder,
)
from engine.rag.ingest.priority_gate import PriorityGate
from engine.runtime.hardware.gpus import GpuInfo
from tests.support.stalls import Stopwatch

GIB = 2**30
NEED = 400 * 2**20


def _gpu(*, free: int, backend: str = "cuda", unified: bool = False, index: int = 0) -> GpuInfo:
    return GpuInfo(
        index=index,
        name="fake",
        backend=backend,  # type: ignore[arg-type]
        total_bytes=24 * GIB,
        free_bytes=free,
        unified_memory=unified,
    )


def _placement(*, budget: int, used: int, model: str = "discrete") -> SimpleNamespace:
    return SimpleNamespace(
        memory_model=model,
        budgets=SimpleNamespace(gpu=budget),
        used=SimpleNamespace(gpu=used),
    )


def test_no_gpu_means_the_cpu() -> None:
    assert choose_device(gpu=None, need_bytes=NEED) == "cpu"


def test_a_gpu_with_room_is_used() -> None:
    assert choose_device(gpu=_gpu(free=8 * GIB), need_bytes=NEED) == "cuda:0"
    assert choose_device(gpu=_gpu(free=8 * GIB, index=1), need_bytes=NEED) == "cuda:1"
    apple = _gpu(free=16 * GIB, backend="mps", unified=True)
    assert choose_device(gpu=apple, need_bytes=NEED) == "mps"


def test_free_memory_less_the_planner_margin_must_hold_it() -> None:
    # 800 MiB free: the 512 MiB margin leaves 288 MiB, short of 400.
    assert choose_device(gpu=_gpu(free=800 * 2**20), need_bytes=NEED) == "cpu"
    assert choose_device(gpu=_gpu(free=1000 * 2**20), need_bytes=NEED) == "cuda:0"


def test_the_placement_decides_what_generation_leaves() -> None:
    gpu = _gpu(free=20 * GIB)  # free now, but the generator is planned to take it
    busy = _placement(budget=19 * GIB, used=19 * GIB - 100 * 2**20)
    assert choose_device(gpu=gpu, need_bytes=NEED, placement=busy) == "cpu"
    spare = _placement(budget=19 * GIB, used=12 * GIB)
    assert choose_device(gpu=gpu, need_bytes=NEED, placement=spare) == "cuda:0"
    cpu_plan = _placement(budget=0, used=0, model="cpu_only")
    assert choose_device(gpu=gpu, need_bytes=NEED, placement=cpu_plan) == "cpu"


def test_the_need_counts_the_bundled_weights() -> None:
    try:
        location = locate_embedder(DEFAULT_EMBEDDER)
    except EmbedderError as e:  # the bundled package is optional in a dev checkout
        pytest.skip(str(e))
    need = embedder_need_bytes(location)
    assert 256 * 2**20 + 40 * 2**20 < need < 2 * GIB  # MiniLM-L6: ~90 MB of fp32 weights


# -- questions first ---------------------------------------------------------------


class _SlowEmbedder(Embedder):
    """The real gate and batching over a fake encode of `batch_s` seconds a call
    (no model is loaded: what is under test is who goes first)."""

    def __init__(self, *, batch_s: float) -> None:
        self._gate = PriorityGate()
        self._beside_lock = threading.Lock()
        self._beside_ok = True
        self.info = EmbedderInfo(id="slow", dimension=4, max_tokens=256)
        # A character is a word piece: what the batches are sorted by.
        self._tokenizer = lambda texts, **kw: {"input_ids": [list(t) for t in texts]}
        self.batch_s = batch_s
        self.calls: list[int] = []
        self.beside: list[int] = []

    def _encode(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        self.calls.append(len(texts))
        time.sleep(self.batch_s)
        return np.ones((len(texts), 4), dtype=np.float32)

    def _encode_beside(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        self.beside.append(len(texts))
        return np.ones((len(texts), 4), dtype=np.float32)


def test_background_texts_are_encoded_one_batch_per_call() -> None:
    slow = _SlowEmbedder(batch_s=0.0)
    out = slow.embed([f"t{i}" for i in range(70)], batch_size=32, background=True)
    assert out.shape == (70, 4)
    assert slow.calls == [32, 32, 6]


def test_a_question_does_not_wait_for_the_background_batch_running() -> None:
    slow = _SlowEmbedder(batch_s=1.0)
    texts = [f"chunk {i}" for i in range(32 * 4)]  # 4 batches: 4 s of background work
    worker = threading.Thread(target=lambda: slow.embed(texts, background=True))
    worker.start()
    try:
        time.sleep(0.3)  # the first batch runs
        with Stopwatch() as question:
            slow.embed(["what does the manual say about the valve?"])
        assert question.took.own_s < 0.5, f"the question waited {question.took}"
        assert slow.beside == [1], "it was encoded beside the batch"
        assert worker.is_alive(), "the background work goes on after the question"
    finally:
        worker.join()
    assert slow.calls == [32, 32, 32, 32]


def test_a_question_idle_goes_through_the_gate_as_usual() -> None:
    slow = _SlowEmbedder(batch_s=0.0)
    slow.embed(["a question"])
    assert slow.calls == [1] and slow.beside == []


def test_questions_waiting_for_the_gate_all_go_before_the_background() -> None:
    gate = PriorityGate()
    order: list[str] = []
    with gate.turn(background=True):
        threads = [
            threading.Thread(target=_take, args=(gate, order, name, background))
            for name, background in (("bg", True), ("q1", False), ("q2", False))
        ]
        for t in threads:
            t.start()
            time.sleep(0.05)  # bg asks first, then the two questions
    for t in threads:
        t.join()
    assert order[-1] == "bg" and sorted(order[:2]) == ["q1", "q2"]


def _take(gate: PriorityGate, order: list[str], name: str, background: bool) -> None:
    with gate.turn(background=background):
        order.append(name)


def test_the_path_beside_gives_the_vectors_encode_gives() -> None:
    embedder = Embedder()
    texts = ["How are maintainer scripts installed?", "git bisect skip", "x " * 400]
    plain = embedder.embed(texts)
    beside = embedder._encode_beside(texts, batch_size=2)
    assert beside.shape == plain.shape
    assert float(np.min(np.sum(plain * beside, axis=1))) > 0.9999


class _LengthEmbedder(_SlowEmbedder):
    """Each text's vector is its own length: rows must come back in the asked order."""

    def _encode(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        self.calls.append(len(texts))
        self.batches.append([len(t) for t in texts])
        return np.array([[len(t), 0, 0, 0] for t in texts], dtype=np.float32)


def test_background_batches_hold_texts_of_like_length_and_rows_keep_their_order() -> None:
    fake = _LengthEmbedder(batch_s=0.0)
    fake.batches = []
    # Small files' chunks: a long one, then the short tail of the same file.
    texts = [("x" * (190 if i % 2 == 0 else 60 + i)) for i in range(64)]
    out = fake.embed(texts, batch_size=32, background=True)
    assert [int(v) for v in out[:, 0]] == [len(t) for t in texts]
    assert fake.calls == [32, 32]
    short, long = fake.batches
    assert max(short) < 190 and min(long) == 190, "each batch is padded to its own length"


def test_no_background_batch_starts_while_a_question_is_answered() -> None:
    gate = PriorityGate(quiet_s=0.4)
    started: list[float] = []
    with gate.asking():  # a question's encode in progress
        t0 = time.monotonic()
        worker = threading.Thread(target=lambda: _stamp(gate, started))
        worker.start()
        time.sleep(0.3)
        assert not started, "a background turn started during the question's encode"
    asked_at = time.monotonic()
    worker.join(timeout=5)
    assert started and started[0] - asked_at >= 0.35, "it waited out the quiet time after"
    assert started[0] - t0 < 2.0


def _stamp(gate: PriorityGate, started: list[float]) -> None:
    with gate.turn(background=True):
        started.append(time.monotonic())


def test_a_questions_texts_are_encoded_once_each_in_groups_of_like_length() -> None:
    """A follow-up's search embeds the question three times beside a long passage:
    each distinct text goes once, short ones not padded to the passage, rows in order."""
    calls: list[list[int]] = []

    def encode(texts: list[str]) -> np.ndarray:
        calls.append([len(t) for t in texts])
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

    question, earlier, passage = "q" * 40, "e" * 60, "p" * 900
    texts = [question, question, earlier, question, earlier, passage]
    out = like_lengths(texts, encode=encode)
    assert [int(v) for v in out[:, 0]] == [len(t) for t in texts]
    assert out.dtype == np.float32
    assert calls == [[40, 60], [900]]
    assert sum(len(c) * max(c) for c in calls) < len(texts) * 900 / 3


def test_e5_prefixes_whether_or_not_its_config_names_them() -> None:
    from engine.rag.ingest.embedder import is_multilingual, task_prefixes

    # The converted folder names them ("document" filled with "" by sentence-transformers).
    named = {"query": "query: ", "document": "", "passage": "passage: "}
    assert task_prefixes(model="/x/multilingual-e5-small", prompts=named) == (
        "query: ",
        "passage: ",
    )
    # The hub's copy names none: known by name.
    assert task_prefixes(model="intfloat/multilingual-e5-small", prompts={}) == (
        "query: ",
        "passage: ",
    )
    assert task_prefixes(model="all-MiniLM-L6-v2", prompts={}) == ("", "")
    assert is_multilingual("intfloat/multilingual-e5-base") and is_multilingual("BAAI/bge-m3")
    assert not is_multilingual("nomic-embed-text-v1.5.Q8_0.gguf")
