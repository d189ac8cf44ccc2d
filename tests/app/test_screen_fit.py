"""Every window the main window opens fits the screen it opens on: at 800x600 the
batch dialog's Run and Close, and the Hardware panel's Refresh, were off it."""

from __future__ import annotations

from PySide6.QtCore import QRect
from PySide6.QtWidgets import QApplication, QDialog, QWidget
from pytestqt.qtbot import QtBot

from app.screen_fit import FRAME_HEIGHT, FRAME_WIDTH, resize_within_screen
from tests.app.conftest import MakeWindow
from tests.app.fake_client import FakeClient


def _free() -> QRect:
    screen = QApplication.primaryScreen()
    assert screen is not None
    return screen.availableGeometry()


def _fits(widget: QWidget) -> bool:
    free = _free()
    return (
        widget.width() + FRAME_WIDTH <= free.width()
        and widget.height() + FRAME_HEIGHT <= free.height()
        and widget.minimumSizeHint().width() <= free.width()
    )


def test_a_size_is_kept_where_it_fits_and_cut_to_the_screen_where_not(qtbot: QtBot) -> None:
    free = _free()
    dialog = QDialog()
    qtbot.addWidget(dialog)
    resize_within_screen(widget=dialog, width=300, height=200)
    assert (dialog.width(), dialog.height()) == (300, 200)
    resize_within_screen(widget=dialog, width=free.width() + 500, height=free.height() + 500)
    assert dialog.width() == free.width() - FRAME_WIDTH
    assert dialog.height() == free.height() - FRAME_HEIGHT


def test_the_windows_the_main_window_opens_fit_a_small_screen(
    qtbot: QtBot, make_window: MakeWindow
) -> None:
    # The test screen (offscreen: 800 wide) is narrower than each one's own size.
    assert _free().width() < 1000
    window = make_window(FakeClient())
    windows = {
        "batch": window.show_batch(),
        "hardware": window.hardware_panel,
        "viewer": window.viewer,
        "models": window.models_dialog,
        "activity": window.show_activity(),
    }
    too_big = {name: (w.width(), w.height()) for name, w in windows.items() if not _fits(w)}
    assert not too_big, (too_big, _free())
