"""A module run in a child process: its arguments, its error, and its end with the
process that started it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine.rag.child_module import run_module
from tests.support.engine import process_alive
from tests.support.waiting import wait_until

WORK = "tests.support.child_work"


def test_the_module_runs_as_its_own_main_with_its_arguments(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    run_module(module=WORK, args=[str(out), "0"], timeout_s=60, what="the work")
    ran = json.loads(out.read_text(encoding="utf-8"))
    assert ran["argv"] == [str(out), "0"] and ran["pid"] != os.getpid()


def test_a_child_that_fails_says_so_with_its_last_words(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="the work process ended with 3: asked to end with 3"):
        run_module(
            module=WORK, args=[str(tmp_path / "out.json"), "3"], timeout_s=60, what="the work"
        )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal")
def test_a_child_goes_when_the_process_that_started_it_is_killed(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    starter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from engine.rag.child_module import run_module; "
            f"run_module(module={WORK!r}, args=[{str(out)!r}, 'sleep'], timeout_s=120, what='w')",
        ],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )
    try:
        wait_until(out.exists, timeout_s=60)
        wait_until(lambda: bool(out.read_text(encoding="utf-8")), timeout_s=10)
        child = json.loads(out.read_text(encoding="utf-8"))["pid"]
        assert process_alive(child)
        starter.send_signal(signal.SIGKILL)
        starter.wait(timeout=10)
        wait_until(lambda: not process_alive(child), timeout_s=10)
    finally:
        starter.kill()
