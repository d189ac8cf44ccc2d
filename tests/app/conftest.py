"""Fixtures for the window tests: a MainWindow on a fake engine client."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.qt_compat import keep_none_alive
from tests.app.fake_client import FakeClient

MakeWindow = Callable[..., MainWindow]

keep_none_alive()  # before any test makes thousands of Qt calls


@pytest.fixture
def make_window(qtbot: QtBot, ragdoll_home: Path) -> MakeWindow:
    """A shown window connected to `client`; closed (engine stop included) after the test.
    Its conversations and window state go to the test's own RAGDOLL_HOME."""

    def make(client: FakeClient, *, wait_connected: bool = True, **kwargs: object) -> MainWindow:
        kwargs.setdefault("show_welcome", False)
        window = MainWindow(client_factory=lambda: client, **kwargs)  # type: ignore[arg-type]
        qtbot.addWidget(window)
        window.show()
        if wait_connected:
            qtbot.waitUntil(lambda: window.bridge.connected, timeout=5000)
        return window

    return make
