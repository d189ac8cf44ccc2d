"""The stall ticker still sees what it is for: the GUI thread blocked (a sleep, as a
synchronous engine call would) or computing is a stall of the window's own."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from tests.app.ticker import Ticker


def _busy(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_blocked_and_a_busy_gui_thread_are_the_windows_own_stalls(qtbot: QtBot) -> None:
    ticker = Ticker()
    QTimer.singleShot(50, lambda: time.sleep(0.2))
    qtbot.wait(400)
    blocked = ticker.longest()
    assert blocked.own_s >= 0.15, blocked

    ticker = Ticker()
    QTimer.singleShot(50, lambda: _busy(0.2))  # 0.2 s of this thread's CPU
    qtbot.wait(400)
    busy = ticker.longest()
    assert busy.own_s >= 0.15, busy


_SLEEP_IN_A_FRESH_PROCESS = """
import time
from tests.support.stalls import Stopwatch
with Stopwatch() as watch:
    time.sleep(0.2)
print(watch.took.wall_s, watch.took.own_s)
"""


def test_a_stopwatch_counts_a_sleep_as_its_own_time() -> None:
    # In a process of one thread: the stopwatch sums every thread's wait for a CPU, and
    # in a test worker other threads (left by earlier tests) waited through the whole
    # sleep at load 7, which said nothing about how a sleep is counted.
    out = subprocess.run(
        [sys.executable, "-c", _SLEEP_IN_A_FRESH_PROCESS],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=60,
    ).stdout
    wall_s, own_s = map(float, out.split())
    assert wall_s >= 0.2
    assert own_s >= 0.15, out
