"""The window keeps an engine: kill -9 it during a chat and the window says so,
starts a new one, and the index is intact. Quitting stops the engine it started,
unless the person keeps it running."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from engine.paths import resolve_paths
from engine.service.client import EngineClient
from tests.app.conftest import MakeWindow
from tests.app.fake_client import FakeClient
from tests.support.engine import process_alive


def test_kill_9_during_a_chat_restarts_the_engine_with_the_index_intact(
    qtbot: QtBot, ragdoll_home: Path, tmp_path: Path
) -> None:
    from engine.runtime.models.synthetic import write_random_model

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "garden.txt").write_text("The garden budget is 4,200 euros for raised beds.\n")
    model = write_random_model(folder=tmp_path / "tiny-llama")

    window = MainWindow()  # the default factory: attach to an engine, or start one
    pids: list[int] = []
    lost: list[str] = []
    tokens: list[str] = []
    window.bridge.sig_connected.connect(lambda status: pids.append(status.pid))
    window.bridge.sig_engine_lost.connect(lost.append)
    window.chat.sig_ask.connect(lambda stream: stream.sig_token.connect(tokens.append))
    qtbot.addWidget(window)
    window.show()
    try:
        qtbot.waitUntil(lambda: window.bridge.connected, timeout=90_000)
        with EngineClient.connect(paths=resolve_paths(), start=False) as client:
            job = client.add_paths(paths=[str(notes)])
            for _ in client.ingest_events(job_id=job.job_id):
                pass
            client.set_model(model=str(model))  # a model streams long enough to be cut
            before = client.status()
            indexed = client.documents()
        assert before.documents == 1 and before.chunks >= 1

        qtbot.keyClicks(window.chat.question, "What is the garden budget?")
        qtbot.keyClick(window.chat.question, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: bool(tokens), timeout=60_000)
        assert window.chat.streaming
        os.kill(pids[0], signal.SIGKILL)
        t_killed = time.monotonic()

        # The answer fails, the window says the engine stopped, and a new one comes.
        qtbot.waitUntil(lambda: not window.chat.streaming, timeout=30_000)
        qtbot.waitUntil(lambda: bool(lost), timeout=30_000)
        assert "stopped unexpectedly" in lost[0]
        qtbot.waitUntil(lambda: len(pids) == 2 and window.bridge.connected, timeout=90_000)
        print(f"engine back {time.monotonic() - t_killed:.1f} s after kill -9")
        assert pids[1] != pids[0] and not process_alive(pids[0])
        assert "restarted" in window.banner.message
        assert "1 document" in window.banner.message
        assert window.bridge.started_engine

        # The index survived: the same documents and chunks, read from disk by
        # the new engine (answering again would only wait for its embedder).
        with EngineClient.connect(paths=resolve_paths(), start=False) as client:
            after = client.status()
            assert (after.documents, after.chunks) == (before.documents, before.chunks)
            assert client.documents() == indexed
            assert client.errors() == []
        assert window.chat.question.isEnabled()  # ready to ask again
        window.close()
        # A deadline, not a bound: at load 10 one engine was still stopping after 30 s.
        deadline = time.monotonic() + 120
        while process_alive(pids[1]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not process_alive(pids[1]), "the restarted engine outlived the window"
    finally:
        for pid in pids:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)


@dataclass(kw_only=True)
class DyingClient(FakeClient):
    dead: bool = False

    def alive(self, *, timeout_s: float = 5.0) -> bool:
        return not self.dead


def test_a_dead_engine_is_noticed_and_replaced(qtbot: QtBot) -> None:
    first, second = DyingClient(), DyingClient()
    clients = iter([first, second])
    window = MainWindow(client_factory=lambda: next(clients))
    window.bridge._health.setInterval(50)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.bridge.connected, timeout=5000)
    with qtbot.waitSignal(window.bridge.sig_engine_restarted, timeout=5000):
        first.dead = True
    assert window.bridge.connected
    assert "restarted" in window.banner.message
    window.close()


def test_an_engine_that_keeps_dying_is_given_up(qtbot: QtBot) -> None:
    made: list[DyingClient] = []

    def factory() -> DyingClient:
        made.append(DyingClient(dead=True))
        return made[-1]

    window = MainWindow(client_factory=factory)
    window.bridge._health.setInterval(20)
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.bridge.sig_connect_failed, timeout=10_000) as failed:
        pass
    assert "not restarted again" in failed.args[0]
    assert len(made) == 4  # the first and three restarts
    window.close()


def test_quitting_stops_the_engine_unless_kept_running(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    client = FakeClient(started_here=True)
    window = make_window(client)
    qtbot.waitUntil(window.keep_running_action.isEnabled, timeout=30_000)
    assert not window.keep_running_action.isChecked()  # the default: stop
    window.keep_running_action.trigger()
    qtbot.waitUntil(lambda: window.bridge.keep_running, timeout=30_000)
    assert client.called("set_server_settings") == [{"keep_engine_running": True}]
    assert window.keep_running_action.isChecked()
    window.close()
    assert not client.called("shutdown")

    other = FakeClient(started_here=True)
    window = make_window(other)
    window.close()
    assert other.called("shutdown") == [{}]
