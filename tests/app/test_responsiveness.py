"""The window never freezes: engine calls that take a second each leave the
event loop free to run a 10 ms timer without a noticeable gap."""

from __future__ import annotations

import itertools
import time

from PySide6.QtCore import Qt, QTimer
from pytestqt.qtbot import QtBot

from tests.app.conftest import MakeWindow
from tests.app.fake_client import FakeClient

MAX_GAP_S = 0.1


def test_the_event_loop_keeps_running_while_the_engine_is_slow(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(delay_s=1.0, token_delay_s=0.1)
    ticks: list[float] = []
    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(time.monotonic()))
    timer.start()

    window = make_window(client, choose_model_folder=lambda parent: "/models/slow")
    qtbot.keyClicks(window.chat.question, "What do tomatoes need?")
    qtbot.keyClick(window.chat.question, Qt.Key.Key_Return)
    window.model_chooser.choose_action.trigger()  # a slow model load at the same time
    qtbot.waitUntil(lambda: not window.chat.streaming, timeout=10_000)
    qtbot.waitUntil(window.model_chooser.isEnabled, timeout=10_000)
    timer.stop()

    assert client.called("ask_stream") and client.called("set_model")
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(ticks) > 100
    assert max(gaps) < MAX_GAP_S, f"the GUI thread stalled for {max(gaps) * 1000:.0f} ms"
