"""The real window on a real engine: a file dropped into a watched folder makes a
job the engine starts itself, and the window shows it as it shows its own."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from engine.paths import resolve_paths
from engine.service.client import EngineClient
from tests.support.engine import RunningEngine


def test_a_file_dropped_into_a_watched_folder_shows_as_a_job(
    qtbot: QtBot, engine: RunningEngine, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "garden.txt").write_text("The garden budget is 4,200 euros for raised beds.\n")
    assert engine.ingest(notes).state == "done"  # watched and indexed, as from the CLI
    window = MainWindow(
        client_factory=lambda: EngineClient.connect(paths=resolve_paths(), start=False),
        show_welcome=False,
    )
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.bridge.connected, timeout=30_000)
    library = window.library
    qtbot.waitUntil(lambda: library.documents_model.rowCount() == 1, timeout=10_000)

    # Paused, the watcher's job waits in the queue: the window must find it there.
    engine.client.pause_ingest()
    (notes / "bridge.txt").write_text("The Alder Street bridge needs four new bolts.\n")
    qtbot.waitUntil(lambda: library.ingesting, timeout=30_000)
    assert library.progress_box.title().startswith("A watched folder changed")
    qtbot.waitUntil(library.resume_button.isVisible, timeout=10_000)
    qtbot.mouseClick(library.resume_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not library.ingesting, timeout=60_000)
    assert library.progress_box.title() == "Watched folder updated"
    qtbot.waitUntil(lambda: library.documents_model.rowCount() == 2, timeout=10_000)

    # Unpaused, a small change can be done between two probes: the library still
    # follows, since the engine's counts changed.
    (notes / "lighthouse.txt").write_text("The lighthouse keeper feeds a cat named Biscuit.\n")
    qtbot.waitUntil(lambda: library.documents_model.rowCount() == 3, timeout=30_000)
    window.close()
