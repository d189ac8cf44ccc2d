"""The first-start welcome: what RAGDoll does, the sample collection, a model.

Shown once (remembered in the config folder, see app.ui_state). It only
collects choices; the main window carries them out through the usual paths.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QShowEvent
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
from app.models_pane.model_chooser import FolderChooser, choose_gguf_dialog, choose_model_dialog

INTRO = (
    "<p>RAGDoll answers questions about your own documents, on this computer. "
    "Nothing leaves the machine.</p>"
    "<ul>"
    "<li>Add folders of PDFs, Word, Markdown or text files in the <b>Library</b> on the left.</li>"
    "<li>Ask a question; every answer cites its sources as [1], [2]…</li>"
    "<li>Click a citation to see the page with the passage highlighted.</li>"
    "</ul>"
)


DIALOG_WIDTH = 600
EXTRACTIVE_NOTE = (
    "Without a model, an answer is the few sentences of your documents that match the "
    "question best, quoted word for word, each with its source [1], [2]…; nothing is "
    "rewritten or summarised."
)


@dataclass(frozen=True, kw_only=True)
class WelcomeChoice:
    add_samples: bool
    model: str | None  # a model folder or GGUF file newly chosen, or None
    open_models: bool = False  # show Recommended models next, to download one
    # The model the engine already used is turned off: extractive answers from now on.
    model_off: bool = False


def recommended_hint() -> str:
    """A line naming two small recommended models and what each costs to download,
    read from the catalogue that the Recommended models list shows."""
    from engine.service.models.catalogue import load_catalogue

    small = [e for e in load_catalogue() if 2e9 <= e.download_bytes <= 7e9][:2]
    named = " or ".join(f"{e.name} ({e.download_bytes / 1e9:.1f} GB)" for e in small)
    return (
        "Recommended models lists models with how each would run on this computer and its "
        f"download size{': ' + named if named else ''}. Nothing is downloaded until you ask."
    )


class WelcomeDialog(QDialog):
    def __init__(
        self,
        *,
        choose_model_folder: FolderChooser = choose_model_dialog,
        choose_model_file: FolderChooser = choose_gguf_dialog,
        add_samples: bool = True,
        opening: list[str] | None = None,
        in_use: str | None = None,
        parent: QWidget | None = None,
    ) -> None:
        """`opening`: folders the window was asked to add (`ragdoll open`); the
        sample collection is then not offered ticked. `in_use`: the model the engine
        already answers with (chosen from the command line before the first start)."""
        super().__init__(parent)
        self.setObjectName("welcome")
        self.setWindowTitle("Welcome to RAGDoll")
        self.setMinimumWidth(DIALOG_WIDTH)
        self._choose_model_folder = choose_model_folder
        self._choose_model_file = choose_model_file
        self._model: str | None = None
        self._in_use = in_use
        self._recommended = False  # Recommended models asked for

        title = QLabel("Welcome to RAGDoll")
        title.setObjectName("paneTitle")
        intro = QLabel(INTRO)
        intro.setWordWrap(True)
        intro.setTextFormat(Qt.TextFormat.RichText)

        self.samples = QCheckBox(
            "Add the sample collection (a short user guide to try questions on)"
        )
        self.samples.setAccessibleName("Add the sample collection")
        self.samples.setChecked(add_samples and not opening)
        self.opening_label = QLabel("")
        self.opening_label.setObjectName("quiet")
        self.opening_label.setTextFormat(Qt.TextFormat.PlainText)
        self.opening_label.setWordWrap(True)
        if opening:
            names = ", ".join(file_name(path=p) for p in opening[:3])
            more = f" and {len(opening) - 3} more" if len(opening) > 3 else ""
            self.opening_label.setText(f"Adding {names}{more} to the library now.")
        self.opening_label.setVisible(bool(opening))

        answers = QLabel("How should answers be written?")
        answers.setObjectName("sectionTitle")
        self.extractive = QRadioButton("Quote the best passages (no language model, works at once)")
        self.extractive.setAccessibleName("Extractive answers, no model")
        self.extractive.setChecked(True)
        extractive_note = QLabel(EXTRACTIVE_NOTE)
        extractive_note.setObjectName("quiet")
        extractive_note.setWordWrap(True)
        extractive_note.setContentsMargins(24, 0, 0, 0)
        self.generative = QRadioButton("Write answers with a language model on this computer")
        self.generative.setAccessibleName("Answers from a language model")
        self.models_button = QPushButton("Recommended models…")
        self.models_button.setAccessibleName("Show the recommended models, with download sizes")
        self.models_button.setToolTip("Opens after Get started; choose one there and Download")
        self.models_button.clicked.connect(self._want_recommended)
        self.choose_button = QPushButton("A model folder…")
        self.choose_button.setAccessibleName("Choose a language model folder")
        self.choose_button.clicked.connect(lambda: self._choose(self._choose_model_folder))
        # The file llama.cpp, LM Studio or Ollama users already have.
        self.gguf_button = QPushButton("A GGUF file…")
        self.gguf_button.setAccessibleName("Choose a GGUF model file")
        self.gguf_button.clicked.connect(lambda: self._choose(self._choose_model_file))
        # Enter must press Get started whatever has the focus, never open a picker.
        for button in (self.models_button, self.choose_button, self.gguf_button):
            button.setAutoDefault(False)
        self.model_label = QLabel(
            f"In use: {file_name(path=in_use)}" if in_use else "No model chosen"
        )
        if in_use:
            self.model_label.setToolTip(in_use)
        self.model_label.setObjectName("quiet")
        self.model_label.setTextFormat(Qt.TextFormat.PlainText)
        model_row = QHBoxLayout()
        model_row.setContentsMargins(24, 0, 0, 0)
        model_row.addWidget(self.models_button)
        model_row.addWidget(self.choose_button)
        model_row.addWidget(self.gguf_button)
        model_row.addStretch(1)
        # On its own line: three buttons leave no room beside them for a long file name.
        self.model_label.setContentsMargins(24, 0, 0, 0)
        self.model_hint = QLabel(recommended_hint())
        self.model_hint.setObjectName("quiet")
        self.model_hint.setWordWrap(True)
        self.model_hint.setContentsMargins(24, 0, 0, 0)
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
        skip.setAutoDefault(False)
        skip.setAccessibleName("Skip the welcome")
        skip.clicked.connect(self.reject)
        buttons.addButton(self.start_button, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(skip, QDialogButtonBox.ButtonRole.RejectRole)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(22, 18, 22, 14)
        layout.setSpacing(8)
        layout.addWidget(title)
        layout.addWidget(intro)
        layout.addWidget(self.opening_label)
        layout.addWidget(self.samples)
        layout.addSpacing(6)
        layout.addWidget(answers)
        layout.addWidget(self.extractive)
        layout.addWidget(extractive_note)
        layout.addWidget(self.generative)
        layout.addLayout(model_row)
        layout.addWidget(self.model_label)
        layout.addWidget(self.model_hint)
        layout.addSpacing(6)
        layout.addWidget(note)
        layout.addWidget(buttons)
        # Word-wrapped text: a top-level window does not size itself by height for
        # width, so ask the layout how tall it is at this width, or lines are cut.
        self.resize(DIALOG_WIDTH, layout.totalHeightForWidth(DIALOG_WIDTH))
        self.setMinimumHeight(layout.totalHeightForWidth(DIALOG_WIDTH))
        if in_use:  # now that the two share a parent, so checking one clears the other
            self.generative.setChecked(True)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        # The highlighted button has the focus, so the focus ring and Enter agree.
        self.start_button.setFocus(Qt.FocusReason.ActiveWindowFocusReason)

    def _want_recommended(self) -> None:
        self._model = None
        self._recommended = True
        self.generative.setChecked(True)
        self.model_label.setText("Recommended models open after Get started")
        self.model_label.setToolTip("")

    def _choose(self, chooser: FolderChooser) -> None:
        folder = chooser(self)
        if folder:
            self._model = folder
            self._recommended = False
            self.model_label.setText(file_name(path=folder))
            self.model_label.setToolTip(folder)
            self.generative.setChecked(True)

    def choice(self) -> WelcomeChoice:
        generative = self.generative.isChecked()
        model = self._model if generative else None
        kept = generative and model is None and self._in_use is not None and not self._recommended
        return WelcomeChoice(
            add_samples=self.samples.isChecked(),
            model=model,
            # Asking for a model without a folder: the list is where to get one.
            open_models=generative and model is None and not kept,
            model_off=not generative and self._in_use is not None,
        )
