import threading
from pathlib import Path

import pytest

from engine.paths import resolve_paths
from engine.runtime.planner.profiling import load_saved_profile
from engine.service.profiling.auto_profile import SKIPPED_NOTE, AutoProfiler, ProfilingInputs


@pytest.fixture
def paths(tmp_path: Path):  # type: ignore[no-untyped-def]
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path)}).ensure()
    # A cached hardware profile, so no test measures the disk.
    from engine.runtime.hardware.profile import load_profile

    load_profile(paths=paths, disk_probe_bytes=1 << 20, disk_time_budget_s=0.2)
    return paths


def _inputs(*, model: str | None = "m", chunks: int = 1000, idle: bool = True, gen=None, ret=None):
    def generation(batch: int) -> float:
        return 0.5 * batch**0.6

    def retrieval(resident: int) -> float:
        return 1.0 - 0.1 * resident

    return ProfilingInputs(
        model_id=model,
        collection_chunks=chunks,
        idle=idle,
        sample_generation=lambda: gen or generation,
        sample_retrieval=lambda: ret or retrieval,
    )


def test_first_start_profiles_once_and_stores_the_fit(paths) -> None:  # type: ignore[no-untyped-def]
    profiler = AutoProfiler(paths=paths, inputs=_inputs)
    status = profiler.check_now()
    assert status.state == "done" and status.reason == "first start"
    saved = load_saved_profile(data_dir=paths.data)
    assert saved is not None and saved.generation is not None
    assert saved.generation.c == pytest.approx(0.6, rel=0.05)
    assert profiler.stale(inputs=_inputs()) is None  # nothing more to do
    assert "model changed" in (profiler.stale(inputs=_inputs(model="other")) or "")
    assert "size" in (profiler.stale(inputs=_inputs(chunks=5000)) or "")


def test_a_busy_engine_is_not_measured(paths) -> None:  # type: ignore[no-untyped-def]
    profiler = AutoProfiler(paths=paths, inputs=lambda: _inputs(idle=False))
    assert profiler.check_now().state == "idle"
    assert load_saved_profile(data_dir=paths.data) is None


def test_skip_during_a_run_stores_the_defaults(paths) -> None:  # type: ignore[no-untyped-def]
    started = threading.Event()
    release = threading.Event()

    def slow_generation(batch: int) -> float:
        started.set()
        release.wait(5)
        return 0.1 * batch

    profiler = AutoProfiler(paths=paths, inputs=lambda: _inputs(gen=slow_generation))
    runner = threading.Thread(target=profiler.check_now)
    runner.start()
    assert started.wait(5)
    assert profiler.status().state == "running"
    profiler.skip()
    release.set()
    runner.join(5)
    assert profiler.status().state == "skipped"
    saved = load_saved_profile(data_dir=paths.data)
    assert saved is not None and saved.notes == (SKIPPED_NOTE,) and saved.generation is None
    # A skip holds until the setup changes.
    assert profiler.stale(inputs=_inputs()) is None


def test_a_failing_sampler_is_reported_not_raised(paths) -> None:  # type: ignore[no-untyped-def]
    def broken(batch: int) -> float:
        raise RuntimeError("out of memory")

    profiler = AutoProfiler(paths=paths, inputs=lambda: _inputs(gen=broken), interval_s=0.05)
    profiler.start()
    try:
        for _ in range(100):
            if profiler.status().state == "failed":
                break
            threading.Event().wait(0.05)
    finally:
        profiler.stop()
    assert profiler.status().state == "failed"
    assert "out of memory" in (profiler.status().error or "")


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_run_gives_way_to_a_question_and_runs_again_once_idle(paths) -> None:  # type: ignore[no-untyped-def]
    question = threading.Event()
    samples: list[int] = []

    def generation(batch: int) -> float:
        samples.append(batch)
        if len(samples) == 1:
            question.set()  # a question arrives while the first batch is timed
        return 0.5 * batch**0.6

    clock = _Clock()
    profiler = AutoProfiler(
        paths=paths,
        inputs=lambda: ProfilingInputs(
            model_id="m",
            collection_chunks=1000,
            idle=not question.is_set(),
            sample_generation=lambda: generation,
            sample_retrieval=lambda: None,
            wanted=question.is_set,
        ),
        settle_s=30.0,
        clock=clock,
    )
    status = profiler.check_now()
    assert status.state == "waiting" and status.reason == "first start"
    assert len(samples) == 1  # no sample after the question came
    assert load_saved_profile(data_dir=paths.data) is None  # no fit from part of a run
    question.clear()  # answered
    clock.now += 10.0
    assert profiler.check_now().state == "waiting"  # not yet: it waits SETTLE_S idle
    assert len(samples) == 1
    clock.now += 25.0
    status = profiler.check_now()
    assert status.state == "done"
    assert load_saved_profile(data_dir=paths.data) is not None


def test_a_busy_engine_delays_the_first_run_until_it_settles(paths) -> None:  # type: ignore[no-untyped-def]
    busy = {"now": True}
    clock = _Clock()
    profiler = AutoProfiler(
        paths=paths, inputs=lambda: _inputs(idle=not busy["now"]), settle_s=30.0, clock=clock
    )
    assert profiler.check_now().state == "idle"
    busy["now"] = False
    clock.now += 5.0
    assert profiler.check_now().state == "idle"  # idle for 5 s only
    clock.now += 30.0
    assert profiler.check_now().state == "done"
