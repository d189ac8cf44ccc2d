"""The real window on a real engine process: add a folder, ask, open a source.

Everything between the window and the page text is real: EngineClient over
HTTP, the engine's ingestion of Markdown, text and PDF files, the bundled
embedder, the extractive answer with citations, and the source endpoint.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from engine.client import EngineClient
from engine.paths import resolve_paths
from tests.fixtures.pdf_factory import PdfPage, write_pdf
from tests.support.engine import RunningEngine

BRIDGE_FINDING = (
    "The inspection of the Alder Street bridge found corrosion on the north pylon, "
    "and the repair crew will replace four rusted bolts in October."
)


def _documents(folder: Path) -> Path:
    folder.mkdir()
    (folder / "lighthouse.md").write_text(
        "# Lighthouse notes\n\nThe lighthouse keeper feeds a grey cat named Biscuit "
        "every morning at seven, before the lamp is cleaned.\n"
    )
    (folder / "garden.txt").write_text(
        "The community garden project has a budget of 4,200 euros for raised beds, "
        "compost bins and a rain water tank.\n"
    )
    write_pdf(
        path=folder / "bridge report.pdf",
        pages=[
            PdfPage(
                heading="Bridge report",
                paragraphs=["This report covers the yearly inspection of the city's footbridges."],
            ),
            PdfPage(heading="Findings", paragraphs=[BRIDGE_FINDING]),
        ],
    )
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a PDF")
    return folder


def test_add_a_folder_ask_and_open_the_cited_page(
    qtbot: QtBot, engine: RunningEngine, tmp_path: Path
) -> None:
    folder = _documents(tmp_path / "my documents")
    window = MainWindow(
        # The test's engine belongs to the fixture: attach, never start or stop it.
        client_factory=lambda: EngineClient.connect(paths=resolve_paths(), start=False),
        choose_folder=lambda parent: str(folder),
    )
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.bridge.connected, timeout=30_000)
    assert not window.bridge.started_engine

    qtbot.mouseClick(window.library.add_folder_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.library.ingesting, timeout=5_000)
    qtbot.waitUntil(lambda: not window.library.ingesting, timeout=120_000)
    qtbot.waitUntil(lambda: window.library.documents_model.rowCount() == 3, timeout=10_000)
    library = window.library
    assert library.progress_box.title() == "Documents added"
    assert library.progress_bar.value() == library.progress_bar.maximum() == 4
    (error,) = library.errors_model.errors()
    assert Path(error.path).name == "broken.pdf"
    assert error.reason

    qtbot.keyClicks(window.chat.question, "What did the inspection of the bridge find?")
    qtbot.keyClick(window.chat.question, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.chat.streaming, timeout=60_000)
    transcript = window.chat.transcript.toPlainText()
    assert "corrosion" in transcript
    assert "The answer failed" not in transcript
    sources = window.chat.sources_model
    cited = [(Path(c.path).name, c.page) for c in map(sources.citation, range(sources.rowCount()))]
    assert ("bridge report.pdf", 2) in cited, cited
    row = cited.index(("bridge report.pdf", 2))

    view = window.chat.sources
    rect = view.visualRect(sources.index(row, 0))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: window.viewer.isVisible(), timeout=10_000)
    assert window.viewer.windowTitle() == "bridge report.pdf — page 2"
    (selection,) = window.viewer.text.extraSelections()
    highlighted = selection.cursor.selectedText()
    assert "corrosion on the north pylon" in " ".join(highlighted.split())
    page = window.viewer.text.toPlainText()
    assert page[selection.cursor.selectionStart() : selection.cursor.selectionEnd()] == (
        highlighted.replace("\u2029", "\n")
    )

    window.close()
    assert engine.client.status().documents == 3  # the window left the engine running
