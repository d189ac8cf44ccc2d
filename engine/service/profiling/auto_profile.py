"""Active profiling without being asked (RAGDoll §4.4): at first start, and when the
model, the hardware or the collection size change markedly.

The engine owns one AutoProfiler. A light background thread checks, while the
engine is idle, whether the stored fit still describes this setup
(`profiling.stale_reason`); when it does not, it measures the hardware (once per
machine) and runs the active profile in the engine process, reporting progress.
A person can skip it: the planner's defaults are then stored in its place, so the
question is not asked again until the setup changes.

It never competes with the person's work: when a question (or any other work) arrives
during a run, the sample in hand stops at its next decode step (`Deferred`), the run is
dropped, and a new one starts only after the engine has been idle for `SETTLE_S`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.paths import Paths
from engine.runtime.hardware.profile import load_profile
from engine.runtime.planner.profiling import (
    DEFAULT_BATCH,
    DEFAULT_PARTITIONS,
    DEFAULT_RATE_QPS,
    ProfileResult,
    load_saved_profile,
    run_active_profile,
    save_profile,
    stale_reason,
)
from engine.wire import ProfilingStatus

log = logging.getLogger(__name__)
SKIPPED_NOTE = "skipped: the planner's defaults are used until the setup changes"
DEFAULT_BUDGET_S = 120.0
CHECK_INTERVAL_S = 20.0
# After the engine was busy (or a run gave way to a question), this long idle before a
# run starts: a person reading an answer often asks the next question within a minute.
SETTLE_S = 30.0
WAITING_NOTE = "waiting for the engine to be idle: questions go first"

Sampler = Callable[[int], float]


class Deferred(Exception):
    """A run gives way: the person's work arrived (raised by a sampler or between samples)."""


def _never() -> bool:
    return False


@dataclass(frozen=True, kw_only=True)
class ProfilingInputs:
    """What the engine hands the profiler each time it checks."""

    model_id: str | None
    collection_chunks: int
    idle: bool  # no ingestion or answer running: measurements would be disturbed
    sample_generation: Callable[[], Sampler | None]  # built only when a run starts
    sample_retrieval: Callable[[], Sampler | None]
    # Asked between samples and by the samplers at each step: work is waiting.
    wanted: Callable[[], bool] = field(default=_never)


class _Skipped(Exception):
    pass


class AutoProfiler:
    def __init__(
        self,
        *,
        paths: Paths,
        inputs: Callable[[], ProfilingInputs],
        budget_s: float = DEFAULT_BUDGET_S,
        interval_s: float = CHECK_INTERVAL_S,
        settle_s: float = SETTLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._paths = paths
        self._inputs = inputs
        self._budget_s = budget_s
        self._interval_s = interval_s
        self._settle_s = settle_s
        self._clock = clock
        self._busy_at: float | None = None  # when the engine was last seen busy
        self._lock = threading.Lock()
        self._status = ProfilingStatus(state="idle")
        self._skip = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- control ----------------------------------------------------------------------

    def start(self) -> None:
        """Begin checking in the background (the engine calls this once warmed up)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="auto-profile", daemon=True)
            self._thread.start()

    def stop(self, *, timeout_s: float = 30.0) -> None:
        """Ends a run after the sample in hand; waits for it, since a sample runs
        the model in native code that must not outlive the interpreter."""
        self._stop.set()
        self._skip.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout_s)

    def status(self) -> ProfilingStatus:
        with self._lock:
            return self._status

    def skip(self) -> ProfilingStatus:
        """Stop a run in progress, or decline the pending one: store the defaults."""
        self._skip.set()
        with self._lock:
            running = self._status.state == "running"
        if not running:
            self._store_skipped(self._inputs())
        return self.status()

    def check_now(self) -> ProfilingStatus:
        """One check, in the caller's thread: profile when the stored fit is stale."""
        inputs = self._inputs()
        reason = self.stale(inputs=inputs)
        if reason is None:
            return self.status()
        if not inputs.idle or inputs.wanted():
            self._busy_at = self._clock()
        elif self._settled():
            self._run(inputs=inputs, reason=reason)
        return self.status()

    def _settled(self) -> bool:
        return self._busy_at is None or self._clock() - self._busy_at >= self._settle_s

    def stale(self, *, inputs: ProfilingInputs) -> str | None:
        """Why a profile is due, or None while the stored one (or a skip) still holds."""
        saved = load_saved_profile(data_dir=self._paths.data)
        if saved is None:
            return "first start"
        return stale_reason(
            result=saved,
            model_id=inputs.model_id,
            hardware_fingerprint=self._fingerprint(),
            collection_chunks=inputs.collection_chunks,
        )

    # -- the work ------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.check_now()
            except Exception as e:  # never take the engine down; show it instead
                log.exception("active profiling failed")
                self._set(ProfilingStatus(state="failed", error=str(e)))
            self._stop.wait(self._interval_s)

    def _run(self, *, inputs: ProfilingInputs, reason: str) -> None:
        self._skip.clear()
        self._set(ProfilingStatus(state="running", reason=reason, message="measuring the machine"))
        log.info("active profiling: %s", reason)

        def progress(message: str, fraction: float) -> None:
            if self._skip.is_set():
                raise _Skipped
            if inputs.wanted():
                raise Deferred
            self._set(
                ProfilingStatus(
                    state="running", reason=reason, message=message, fraction=round(fraction, 3)
                )
            )

        try:
            hardware = load_profile(paths=self._paths)  # measures bandwidths once per machine
            progress("preparing samplers", 0.0)
            result = run_active_profile(
                sample_generation=inputs.sample_generation(),
                sample_retrieval=inputs.sample_retrieval(),
                progress=progress,
                budget_s=self._budget_s,
                model_id=inputs.model_id,
                hardware_fingerprint=hardware.fingerprint,
                collection_chunks=inputs.collection_chunks,
            )
        except _Skipped:
            self._store_skipped(inputs)
            return
        except Deferred:
            # Nothing measured so far is kept: a fit from part of the batches would
            # misplace the curve, and the whole run takes a minute or two.
            self._busy_at = self._clock()
            log.info("active profiling gave way to a question; it runs again once idle")
            self._set(ProfilingStatus(state="waiting", reason=reason, message=WAITING_NOTE))
            return
        save_profile(data_dir=self._paths.data, result=result)
        self._set(
            ProfilingStatus(state="done", reason=reason, message=_summary(result), fraction=1.0)
        )

    def _store_skipped(self, inputs: ProfilingInputs) -> None:
        result = ProfileResult(
            generation=None,
            retrieval=None,
            batch=DEFAULT_BATCH,
            resident_partitions=max(DEFAULT_PARTITIONS),
            t_generation_s=None,
            t_retrieval_s=None,
            rate_qps=DEFAULT_RATE_QPS,
            model_id=inputs.model_id,
            hardware_fingerprint=self._fingerprint(),
            collection_chunks=inputs.collection_chunks,
            measured_at=time.time(),
            elapsed_s=0.0,
            budget_spent=False,
            notes=(SKIPPED_NOTE,),
        )
        save_profile(data_dir=self._paths.data, result=result)
        self._set(ProfilingStatus(state="skipped", message=SKIPPED_NOTE, fraction=1.0))

    def _fingerprint(self) -> str:
        # Counts only: the fingerprint never needs a bandwidth measurement.
        return load_profile(paths=self._paths, measure=False).fingerprint

    def _set(self, status: ProfilingStatus) -> None:
        with self._lock:
            self._status = status


def _summary(result: ProfileResult) -> str:
    parts = [f"batch {result.batch}", f"{result.resident_partitions} resident partitions"]
    if result.generation is not None:
        parts.append(f"T(B) = {result.generation.a:.3g}·B^{result.generation.c:.2f}")
    return "fitted: " + ", ".join(parts)
