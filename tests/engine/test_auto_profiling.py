"""A real engine profiles itself at first start, shows it in /v1/status, and a
person can decline the next run (the planner's defaults are stored instead)."""

import time
from pathlib import Path

import pytest

from engine.runtime.planner.profiling import load_saved_profile
from engine.service.profiling.auto_profile import SKIPPED_NOTE
from engine.wire import ProfilingStatus
from tests.support.engine import running_engine


def _wait_state(engine, states: set[str], timeout_s: float = 90) -> ProfilingStatus:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = engine.client.status().profiling
        if status is not None and status.state in states:
            return status
        time.sleep(0.3)
    raise AssertionError(f"profiling never reached {states}: {engine.client.status().profiling}")


def test_first_start_profiles_then_a_skip_holds(
    ragdoll_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGDOLL_AUTO_PROFILE", "1")
    with running_engine(home=ragdoll_home) as engine:
        status = _wait_state(engine, {"done", "failed"})
        assert status.state == "done", status.error
        assert status.reason == "first start"
        data = ragdoll_home / "data"
        first = load_saved_profile(data_dir=data)
        assert first is not None and first.model_id is None
        skipped = engine.client.skip_profiling()
        assert skipped.state == "skipped"
        saved = load_saved_profile(data_dir=data)
        assert saved is not None and saved.notes == (SKIPPED_NOTE,)
