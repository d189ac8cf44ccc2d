"""Fixtures for the window tests: a MainWindow on a fake engine client."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from tests.app.fake_client import FakeClient

MakeWindow = Callable[..., MainWindow]


@pytest.fixture
def make_window(qtbot: QtBot) -> MakeWindow:
    """A shown window connected to `client`; closed (engine stop included) after the test."""

    def make(client: FakeClient, *, wait_connected: bool = True, **kwargs: object) -> MainWindow:
        window = MainWindow(client_factory=lambda: client, **kwargs)  # type: ignore[arg-type]
        qtbot.addWidget(window)
        window.show()
        if wait_connected:
            qtbot.waitUntil(lambda: window.bridge.connected, timeout=5000)
        return window

    return make
