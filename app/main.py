"""Starting the window: `run_gui` is what `ragdoll` and `ragdoll gui` call."""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from app.gui_gc import collect_on_gui_thread
from app.main_window import MainWindow
from app.qt_compat import keep_none_alive
from app.theme import follow_system_theme

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
    keep_none_alive()
    # Before any worker thread starts: a collection on a worker can deadlock with Qt.
    collect_on_gui_thread(app)
    app.setApplicationName("RAGDoll")
    app.setApplicationDisplayName("RAGDoll")
    app.setOrganizationName("RAGDoll")
    app.setDesktopFileName("ragdoll")
    app.setWindowIcon(app_icon())
    app.setStyle("Fusion")  # the same look everywhere, which the style sheet assumes
    follow_system_theme(app)  # app.qss or its dark variant, as the system asks


def run_gui(*, argv: list[str]) -> int:
    """Show the window at once; the engine is attached to (or started) behind it."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise
    app = QApplication.instance() or QApplication(argv)
    assert isinstance(app, QApplication)
    configure_app(app)
    window = MainWindow()
    window.show()
    _quit_on_terminal_signals(app)
    code = app.exec()
    # app.quit() (Ctrl+C, SIGTERM) skips closeEvent: run its clean-up, which
    # stops an engine this window started. Closing twice is harmless.
    window.close()
    return code


def _quit_on_terminal_signals(app: QApplication) -> None:
    """Ctrl+C in the terminal, or SIGTERM, quits like the Quit menu item.

    Python only runs signal handlers when the interpreter gets control, which a
    blocked Qt event loop never gives it: a timer hands it back 5 times a second."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: app.quit())
    timer = QTimer(app)
    timer.timeout.connect(lambda: None)
    timer.start(200)


if __name__ == "__main__":
    sys.exit(run_gui(argv=sys.argv))
