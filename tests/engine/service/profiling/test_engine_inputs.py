import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from engine.paths import Paths, resolve_paths
from engine.runtime.planner.profiling import ProfileResult, save_profile
from engine.service.profiling import engine_inputs
from engine.service.profiling.engine_inputs import EngineProfilingInputs
from engine.service.work_in_hand import WorkInHand
from engine.wire import IngestQueueState


@dataclass(kw_only=True)
class _Store:
    chunks: int = 0

    def counts(self) -> tuple[int, int]:
        return 1, self.chunks


@dataclass(kw_only=True)
class _Ingest:
    jobs: list[Any] = field(default_factory=list)

    def state(self) -> IngestQueueState:
        return IngestQueueState(paused=False, jobs=self.jobs)


@dataclass(kw_only=True)
class _Pipeline:
    busy: bool = False

    def idle(self) -> bool:
        return not self.busy


@dataclass(kw_only=True)
class _Serving:
    pipeline: _Pipeline


@dataclass(kw_only=True)
class _Answerer:
    model: object = "weights"
    tokenizer: object = "tokenizer"


@dataclass(kw_only=True)
class _Model:
    remote: bool = False
    answerer: _Answerer = field(default_factory=_Answerer)


@dataclass(kw_only=True)
class _Engine:
    """What the engine exposes, as plain fields a test sets."""

    paths: Paths
    store: _Store = field(default_factory=_Store)
    model: _Model | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    serving: _Serving | None = None
    direct_answers: WorkInHand = field(default_factory=WorkInHand)
    ingest: _Ingest = field(default_factory=_Ingest)

    def inputs(self) -> EngineProfilingInputs:
        return EngineProfilingInputs(
            paths=self.paths,
            store=self.store,  # type: ignore[arg-type]
            model_id=lambda: "m",
            model=lambda: self.model,  # type: ignore[arg-type,return-value]
            model_lock=self.lock,
            serving=lambda: self.serving,  # type: ignore[arg-type,return-value]
            direct_answers=self.direct_answers,
            ingest=self.ingest,  # type: ignore[arg-type]
        )


@pytest.fixture
def engine(tmp_path: Path) -> _Engine:
    return _Engine(paths=resolve_paths(env={"RAGDOLL_HOME": str(tmp_path)}).ensure())


def test_an_idle_engine_with_an_index_hands_both_samplers_over(
    engine: _Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_inputs, "retrieval_sampler", lambda *, store: "retrieval")
    engine.store.chunks = 40
    inputs = engine.inputs().current()
    assert inputs.model_id == "m" and inputs.collection_chunks == 40
    assert inputs.idle and not inputs.wanted()
    assert inputs.sample_retrieval() == "retrieval"
    assert inputs.sample_generation() is None  # no language model in use


@pytest.mark.parametrize(
    "work",
    [
        lambda e, _: setattr(e, "serving", _Serving(pipeline=_Pipeline(busy=True))),
        lambda e, _: e.ingest.jobs.append("a job"),
        lambda e, held: held.enter_context(e.direct_answers.one()),
    ],
    ids=["a question", "ingestion", "an answer without retrieval"],
)
def test_a_persons_work_in_hand_is_wanted_and_not_idle(
    engine: _Engine, work: Callable[[_Engine, contextlib.ExitStack], object]
) -> None:
    engine.serving = _Serving(pipeline=_Pipeline(busy=False))
    source = engine.inputs()
    assert not source.work_waiting()
    with contextlib.ExitStack() as held:
        work(engine, held)
        inputs = source.current()
        assert source.work_waiting() and inputs.wanted() and not inputs.idle


def test_the_model_running_is_not_idle_but_not_wanted_either(engine: _Engine) -> None:
    with engine.lock:
        inputs = engine.inputs().current()
    assert not inputs.idle and not inputs.wanted()


def test_an_emptied_collection_keeps_the_profiled_size(engine: _Engine) -> None:
    inputs = engine.inputs().current()
    assert inputs.collection_chunks == 0 and inputs.sample_retrieval() is None
    save_profile(data_dir=engine.paths.data, result=_profile(chunks=1234))
    assert engine.inputs().current().collection_chunks == 1234


def test_a_models_server_is_not_timed(engine: _Engine) -> None:
    engine.model = _Model(remote=True)
    assert engine.inputs().current().sample_generation() is None


def test_generation_is_sampled_under_the_model_lock(
    engine: _Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    held: list[bool] = []

    def fake_sampler(*, model: object, tokenizer: object, wanted: Callable[[], bool]):  # type: ignore[no-untyped-def]
        held.append(engine.lock.locked())  # the warm-up batch runs the model too
        assert (model, tokenizer) == ("weights", "tokenizer") and not wanted()

        def sample(batch: int) -> float:
            held.append(engine.lock.locked())
            return 0.1 * batch

        return sample

    monkeypatch.setattr(engine_inputs, "generation_sampler", fake_sampler)
    engine.model = _Model()
    sample = engine.inputs().current().sample_generation()
    assert sample is not None and sample(4) == pytest.approx(0.4)
    assert held == [True, True] and not engine.lock.locked()


def _profile(*, chunks: int) -> ProfileResult:
    return ProfileResult(
        generation=None,
        retrieval=None,
        batch=1,
        resident_partitions=1,
        t_generation_s=None,
        t_retrieval_s=None,
        rate_qps=1.0,
        model_id="m",
        hardware_fingerprint="test",
        collection_chunks=chunks,
        measured_at=time.time(),
        elapsed_s=0.0,
        budget_spent=False,
    )
