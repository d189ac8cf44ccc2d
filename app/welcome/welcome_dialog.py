"""The first-start welcome: what RAGDoll does, the sample collection, a model.

Shown once (remembered in the config folder, see app.ui_state). It only
collects choices; the main window carries them out through the usual paths.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.answer_render import file_name
from app.models_pane.model_chooser import FolderChooser, choose_model_dialog

INTRO = (
    "<p>RAGDoll answers questions about your own documents, on this computer. "
    "Nothing leaves the machine.</p>"
    "<ul>"
    "<li>Add folders of PDFs, Word, Markdown or text files in the <b>Library</b> on the left.</li>"
    "<li>Ask a question; every answer cites its sources as [1], [2]…</li>"
    "<li>Click a citation to see the page with the passage highlighted.</li>"
    "</ul>"
)


@dataclass(frozen=True, kw_only=True)
class WelcomeChoice:
    add_samples: bool
    model: str | None  # a model folder, or None for extractive answers


class WelcomeDialog(QDialog):
    def __init__(
        self,
        *,
        choose_model_folder: FolderChooser = choose_model_dialog,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("welcome")
        self.setWindowTitle("Welcome to RAGDoll")
        self.setMinimumWidth(520)
        self._choose_model_folder = choose_model_folder
        self._model: str | None = None

        title = QLabel("Welcome to RAGDoll")
        title.setObjectName("paneTitle")
        intro = QLabel(INTRO)
        intro.setWordWrap(True)
        intro.setTextFormat(Qt.TextFormat.RichText)

        self.samples = QCheckBox(
            "Add the sample collection (a short user guide to try questions on)"
        )
        self.samples.setAccessibleName("Add the sample collection")
        self.samples.setChecked(True)

        answers = QLabel("How should answers be written?")
        answers.setObjectName("sectionTitle")
        self.extractive = QRadioButton("Quote the best passages (no language model, works at once)")
        self.extractive.setAccessibleName("Extractive answers, no model")
        self.extractive.setChecked(True)
        self.generative = QRadioButton("Write answers with a language model on this computer")
        self.generative.setAccessibleName("Answers from a language model")
        self.choose_button = QPushButton("Choose a model folder…")
        self.choose_button.setAccessibleName("Choose a language model folder")
        self.choose_button.clicked.connect(self._choose)
        self.model_label = QLabel("No model chosen")
        self.model_label.setObjectName("quiet")
        self.model_label.setTextFormat(Qt.TextFormat.PlainText)
        model_row = QHBoxLayout()
        model_row.setContentsMargins(24, 0, 0, 0)
        model_row.addWidget(self.choose_button)
        model_row.addWidget(self.model_label, 1)
        note = QLabel("You can change both later: File ▸ Add the sample collection, and Model.")
        note.setObjectName("quiet")
        note.setWordWrap(True)

        buttons = QDialogButtonBox()
        self.start_button = QPushButton("Get started")
        self.start_button.setObjectName("askButton")
        self.start_button.setAccessibleName("Get started")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.accept)
        skip = QPushButton("Skip")
        skip.setAccessibleName("Skip the welcome")
        skip.clicked.connect(self.reject)
        buttons.addButton(self.start_button, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(skip, QDialogButtonBox.ButtonRole.RejectRole)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(22, 18, 22, 14)
        layout.setSpacing(8)
        layout.addWidget(title)
        layout.addWidget(intro)
        layout.addWidget(self.samples)
        layout.addSpacing(6)
        layout.addWidget(answers)
        layout.addWidget(self.extractive)
        layout.addWidget(self.generative)
        layout.addLayout(model_row)
        layout.addSpacing(6)
        layout.addWidget(note)
        layout.addWidget(buttons)

    def _choose(self) -> None:
        folder = self._choose_model_folder(self)
        if folder:
            self._model = folder
            self.model_label.setText(file_name(path=folder))
            self.model_label.setToolTip(folder)
            self.generative.setChecked(True)

    def choice(self) -> WelcomeChoice:
        model = self._model if self.generative.isChecked() else None
        return WelcomeChoice(add_samples=self.samples.isChecked(), model=model)
