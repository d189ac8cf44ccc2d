"""The stall ticker still sees what it is for: the GUI thread blocked (a sleep, as a
synchronous engine call would) or computing is a stall of the window's own."""

from __future__ import annotations

import time

from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from tests.app.ticker import Ticker
from tests.support.stalls import Stopwatch


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


def test_a_stopwatch_counts_a_sleep_as_its_own_time() -> None:
    with Stopwatch() as watch:
        time.sleep(0.2)
    assert watch.took.wall_s >= 0.2
    assert watch.took.own_s >= 0.15, watch.took
