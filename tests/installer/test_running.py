"""installer/linux/running.py: the installed app's processes are found, stopped
before files are replaced and started again after (reinstalling with the engine
running; the slow form with the real engine is tests/installer/test_installed_app.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from installer.linux.running import alive, classify, find_app_processes, start_again, stop

pytestmark = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")


def test_engine_window_and_commands_are_told_apart() -> None:
    py, script = "/a/venv/bin/python", "/a/venv/bin/ragdoll"
    assert classify(argv=(py, "-m", "engine")) == "engine"
    assert classify(argv=(py, script, "engine", "--port", "0")) == "engine"
    assert classify(argv=(py, script)) == "window"
    assert classify(argv=(py, script, "open", "/docs")) == "window"
    assert classify(argv=(py, script, "ask-folder")) == "window"
    assert classify(argv=(py, script, "ask", "why?")) == "command"
    # The engine's parse sandbox, alive once the engine has read a file: not a window
    # (the installer asked to close a window nobody had open, and opened one after).
    sandbox = (py, "-m", "engine.rag.ingest.sandbox_child", "--fd=24", "--parent=7", "--nice=10")
    assert classify(argv=sandbox) == "helper"


def test_an_engine_with_its_helper_is_stopped_and_comes_back_as_the_engine(
    tmp_path: Path,
) -> None:
    """The helper is signalled only after its engine has gone (it is parsing the file
    the engine finishes), and it neither asks for nor brings back a window."""
    from installer.linux.running import AppProcess

    log = tmp_path / "log"

    def sleeper(name: str, *, linger_s: float) -> subprocess.Popen[bytes]:
        script = (
            "import signal, sys, time\n"
            "def bye(*_):\n"
            f"    time.sleep({linger_s})\n"
            f"    open({str(log)!r}, 'a').write({name!r} + ' ' + repr(time.monotonic()) + '\\n')\n"
            "    sys.exit(0)\n"
            "signal.signal(signal.SIGTERM, bye)\n"
            f"open({str(log)!r}, 'a').write('up\\n')\n"
            "time.sleep(60)\n"
        )
        return subprocess.Popen([sys.executable, "-c", script])

    engine = sleeper("engine", linger_s=1.0)
    helper = sleeper("helper", linger_s=0.0)
    try:
        deadline = time.monotonic() + 20
        while (log.read_text().count("up") if log.exists() else 0) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        found = [
            AppProcess(pid=helper.pid, uid=os.getuid(), argv=(), kind="helper"),
            AppProcess(pid=engine.pid, uid=os.getuid(), argv=(), kind="engine"),
        ]
        assert found[0].describe() == f"the engine's helper (pid {helper.pid})"
        assert stop(processes=found, timeout_s=20) == []
        ended = dict(line.split() for line in log.read_text().splitlines() if line != "up")
        assert float(ended["helper"]) >= float(ended["engine"])
        launcher = tmp_path / "ragdoll"
        launcher.write_text("#!/bin/sh\n")
        launcher.chmod(0o755)
        again = start_again(launcher=launcher, stopped=found, env={"DISPLAY": ":0"})
        assert [s.what for s in again] == ["the engine"]
        again[0].process.wait(timeout=10)
    finally:
        engine.kill()
        helper.kill()
        engine.wait()
        helper.wait()


def fake_venv(tmp_path: Path) -> Path:
    """An environment whose python is this one, and a `ragdoll` that sleeps like an engine."""
    venv = tmp_path / "app" / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    script = venv / "bin" / "ragdoll"
    script.write_text(
        "import pathlib, sys, time\n"
        "marker = pathlib.Path(__file__).parent.parent.parent / 'started'\n"
        "marker.write_text(' '.join(sys.argv[1:]))\n"
        "time.sleep(300)\n"
    )
    return venv


def test_a_running_engine_is_found_stopped_and_started_again(tmp_path: Path) -> None:
    venv = fake_venv(tmp_path)
    engine = subprocess.Popen(
        [str(venv / "bin" / "python"), str(venv / "bin" / "ragdoll"), "engine"]
    )
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        deadline = time.monotonic() + 20
        found = []
        while not found and time.monotonic() < deadline:
            found = find_app_processes(venv=venv)
            time.sleep(0.1)
        assert [(p.pid, p.kind) for p in found] == [(engine.pid, "engine")]  # not `other`
        assert stop(processes=found, timeout_s=20) == []
        assert engine.wait(timeout=5) != 0 and not alive(pid=engine.pid)
        assert alive(pid=other.pid)
        (tmp_path / "app" / "started").unlink(missing_ok=True)
        launcher = tmp_path / "launcher"
        launcher.write_text(
            f'#!/bin/sh\nexec {venv / "bin" / "python"} {venv / "bin" / "ragdoll"} "$@"\n'
        )
        launcher.chmod(0o755)
        started = start_again(launcher=launcher, stopped=found, env={"PATH": os.environ["PATH"]})
        assert [s.what for s in started] == ["the engine"]
        deadline = time.monotonic() + 20
        marker = tmp_path / "app" / "started"
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.read_text() == "engine"
    finally:
        other.kill()
        engine.kill()
        for p in find_app_processes(venv=venv):
            os.kill(p.pid, 9)


def test_a_window_comes_back_as_a_window_only_where_there_is_a_display(tmp_path: Path) -> None:
    from installer.linux.running import AppProcess

    window = AppProcess(pid=1, uid=os.getuid(), argv=("p", "r", "open"), kind="window")
    someone_else = AppProcess(pid=2, uid=os.getuid() + 1, argv=("p", "r", "engine"), kind="engine")
    launcher = tmp_path / "ragdoll"
    launcher.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "argv"}\n')
    launcher.chmod(0o755)

    def started(env: dict[str, str], *stopped: AppProcess) -> list[str]:
        return [s.what for s in start_again(launcher=launcher, stopped=list(stopped), env=env)]

    assert started({}, someone_else) == []
    assert started({}, window) == ["the engine"]
    assert started({"DISPLAY": ":0"}, window) == ["the window"]


def test_the_installer_waits_for_the_engine_it_started_again_and_says_how_it_went(
    tmp_path: Path,
) -> None:
    from installer.linux.running import Restarted, endpoint_file, wait_until_serving

    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    assert endpoint_file(env=env) == tmp_path / "cfg" / "RAGDoll" / "run" / "engine.json"
    said: list[str] = []

    # An engine that serves after a moment: its endpoint file names it.
    script = (
        "import json, os, pathlib, sys, time\n"
        "time.sleep(1.5)\n"
        "p = pathlib.Path(sys.argv[1]); p.parent.mkdir(parents=True, exist_ok=True)\n"
        "p.write_text(json.dumps({'url': 'http://127.0.0.1:1', 'pid': os.getpid()}))\n"
        "time.sleep(60)\n"
    )
    engine = subprocess.Popen([sys.executable, "-c", script, str(endpoint_file(env=env))])
    try:
        restarted = Restarted(what="the engine", process=engine)
        assert wait_until_serving(restarted=restarted, env=env, every_s=0.5, say=said.append)
        assert said[-1].startswith(f"The engine is running again (pid {engine.pid}, ready after")
        assert any("still starting" in line for line in said[:-1])
    finally:
        engine.kill()
        engine.wait()

    # An engine that dies at start: said at once, with where its log is.
    endpoint_file(env=env).unlink()
    dying = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    said.clear()
    started = time.monotonic()
    restarted = Restarted(what="the engine", process=dying)
    assert not wait_until_serving(restarted=restarted, env=env, say=said.append)
    assert time.monotonic() - started < 30
    assert said == [
        "The engine stopped as it started (exit code 3); its log: "
        f"{tmp_path / '.local' / 'state' / 'RAGDoll' / 'log' / 'engine.log'}"
    ]

    # One that never answers: the wait ends, and says what to do.
    silent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        said.clear()
        restarted = Restarted(what="the engine", process=silent)
        assert not wait_until_serving(restarted=restarted, env=env, timeout_s=1, say=said.append)
        assert "still starting after" in said[-1] and "ragdoll status" in said[-1]
    finally:
        silent.kill()
        silent.wait()
