"""Light and dark looks that follow the system, or RAGDOLL_THEME=light|dark.

The style sheet sets most colours; the Fusion palette is switched too, so that
what the sheet does not cover (menus, tooltips, link colours in documents)
matches. Widgets that paint their own colours ask `is_dark()`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Literal

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

log = logging.getLogger(__name__)

Scheme = Literal["light", "dark"]
THEME_ENV = "RAGDOLL_THEME"
_PROPERTY = "ragdollScheme"


def styles_dir() -> Path:
    import resources

    return Path(resources.__file__).parent / "styles"


def system_scheme() -> Scheme:
    """The scheme asked for by RAGDOLL_THEME, else the system's (Qt 6.5+)."""
    forced = os.environ.get(THEME_ENV, "").strip().lower()
    if forced in ("light", "dark"):
        return forced  # type: ignore[return-value]
    app = QGuiApplication.instance()
    if app is None:
        return "light"
    hints = QGuiApplication.styleHints()
    return "dark" if hints.colorScheme() == Qt.ColorScheme.Dark else "light"


def is_dark() -> bool:
    app = QGuiApplication.instance()
    if app is None:
        return False
    value = app.property(_PROPERTY)
    return value == "dark" if value else system_scheme() == "dark"


def style_sheet(*, scheme: Scheme) -> str:
    name = "app-dark.qss" if scheme == "dark" else "app.qss"
    path = styles_dir() / name
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        log.warning("no style sheet at %s", path)
        return ""
    # Qt resolves url() against the working directory, not the sheet's folder.
    return text.replace("@STYLES@", styles_dir().as_posix())


def dark_palette() -> QPalette:
    p = QPalette()
    role = QPalette.ColorRole
    colours = {
        role.Window: "#1c1f24",
        role.WindowText: "#e6e8eb",
        role.Base: "#23272e",
        role.AlternateBase: "#262b33",
        role.ToolTipBase: "#2a2f37",
        role.ToolTipText: "#e6e8eb",
        role.Text: "#e6e8eb",
        role.Button: "#2a2f37",
        role.ButtonText: "#e6e8eb",
        role.BrightText: "#ffffff",
        role.Highlight: "#2f4f86",
        role.HighlightedText: "#ffffff",
        role.Link: "#7fb0ff",
        role.PlaceholderText: "#8b949e",
    }
    for r, c in colours.items():
        p.setColor(r, QColor(c))
    p.setColor(QPalette.ColorGroup.Disabled, role.Text, QColor("#6e7681"))
    p.setColor(QPalette.ColorGroup.Disabled, role.ButtonText, QColor("#6e7681"))
    return p


def light_palette() -> QPalette:
    p = QPalette()
    p.setColor(QPalette.ColorRole.Link, QColor("#1d5fd1"))
    p.setColor(QPalette.ColorRole.PlaceholderText, QColor("#6b7280"))
    return p


def apply_theme(app: QApplication, *, scheme: Scheme | None = None) -> Scheme:
    """Set the palette and style sheet for `scheme` (default: the system's)."""
    chosen = scheme or system_scheme()
    app.setProperty(_PROPERTY, chosen)
    app.setPalette(dark_palette() if chosen == "dark" else light_palette())
    app.setStyleSheet(style_sheet(scheme=chosen))
    return chosen


def follow_system_theme(app: QApplication) -> None:
    """Apply the system's scheme now and again whenever it changes."""
    apply_theme(app)
    if os.environ.get(THEME_ENV, "").strip().lower() in ("light", "dark"):
        return
    QGuiApplication.styleHints().colorSchemeChanged.connect(lambda _s: apply_theme(app))
