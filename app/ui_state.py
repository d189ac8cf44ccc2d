"""What the window remembers between runs: geometry, splitters, the welcome.

Kept in an INI file in the app's config folder (not the platform's default
QSettings place) so that RAGDOLL_HOME moves it with everything else and tests
never touch the person's own settings.
"""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtWidgets import QMainWindow, QSplitter

from engine.paths import resolve_paths


def ui_settings() -> QSettings:
    folder = resolve_paths().config
    folder.mkdir(parents=True, exist_ok=True)
    return QSettings(str(folder / "window.ini"), QSettings.Format.IniFormat)


def save_window(*, window: QMainWindow, splitters: dict[str, QSplitter]) -> None:
    s = ui_settings()
    s.setValue("window/geometry", window.saveGeometry())
    s.setValue("window/state", window.saveState())
    for name, splitter in splitters.items():
        s.setValue(f"splitters/{name}", splitter.saveState())
    s.sync()


def restore_window(*, window: QMainWindow, splitters: dict[str, QSplitter]) -> bool:
    """True when there was a saved geometry to restore."""
    s = ui_settings()
    geometry = s.value("window/geometry")
    restored = isinstance(geometry, QByteArray) and window.restoreGeometry(geometry)
    state = s.value("window/state")
    if isinstance(state, QByteArray):
        window.restoreState(state)
    for name, splitter in splitters.items():
        value = s.value(f"splitters/{name}")
        if isinstance(value, QByteArray):
            splitter.restoreState(value)
    return restored


def welcome_seen() -> bool:
    return ui_settings().value("welcome/seen", False, type=bool)


def mark_welcome_seen() -> None:
    s = ui_settings()
    s.setValue("welcome/seen", True)
    s.sync()


def last_conversation() -> str:
    """The conversation open when the window last closed ("" when none was)."""
    return str(ui_settings().value("chat/last_conversation", "") or "")


def remember_conversation(conversation_id: str) -> None:
    s = ui_settings()
    s.setValue("chat/last_conversation", conversation_id)
    s.sync()
