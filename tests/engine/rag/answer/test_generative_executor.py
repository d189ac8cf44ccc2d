"""The product path: an engine with a model chosen answers through the layer-streaming
executor, under the planner's placement, and a forced out-of-memory still answers."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from engine.paths import resolve_paths
from engine.rag.answer.generative import GenerativeAnswerer, IncrementalDetokenizer
from engine.rag.answer.in_use import open_model
from engine.rag.answer.passages import Passage
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.models import loading
from engine.runtime.models.synthetic import write_random_model
from engine.service.core import Engine

QUESTION = "When is the honey extracted?"
PASSAGES = [
    Passage(index=1, text="The honey is extracted in late August.", path="bees.md", page=None)
]


def _wait_for_ingest(engine: Engine, paths: list[str], timeout_s: float = 120) -> None:
    job = engine.start_ingest(paths=paths)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = job.snapshot().state
        if state in ("done", "failed", "cancelled"):
            assert state == "done"
            return
        time.sleep(0.1)
    raise AssertionError("ingestion did not finish")


def test_engine_ask_runs_through_the_executor(ragdoll_home: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "bees.md").write_text(
        "# Apiary\n\nThe hives are inspected every Saturday morning. The honey is "
        "extracted in late August and stored in the cellar.\n"
    )
    model = write_random_model(folder=tmp_path / "tiny-llama", architecture="llama")
    engine = Engine(paths=resolve_paths(), warm_up=False)
    try:
        _wait_for_ingest(engine, [str(notes)])
        engine.models.set_model(model=str(model))
        serving = engine.serving()
        answerer = serving.answerer
        assert isinstance(answerer, GenerativeAnswerer)
        assert isinstance(answerer.executor, StreamingModel)
        placement = engine.placement()
        assert placement is not None and placement.fits
        assert answerer.executor.placement == placement
        before = answerer.executor.forward_calls

        events = list(engine.ask_stream(question=QUESTION))

        done = events[-1].done
        assert done.mode == "generative"
        assert answerer.executor.forward_calls > before  # the executor computed the answer
        assert answerer.last_generation is not None
        assert answerer.last_generation.generated_tokens > 0
    finally:
        engine.close()


@pytest.mark.parametrize("fast", [True, False])
def test_bf16_checkpoint_on_the_cpu_runs_in_bf16_where_that_is_fast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast: bool
) -> None:
    monkeypatch.setattr(loading, "cpu_bf16_is_fast", lambda: fast)
    folder = write_random_model(folder=tmp_path / "bf16", hidden_size=32, dtype="bfloat16")
    answerer = open_model(model_path=folder, device="cpu").answerer
    assert answerer.executor.dtype == (torch.bfloat16 if fast else torch.float32)
    # Computed in float32, the layers are still held in their 2 stored bytes.
    assert answerer.executor.store.is_packed("layer.0") == (not fast)
    assert "".join(answerer.stream(question=QUESTION, passages=PASSAGES, max_new_tokens=4))


def test_a_forced_out_of_memory_recovers_with_the_same_answer(tmp_path: Path) -> None:
    folder = write_random_model(folder=tmp_path / "llama", hidden_size=32, num_layers=4)
    calm = open_model(model_path=folder, device="cpu").answerer
    expected = "".join(calm.stream(question=QUESTION, passages=PASSAGES, max_new_tokens=12))
    calls = {"n": 0}

    def fault(unit: str) -> None:
        calls["n"] += 1
        if calls["n"] == 30:  # mid-decode, once
            raise torch.OutOfMemoryError("injected")

    in_use = open_model(model_path=folder, device="cpu", fault_hook=fault)
    faulty, owner = in_use.answerer, in_use.owner
    planned = owner.placement
    assert "disk" not in planned.layer_tiers
    got = "".join(faulty.stream(question=QUESTION, passages=PASSAGES, max_new_tokens=12))
    assert got == expected
    assert calls["n"] > 30
    # The recovery moved weights down a tier and the answer went on from there; the
    # executor reported it, so the owner reports what runs, weight bytes included.
    assert "disk" in faulty.executor.placement.layer_tiers
    assert faulty.executor.store.stats().moves > 0
    assert owner.demotions == 1
    assert owner.placement.layer_tiers == faulty.executor.placement.layer_tiers
    assert owner.placement.weights.disk > 0
    assert owner.placement.weights.total == planned.weights.total
    # A re-plan for another batch keeps what the recovery moved down.
    replanned = owner.plan_for(batch=2)
    assert replanned is not None and "disk" in replanned.layer_tiers


def test_incremental_detokenizer_releases_the_whole_text_once(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    folder = write_random_model(folder=tmp_path / "tok", hidden_size=32)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    text = "Héllo wörld — the pump runs quietly. 日本"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    detokenizer = IncrementalDetokenizer(tokenizer=tokenizer)
    pieces = [detokenizer.add(i) for i in ids] + [detokenizer.flush()]
    assert "".join(pieces) == tokenizer.decode(ids, skip_special_tokens=True)
    assert not any("\ufffd" in p for p in pieces)


@pytest.mark.parametrize("cancel_after", [1, 3])
def test_cancel_frees_the_batch(tmp_path: Path, cancel_after: int) -> None:
    import gc
    import threading
    import weakref

    from transformers import DynamicCache

    folder = write_random_model(folder=tmp_path / "llama", hidden_size=32)
    answerer = open_model(model_path=folder, device="cpu").answerer
    caches: list[weakref.ref[DynamicCache]] = []
    new_cache = answerer.executor.new_cache

    def tracked() -> DynamicCache:
        cache = new_cache()
        caches.append(weakref.ref(cache))
        return cache

    answerer.executor.new_cache = tracked  # type: ignore[method-assign]
    cancel = threading.Event()
    for n, _ in enumerate(
        answerer.stream(question=QUESTION, passages=PASSAGES, max_new_tokens=200, cancel=cancel)
    ):
        if n + 1 >= cancel_after:
            cancel.set()
    gc.collect()
    assert caches and all(ref() is None for ref in caches)  # the KV cache is gone
    assert answerer.last_generation is not None and answerer.last_generation.cancelled


def test_dropping_an_answerer_stops_its_copy_thread(tmp_path: Path) -> None:
    import dataclasses
    import gc
    import threading

    folder = write_random_model(folder=tmp_path / "llama", hidden_size=32, num_layers=2)
    first = open_model(model_path=folder, device="cpu")
    streamed = dataclasses.replace(first.owner.placement, layer_tiers=("cpu", "disk"))
    answerer = open_model(model_path=folder, placement=streamed).answerer
    assert answerer.executor.prefetcher is not None
    thread: threading.Thread = answerer.executor.prefetcher._thread
    assert thread.is_alive()
    del answerer, first
    gc.collect()
    thread.join(timeout=10)
    assert not thread.is_alive()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_an_out_of_memory_moves_kv_to_the_host_first_and_the_owner_reports_it(
    tmp_path: Path,
) -> None:
    from engine.runtime.executor.kv import host_kv_layers
    from engine.runtime.hardware.profile import synthetic_profile

    folder = write_random_model(folder=tmp_path / "llama", hidden_size=32, num_layers=4)
    gpu = synthetic_profile(gpu_bytes=8 * 2**30, ram_bytes=16 * 2**30, disk_bytes=64 * 2**30)
    calm = open_model(model_path=folder, hardware=gpu).answerer
    expected = "".join(calm.stream(question=QUESTION, passages=PASSAGES, max_new_tokens=12))
    calls = {"n": 0}

    def fault(unit: str) -> None:
        calls["n"] += 1
        if calls["n"] == 30:
            raise torch.OutOfMemoryError("injected")

    in_use = open_model(model_path=folder, hardware=gpu, fault_hook=fault)
    owner, answerer = in_use.owner, in_use.answerer
    assert answerer.executor.device.type == "cuda" and answerer.executor.kv_host_layers == 0
    got = "".join(answerer.stream(question=QUESTION, passages=PASSAGES, max_new_tokens=12))
    assert got == expected
    # KV went first (half of the layers' KV to the host); the weights stayed.
    assert answerer.executor.kv_host_layers == 2
    assert owner.demotions == 1
    assert host_kv_layers(placement=owner.placement, layers=4) == 2
    assert owner.placement.kv.cpu > 0 and set(owner.placement.layer_tiers) == {"gpu"}


def test_closing_during_an_answer_waits_for_its_batch(tmp_path: Path) -> None:
    """Closed from another thread mid-answer (the engine's shutdown), the answerer frees
    its executor after the running batch: the answer ends whole, and no step meets a
    unit the store has already dropped (`KeyError: 'layer.22'` in engine.log, #44)."""
    import threading

    folder = write_random_model(folder=tmp_path / "llama", hidden_size=32, num_layers=4)
    steps = threading.Event()

    def slow(unit: str) -> None:
        steps.set()
        time.sleep(0.002)

    answerer = open_model(model_path=folder, device="cpu", fault_hook=slow).answerer
    failures: list[BaseException] = []
    pieces: list[str] = []

    def answer() -> None:
        try:
            pieces.extend(answerer.stream(question=QUESTION, passages=PASSAGES, max_new_tokens=24))
        except BaseException as e:  # the test reports whatever escapes
            failures.append(e)

    worker = threading.Thread(target=answer)
    worker.start()
    assert steps.wait(timeout=30)
    answerer.close()
    worker.join(timeout=60)
    assert not worker.is_alive() and failures == []
    assert answerer.last_generation is not None and answerer.last_generation.generated_tokens > 1
