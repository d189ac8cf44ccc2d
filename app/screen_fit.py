"""A window's first size: what it asks for, within the screen it opens on.

At 800x600 the batch dialog (1000x760) opened with Run, Close and the exports off
the screen, the Hardware panel (820 wide) with Refresh cut off: a size that suits a
1400x900 desktop is only an upper bound."""

from __future__ import annotations

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

# The window manager's frame (borders, title bar) is not known before the first
# show; the size asked for here is the inside of it.
FRAME_WIDTH = 16
FRAME_HEIGHT = 48


def resize_within_screen(*, widget: QWidget, width: int, height: int) -> None:
    screen = widget.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        widget.resize(width, height)
        return
    free = screen.availableGeometry()
    widget.resize(min(width, free.width() - FRAME_WIDTH), min(height, free.height() - FRAME_HEIGHT))
