"""engine/service/owner.py: an engine started for a window stops when the window's
process is gone without closing (killed), unless the person keeps it running; the
real `python -m engine --stop-with PID` as the window starts it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.paths import Paths, resolve_paths
from engine.service.launcher import ProcessRecord, process_record, process_runs
from engine.service.owner import OwnerWatch

_DEADLINE_S = 120.0


@pytest.fixture
def owner() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing in for the window."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()


def _gone(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.wait()


def test_a_process_record_runs_until_its_process_ends(
    owner: subprocess.Popen[bytes],
) -> None:
    record = process_record(pid=owner.pid)
    assert process_runs(process=record)
    # The same pid, started at another time: a program that took a dead one's pid.
    assert not process_runs(process=ProcessRecord(pid=owner.pid, started=record.started - 5))
    _gone(owner)
    assert not process_runs(process=record)
    assert not process_runs(process=process_record(pid=owner.pid))


@pytest.mark.parametrize("keep", [False, True])
def test_the_watch_stops_the_engine_when_its_owner_is_gone_unless_kept(
    owner: subprocess.Popen[bytes], keep: bool
) -> None:
    stopped = threading.Event()
    watch = OwnerWatch(
        owner=process_record(pid=owner.pid),
        keep_running=lambda: keep,
        stop=stopped.set,
        poll_s=0.05,
    )
    watch.start()
    try:
        time.sleep(0.3)
        assert not stopped.is_set()  # the owner runs
        _gone(owner)
        watch._thread.join(timeout=_DEADLINE_S)
        assert not watch._thread.is_alive()  # it has looked, and stopped looking
        assert stopped.is_set() is not keep
    finally:
        watch.close()


def _start_engine(home: Path, *, owner: int) -> tuple[subprocess.Popen[str], Paths]:
    paths = resolve_paths(env={"RAGDOLL_HOME": str(home)})
    env = {
        **os.environ,
        "RAGDOLL_HOME": str(home),
        "HF_HUB_OFFLINE": "1",
        "RAGDOLL_AUTO_PROFILE": "0",
    }
    engine = subprocess.Popen(
        [sys.executable, "-m", "engine", "--stop-with", str(owner)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + _DEADLINE_S
    while not paths.endpoint_file.exists():
        assert engine.poll() is None, engine.communicate()
        assert time.monotonic() < deadline, "the engine did not start"
        time.sleep(0.2)
    return engine, paths


def test_an_engine_whose_window_was_killed_stops(
    tmp_path: Path, owner: subprocess.Popen[bytes]
) -> None:
    engine, paths = _start_engine(tmp_path / "home", owner=owner.pid)
    try:
        _gone(owner)
        output, _ = engine.communicate(timeout=_DEADLINE_S)
        assert engine.returncode == 0, output  # a clean stop
        assert not paths.endpoint_file.exists()
        assert "which started the engine, is gone; stopping" in paths.engine_log.read_text()
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.communicate()


def test_an_engine_kept_running_to_watch_folders_outlives_its_window(
    tmp_path: Path, owner: subprocess.Popen[bytes]
) -> None:
    home = tmp_path / "home"
    config = resolve_paths(env={"RAGDOLL_HOME": str(home)}).ensure().config
    (config / "server.json").write_text(json.dumps({"keep_engine_running": True}))
    engine, paths = _start_engine(home, owner=owner.pid)
    try:
        _gone(owner)
        deadline = time.monotonic() + _DEADLINE_S
        while "kept running" not in paths.engine_log.read_text():
            assert engine.poll() is None, engine.communicate()
            assert time.monotonic() < deadline, "the engine never noticed its owner was gone"
            time.sleep(0.2)
        assert engine.poll() is None
        assert paths.endpoint_file.exists()
        engine.send_signal(signal.SIGTERM)
        engine.communicate(timeout=_DEADLINE_S)
        assert engine.returncode == 0
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.communicate()


_CALLER = """
import time
from engine.paths import resolve_paths
from engine.service.client import EngineClient
client = EngineClient.connect(paths=resolve_paths(), start=True, stop_with_caller=True, wait_s=120)
print(client.endpoint.pid, client.started_here, flush=True)
time.sleep(600)
"""


def test_a_client_that_started_the_engine_and_was_killed_leaves_no_engine(
    tmp_path: Path,
) -> None:
    """What the window does (app/bridge_plumbing.connect_default), killed with -9."""
    home = tmp_path / "home"
    env = {
        **os.environ,
        "RAGDOLL_HOME": str(home),
        "HF_HUB_OFFLINE": "1",
        "RAGDOLL_AUTO_PROFILE": "0",
    }
    caller = subprocess.Popen(
        [sys.executable, "-c", _CALLER], env=env, stdout=subprocess.PIPE, text=True
    )
    engine_pid = 0
    try:
        assert caller.stdout is not None
        pid, started_here = caller.stdout.readline().split()
        engine_pid = int(pid)
        assert started_here == "True"
        engine = process_record(pid=engine_pid)
        assert process_runs(process=engine)
        _gone(caller)
        deadline = time.monotonic() + _DEADLINE_S
        while process_runs(process=engine):
            assert time.monotonic() < deadline, "the engine outlived the process that started it"
            time.sleep(0.2)
        assert not resolve_paths(env={"RAGDOLL_HOME": str(home)}).endpoint_file.exists()
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()
        if engine_pid and process_runs(process=process_record(pid=engine_pid)):
            os.kill(engine_pid, signal.SIGKILL)
