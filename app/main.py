"""Starting the window: `run_gui` is what `ragdoll` and `ragdoll gui` call."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from app.main_window import MainWindow

log = logging.getLogger(__name__)


def resources_dir() -> Path:
    import resources

    return Path(resources.__file__).parent


def app_icon() -> QIcon:
    return QIcon(str(resources_dir() / "icons" / "ragdoll.svg"))


def app_style_sheet() -> str:
    """The app's QSS; a missing file means a plainer window, not a crash."""
    path = resources_dir() / "styles" / "app.qss"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        log.warning("no style sheet at %s", path)
        return ""


def configure_app(app: QApplication) -> None:
    app.setApplicationName("RAGDoll")
    app.setApplicationDisplayName("RAGDoll")
    app.setOrganizationName("RAGDoll")
    app.setDesktopFileName("ragdoll")
    app.setWindowIcon(app_icon())
    app.setStyle("Fusion")  # the same look everywhere, which the style sheet assumes
    app.setStyleSheet(app_style_sheet())


def run_gui(*, argv: list[str]) -> int:
    """Show the window at once; the engine is attached to (or started) behind it."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    app = QApplication.instance() or QApplication(argv)
    assert isinstance(app, QApplication)
    configure_app(app)
    window = MainWindow()
    window.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(run_gui(argv=sys.argv))
